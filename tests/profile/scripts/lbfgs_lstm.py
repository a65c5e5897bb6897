"""An LSTMCell sequence model fitted with LBFGS and a closure (the shape of the classic
time-series example): argv[2] is the batch size, argv[3] the sequence length."""
import sys

import torch


class Seq(torch.nn.Module):
    def __init__(self, hidden: int = 51) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell1 = torch.nn.LSTMCell(1, hidden)
        self.cell2 = torch.nn.LSTMCell(hidden, hidden)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        n = x.size(0)
        h1 = torch.zeros(n, self.hidden)
        c1 = torch.zeros(n, self.hidden)
        h2 = torch.zeros(n, self.hidden)
        c2 = torch.zeros(n, self.hidden)
        outs = []
        for t in range(x.size(1)):
            h1, c1 = self.cell1(x[:, t:t + 1], (h1, c1))
            h2, c2 = self.cell2(h1, (h2, c2))
            outs.append(self.out(h2))
        return torch.cat(outs, dim=1)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    steps, batch, length = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    t = torch.arange(length + 1, dtype=torch.float32) + torch.randint(-40, 40, (batch, 1))
    wave = torch.sin(t / 20.0)
    x, y = wave[:, :-1], wave[:, 1:]
    model = Seq()
    crit = torch.nn.MSELoss()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=4)
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            return loss
        opt.step(closure)


if __name__ == "__main__":
    main()
