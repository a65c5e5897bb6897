"""A small real training loop for the monitor's tests (run as a script).

``python train_loop.py input|wait|compute SECONDS [WORKERS]``: a CNN on synthetic
images, loaded by a real ``torch.utils.data.DataLoader`` with WORKERS (default 2) worker
processes. ``input``: each sample costs ~40 ms of Python work in the worker, so the
loop waits for data; ``wait``: each sample waits ~40 ms without using a CPU (a network
read), so the loop waits for data while the workers sleep too; ``compute``: samples are
free and the model is large, so the loop computes. Prints ``ready`` once the workers
deliver, then trains until SECONDS pass.
"""

from __future__ import annotations

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, cost_s: float, wait: bool = False) -> None:
        self.cost_s = cost_s
        self.wait = wait

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.wait:  # a read from the network or an object store: the worker sleeps
            time.sleep(self.cost_s)
            return torch.full((3, 32, 32), float(i % 7)), i % 10
        end = time.perf_counter() + self.cost_s
        x = 0
        while time.perf_counter() < end:  # decode/augment stand-in: pure CPU in the worker
            x += 1
        return torch.full((3, 32, 32), float(i % 7)), i % 10


def main() -> None:
    mode, seconds = sys.argv[1], float(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    torch.set_num_threads(1)
    cost = 0.04 if mode in ("input", "wait") else 0.0
    width = 96 if mode == "compute" else 8
    model = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Synthetic(cost, wait=mode == "wait"), batch_size=4, num_workers=workers,
                        persistent_workers=workers > 0)
    end = time.monotonic() + seconds
    announced = False
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if not announced:
            print("ready", flush=True)
            announced = True
        if time.monotonic() > end:
            break


if __name__ == "__main__":
    main()
