"""A character model fed by a Python function that fills each batch one row and one
character at a time (thousands of tiny tensor writes per step, as older char-RNN
scripts do); the model is called on column slices of that batch."""
import random
import sys

import torch

TEXT = "".join(random.Random(0).choice("abcdefghij klmnop\n") for _ in range(200_000))
VOCAB = sorted(set(TEXT))


def encode(s: str) -> torch.Tensor:
    out = torch.zeros(len(s), dtype=torch.long)
    for i, ch in enumerate(s):
        out[i] = VOCAB.index(ch)
    return out


def draw_chunks(length: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    inp = torch.empty(rows, length, dtype=torch.long)
    target = torch.empty(rows, length, dtype=torch.long)
    for r in range(rows):
        start = random.randint(0, len(TEXT) - length - 1)
        chunk = TEXT[start:start + length + 1]
        inp[r] = encode(chunk[:-1])
        target[r] = encode(chunk[1:])
    return inp, target


class CharModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(len(VOCAB), 8)
        self.cell = torch.nn.GRUCell(8, 8)
        self.out = torch.nn.Linear(8, len(VOCAB))

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(self.emb(x), h)
        return self.out(h), h


def main() -> None:
    torch.set_num_threads(1)
    steps, rows, length = int(sys.argv[1]), int(sys.argv[2]), 20
    model = CharModel()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        inp, target = draw_chunks(length, rows)
        h = torch.zeros(rows, 8)
        opt.zero_grad()
        loss = 0
        for c in range(length):
            out, h = model(inp[:, c], h)
            loss = loss + loss_fn(out, target[:, c])
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
