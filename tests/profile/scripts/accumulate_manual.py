"""Gradient accumulation without torch.optim: 4 backward calls, then a hand-written update
and a reset of the gradients."""
import sys

import torch


def main() -> None:
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    for _ in range(int(sys.argv[1])):
        for _micro in range(4):
            x = torch.randn(32, 128)
            (model(x).pow(2).mean() / 4).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
        model.zero_grad()


if __name__ == "__main__":
    main()
