"""Trains a few steps, then fails: the partial profile must still be written."""
import sys

import torch

model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    model(torch.randn(8, 16)).pow(2).mean().backward()
    opt.step()
    if step + 1 == int(sys.argv[1]):
        raise RuntimeError("planted failure after some steps")
