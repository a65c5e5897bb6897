"""A model written as plain functions over parameter tensors (no nn.Module, as in
from-scratch tutorials), a hand-written update rule, batches from a generator:
compute-bound, its forward found by the operator probe."""
import sys

import torch


def batches(x, y, size):
    while True:
        idx = torch.randint(0, len(x), (size,))
        yield x[idx], y[idx]


def net(x, params):
    w1, b1, w2, b2 = params
    h = torch.relu(x @ w1 + b1)
    return h @ w2 + b2


def sgd(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad.zero_()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(8192, 512), torch.randint(0, 10, (8192,))
    params = [torch.randn(512, 1024) * 0.02, torch.zeros(1024), torch.randn(1024, 10) * 0.02,
              torch.zeros(10)]
    for p in params:
        p.requires_grad_(True)
    for step, (xb, yb) in enumerate(batches(x, y, 256)):
        loss = torch.nn.functional.cross_entropy(net(xb, params), yb)
        loss.backward()
        sgd(params, 0.1)
        if step + 1 >= int(sys.argv[1]):
            break


if __name__ == "__main__":
    main()
