"""A small regression model trained on the CPU on purpose (device = "cpu"): .item() on
CPU tensors is no sync, pin_memory and autocast/TF32 do not apply."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = "cpu"
torch.set_num_threads(4)

X = torch.randn(10000, 16)
Y = X @ torch.randn(16, 1) + 0.1 * torch.randn(10000, 1)
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)  # want: LT002
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()

for epoch in range(20):
    total = 0.0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if loss > 1e3:
            raise RuntimeError("diverged")
    print(f"epoch {epoch}: {total / len(loader):.4f}")
