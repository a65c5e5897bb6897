"""A physics-informed-network-style fit: the whole optimisation is ONE LBFGS step with a
huge max_iter, the closure evaluated hundreds of times inside it."""
import sys

import torch


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 2048).unsqueeze(1)
    y = torch.sin(3 * x)
    net = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
                              torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.LBFGS(net.parameters(), lr=1.0, max_iter=int(sys.argv[1]),
                            tolerance_grad=0.0, tolerance_change=0.0, history_size=10)

    def closure():
        opt.zero_grad()
        loss = torch.mean((net(x) - y) ** 2)
        loss.backward()
        return loss

    opt.step(closure)


if __name__ == "__main__":
    main()
