"""Gradient accumulation: 4 micro-batches (4 backward calls) per optimizer step."""
import sys

import torch


def main() -> None:
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(int(sys.argv[1])):
        for _micro in range(4):
            x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
            (torch.nn.functional.cross_entropy(model(x), y) / 4).backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
