"""DDP with gradient accumulation done right (no_sync on the non-final micro-steps), but
the loss is all-reduced and printed by rank 0 on every step: `if rank == 0` is not a
rarity guard, rank 0 syncs each step and the other ranks wait for it at the next
all-reduce."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from lm import TinyLM, TokenDataset

ACCUM = 8


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.backends.cuda.matmul.allow_tf32 = True
    ds = TokenDataset("tokens.bin", 512)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=4, pin_memory=True,
                        persistent_workers=True)
    model = DDP(TinyLM().cuda(local_rank), device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):  # want: LT006
            x = x.cuda(local_rank, non_blocking=True)
            y = y.cuda(local_rank, non_blocking=True)
            last = (i + 1) % ACCUM == 0
            if last:
                loss = model(x, y) / ACCUM
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            else:
                with model.no_sync():
                    loss = model(x, y) / ACCUM
                    loss.backward()
            reduced = loss.detach().clone()
            dist.all_reduce(reduced)
            if rank == 0:
                print(f"step {i} loss {reduced.item() / dist.get_world_size():.4f}")  # want: LT001
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
