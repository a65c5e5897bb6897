"""BERT-style fine-tuning with DDP and gradient accumulation, launched by torchrun."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from model import build_model  # noqa: F401  (a module of the same project)


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.set_float32_matmul_precision("high")

    dataset = torch.load("data/tokenized.pt")
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler, num_workers=4,
                        pin_memory=True, persistent_workers=True)

    model = DDP(build_model().to(device), device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    accum_steps = 8
    is_master = dist.get_rank() == 0

    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        for step, batch in enumerate(loader):
            batch = {k: v.to(device) for k, v in batch.items()}  # want: LT008
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(**batch)
                loss = out.loss / accum_steps
            loss.backward()  # want: LT010
            if (step + 1) % accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            if is_master and step % 100 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item() * accum_steps:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
