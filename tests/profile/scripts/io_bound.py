"""Planted scenario: IO-bound. Samples are files read through a throttled reader
(a slow network filesystem: ~4 MB/s per reader) after dropping them from the page cache."""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

CHUNK = 64 * 1024
RATE_BPS = 4 * 1024 * 1024
FILE_BYTES = 128 * 1024


class ThrottledFiles(Dataset):
    def __init__(self, paths: list) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        fd = os.open(self.paths[i], os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            data = bytearray()
            while True:
                t0 = time.perf_counter()
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                data += chunk
                # Throttle: each chunk takes at least CHUNK / RATE seconds.
                time.sleep(max(0.0, len(chunk) / RATE_BPS - (time.perf_counter() - t0)))
        finally:
            os.close(fd)
        x = torch.tensor(list(data[:128]), dtype=torch.float32)
        return x, i % 4


def main() -> None:
    torch.set_num_threads(1)  # steadier timings on a shared machine
    root, steps = sys.argv[1], int(sys.argv[2])
    os.makedirs(root, exist_ok=True)
    paths = []
    for i in range(64):
        p = os.path.join(root, f"sample-{i:03d}.bin")
        with open(p, "wb") as fh:
            fh.write(os.urandom(FILE_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        paths.append(p)
    model = torch.nn.Linear(128, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(ThrottledFiles(paths), batch_size=4, num_workers=2)
    done = 0
    while done < steps:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done >= steps:
                break


if __name__ == "__main__":
    main()
