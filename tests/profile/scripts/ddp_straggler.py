"""2-rank gloo DDP run in which rank 1's data loading is deliberately slow."""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randn(16), torch.randn(1)


def main() -> None:
    torch.set_num_threads(1)  # steadier timings on a shared machine
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = int(os.environ.get("SLOW_RANK", "1"))
    loader = DataLoader(Samples(0.008 if rank == slow else 0.0), batch_size=4)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= int(sys.argv[1]):
            break
    # Without this barrier, torch 2.13's gloo teardown aborts a rank ("terminate called
    # without an active exception") in about 1 run of 6, with or without pitstop.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
