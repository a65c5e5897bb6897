"""CUDA: a loop that syncs every step (loss.item()) and copies pageable batches."""
import sys

import torch

model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 256),
                                                                  torch.randint(0, 10, (4096,))),
                                   batch_size=64)
total = 0.0
for step, (x, y) in enumerate(data):
    x, y = x.cuda(), y.cuda()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()  # SYNC-LINE: one host-device sync per step
    if step + 1 >= int(sys.argv[1]):
        break
