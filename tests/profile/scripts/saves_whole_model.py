"""A loop that pickles its whole model while it trains, as older scripts do
(``torch.save(model, path)`` every few steps, an EMA copy by ``copy.deepcopy``): the
recorder's forward hooks sit on the model then, and must neither break the pickling
nor end up in the file."""
import copy
import os
import sys

import torch


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(16, 64, batch_first=True)
        self.out = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(x)[0])


def main() -> None:
    torch.set_num_threads(1)
    steps, folder = int(sys.argv[1]), sys.argv[2]
    model = Decoder()
    ema = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(32, 20, 16)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 4:
            ema = copy.deepcopy(model)
            torch.save(model, os.path.join(folder, "model.pt"))
    torch.save(ema, os.path.join(folder, "ema.pt"))


if __name__ == "__main__":
    main()
