"""Planted scenario: input-bound. __getitem__ burns CPU (a slow decode) in the training
process (no workers); the model is tiny."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDecode(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        end = time.perf_counter() + 0.004  # 4 ms of pure CPU work per sample
        x = 0
        while time.perf_counter() < end:
            x += 1
        return torch.full((32,), float(x % 7)), i % 4


def main() -> None:
    torch.set_num_threads(1)  # steadier timings on a shared machine
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDecode(), batch_size=8, num_workers=0)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= int(sys.argv[1]):
            break


if __name__ == "__main__":
    main()
