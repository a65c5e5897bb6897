"""Planted scenario: host-bound. The model runs hundreds of tiny element-wise ops per step."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


class TinyOps(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        h = x
        for _ in range(300):  # a Python loop of 8-element ops: all dispatch, no math
            h = h * self.w + 0.001
        return h.sum(dim=1)


def main() -> None:
    torch.set_num_threads(1)  # steadier timings on a shared machine
    data = TensorDataset(torch.randn(256, 8), torch.randn(256))
    model = TinyOps()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = DataLoader(data, batch_size=4)
    done = 0
    while done < int(sys.argv[1]):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done >= int(sys.argv[1]):
                break


if __name__ == "__main__":
    main()
