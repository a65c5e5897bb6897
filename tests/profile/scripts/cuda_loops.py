"""Loop shapes from real scripts, on CUDA: argv[1] is the shape, argv[2] the steps.

- ``hand``: a wide MLP on one resident batch, loss.backward() and a hand-written SGD
  update under no_grad (no torch.optim), as word_language_model-style scripts do;
- ``lbfgs``: an LSTMCell sequence model fitted by LBFGS with a closure (several forward
  and backward passes per optimizer step);
- ``get_batch``: a nanoGPT-style loop whose next batch is built element by element in
  Python while the GPU computes a small model (no DataLoader).
"""
import sys

import torch

DEV = "cuda"


def hand(steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(DEV)
    x, y = torch.randn(4096, 4096, device=DEV), torch.randn(4096, 1024, device=DEV)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-1e-3)


class Seq(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.LSTMCell(1, 51)
        self.out = torch.nn.Linear(51, 1)

    def forward(self, x):
        h = torch.zeros(x.size(0), 51, device=x.device)
        c = torch.zeros(x.size(0), 51, device=x.device)
        outs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t:t + 1], (h, c))
            outs.append(self.out(h))
        return torch.cat(outs, dim=1)


def lbfgs(steps: int) -> None:
    torch.manual_seed(0)
    t = torch.arange(41, dtype=torch.float32) + torch.randint(-40, 40, (64, 1))
    wave = torch.sin(t / 20.0).to(DEV)
    x, y = wave[:, :-1], wave[:, 1:]
    model = Seq().to(DEV)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=4)
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        opt.step(closure)


def get_batch():
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 100, (50_000,), generator=g).tolist()
    rows = []
    for i in torch.randint(0, len(data) - 129, (32,), generator=g).tolist():
        rows.append([int(v) for v in data[i:i + 129]])  # element by element, on purpose
    batch = torch.tensor(rows)
    return batch[:, :-1].to(DEV), batch[:, 1:].to(DEV)


def get_batch_loop(steps: int) -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 100)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = get_batch()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x).view(-1, 100), y.reshape(-1))
        x, y = get_batch()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    {"hand": hand, "lbfgs": lbfgs, "get_batch": get_batch_loop}[sys.argv[1]](int(sys.argv[2]))
