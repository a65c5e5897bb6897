"""A step of tens of thousands of tiny operators (argv[2] per step): the probe's bound."""
import sys

import torch


class ManyOps(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        for _ in range(self.n):
            x = x * self.w + 0.001
        return x.sum()


def main() -> None:
    torch.set_num_threads(1)
    steps, n = int(sys.argv[1]), int(sys.argv[2]) // 6  # ~2 forward + ~4 backward ops each
    model = ManyOps(n)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    for _ in range(steps):
        loss = model(torch.randn(4))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
