"""A nanoGPT-style loop whose batches come from a get_batch that is slow: per-sample
Python over a numpy array (no DataLoader); the model is small: input-bound in get_batch."""
import sys

import numpy as np
import torch

BLOCK, BATCH = 128, 32
DATA = np.random.default_rng(0).integers(0, 100, 200_000).astype(np.uint16)


def get_batch():
    ix = np.random.randint(0, len(DATA) - BLOCK - 1, BATCH)
    rows_x, rows_y = [], []
    for i in ix:  # slow on purpose: element by element, as a careless pipeline might
        rows_x.append([int(v) for v in DATA[i:i + BLOCK]])
        rows_y.append([int(v) for v in DATA[i + 1:i + 1 + BLOCK]])
    for _ in range(3):
        np.sort(np.random.default_rng(1).random(150_000))  # "augmentation"
    return torch.tensor(rows_x), torch.tensor(rows_y)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 32)
        self.head = torch.nn.Linear(32, 100)

    def forward(self, x, y):
        logits = self.head(self.emb(x))
        return torch.nn.functional.cross_entropy(logits.view(-1, 100), y.view(-1))


def main() -> None:
    torch.set_num_threads(1)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    X, Y = get_batch()
    for _ in range(int(sys.argv[1])):
        loss = model(X, Y)
        X, Y = get_batch()  # fetch the next batch while "the GPU" computes, as nanoGPT does
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
