"""The memory-bound benchmark's LBFGS case, written for pitstop in the shape of the classic
sine-wave time-series example: two LSTMCells stepped over every time step in Python, a
Linear head, MSE, and LBFGS with a closure (up to ``--max-iter`` forward+backward passes
per optimizer step). About two million operators per step at the default sizes.

    python lstm_lbfgs.py --steps 4 --batch 97 --length 999
"""
import argparse

import torch


class Sequence(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.lstm1 = torch.nn.LSTMCell(1, hidden)
        self.lstm2 = torch.nn.LSTMCell(hidden, hidden)
        self.linear = torch.nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        state1 = (torch.zeros(n, self.hidden, dtype=x.dtype), torch.zeros(n, self.hidden, dtype=x.dtype))
        state2 = (torch.zeros(n, self.hidden, dtype=x.dtype), torch.zeros(n, self.hidden, dtype=x.dtype))
        out = []
        for column in x.split(1, dim=1):
            state1 = self.lstm1(column, state1)
            state2 = self.lstm2(state1[0], state2)
            out.append(self.linear(state2[0]))
        return torch.cat(out, dim=1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=97)
    p.add_argument("--length", type=int, default=999)
    p.add_argument("--hidden", type=int, default=51)
    p.add_argument("--max-iter", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (1: steadier on a shared machine)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    shift = torch.randint(-80, 80, (a.batch, 1)).double()
    wave = torch.sin((torch.arange(a.length + 1).double() + shift) / 20.0)
    x, y = wave[:, :-1], wave[:, 1:]
    model = Sequence(a.hidden).double()
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=a.max_iter)
    for step in range(a.steps):
        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss
        loss = opt.step(closure)
        print(f"step {step} loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
