"""A DataLoader loop with an optimizer that is not a torch.optim.Optimizer (a plain class
with its own step): steps come from backward(), and the window completes."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


class SignSGD:
    def __init__(self, params, lr: float) -> None:
        self.params, self.lr = list(params), lr

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            p.sub_(self.lr * p.grad.sign())

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


def main() -> None:
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = SignSGD(model.parameters(), lr=1e-3)
    loader = DataLoader(data, batch_size=128)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= int(sys.argv[1]):
            break


if __name__ == "__main__":
    main()
