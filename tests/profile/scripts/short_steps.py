"""A from-scratch tutorial loop with sub-millisecond steps: a two-layer net written as
tensor expressions (no nn.Module), loss.backward(), a hand-written update and
grad.zero_(), the loss printed every step. Thirty such steps are a ~20 ms window."""
import sys

import torch


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(64, 1000), torch.randn(64, 10)
    w1 = torch.randn(1000, 100, requires_grad=True)
    w2 = torch.randn(100, 10, requires_grad=True)
    lr = 1e-6
    for t in range(int(sys.argv[1])):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        print(t, loss.item())
        loss.backward()
        with torch.no_grad():
            w1 -= lr * w1.grad
            w2 -= lr * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()


if __name__ == "__main__":
    main()
