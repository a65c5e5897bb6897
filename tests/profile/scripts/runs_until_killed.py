"""Trains until killed; says "ready" once some steps are done."""
import sys

import torch

model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while True:
    model(torch.randn(8, 16)).pow(2).mean().backward()
    opt.step()
    step += 1
    if step == 4:
        print("ready", flush=True)
    if step > 10**7:
        sys.exit(0)
