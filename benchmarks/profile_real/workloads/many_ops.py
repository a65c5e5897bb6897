"""The memory-bound benchmark's many-operators case: a model whose forward is a Python loop
of element-wise operators on small tensors, about ``--ops`` operators per training step
(forward, backward and SGD together).

    python many_ops.py --steps 12 --ops 46000
"""
import argparse

import torch


class Chain(torch.nn.Module):
    def __init__(self, links: int) -> None:
        super().__init__()
        self.links = links
        self.scale = torch.nn.Parameter(torch.ones(64))
        self.shift = torch.nn.Parameter(torch.zeros(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.links):
            x = torch.tanh(x * self.scale + self.shift)
        return x.pow(2).mean()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--ops", type=int, default=46000)
    a = p.parse_args()
    torch.set_num_threads(1)
    model = Chain(a.ops // 14)  # 3 forward + 11 backward (incl. grad accumulation) ops per link
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    for _ in range(a.steps):
        loss = model(torch.randn(32, 64))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
