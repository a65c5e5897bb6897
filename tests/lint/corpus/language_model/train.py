"""A small GPT-style language model on a token file, nanoGPT-like but with slow habits."""
import math
import os

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

batch_size = 32
block_size = 256
max_iters = 5000
eval_interval = 500
eval_iters = 100
learning_rate = 3e-4
device = "cuda"

data = np.memmap(os.path.join("data", "train.bin"), dtype=np.uint16, mode="r")


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        T = x.size(1)
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool().to(x.device)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=50304, d=384, n_layer=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block_size, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(n_layer)])
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@torch.no_grad()
def estimate_loss(model):
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        X, Y = get_batch()
        _, loss = model(X, Y)
        losses[k] = loss.item()
    model.train()
    return losses.mean()


model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
scaler = torch.cuda.amp.GradScaler()  # want: LT007

for it in range(max_iters):
    if it % eval_interval == 0:
        print(f"step {it}: val loss {estimate_loss(model):.4f}")
    lr = learning_rate * 0.5 * (1 + math.cos(math.pi * it / max_iters))
    for g in optimizer.param_groups:
        g["lr"] = lr
    xb, yb = get_batch()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):  # want: LT007
        logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=False)  # want: LT009
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    if not torch.isfinite(loss):  # want: LT001
        raise RuntimeError("loss diverged")
    tokens = torch.tensor(xb.numel()).to(device)  # want: LT012
