"""The example training on several processes with DistributedDataParallel.

On CPU (gloo) or GPUs (nccl), launched by torchrun:

    torchrun --nproc-per-node 2 examples/train_ddp.py --steps 20

Each rank reads its own shard (loader() adds a DistributedSampler and advances its
epoch), gradients are accumulated over --accumulate micro-batches with DDP's
all-reduce only on the last one, and the logged loss is averaged over all ranks.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from example_model import SmallResNet, SyntheticImages, positive_int
from torch.nn.parallel import DistributedDataParallel

from pitstop.train import (
    DevicePrefetcher,
    Metrics,
    TrainStep,
    end_process_group,
    every,
    fast_defaults,
    loader,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=positive_int, default=50)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per rank")
    parser.add_argument("--accumulate", type=positive_int, default=2)
    parser.add_argument("--log-every", type=positive_int, default=10)
    args = parser.parse_args()

    if "LOCAL_RANK" not in os.environ:
        raise SystemExit("launch with torchrun, e.g. torchrun --nproc-per-node 2 examples/train_ddp.py")
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        # Two ranks share the CPU: don't let each start one compute thread per core.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    finished = False
    try:
        defaults = fast_defaults()
        torch.manual_seed(0)  # DDP also broadcasts rank 0's weights at wrap time
        data = loader(SyntheticImages(), args.batch_size, shuffle=True, device=device)
        model = DistributedDataParallel(SmallResNet().to(device),
                                        device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        train_step = TrainStep(model, optimizer, accumulate=args.accumulate)
        if rank == 0:
            print(defaults)
            print(data.describe())
            print(f"world {dist.get_world_size()}, precision {train_step.precision} "
                  f"({train_step.precision_reason})")
        metrics = Metrics(device)
        log_now = every(args.log_every)
        step = 0
        start = time.perf_counter()
        while step < args.steps:
            for images, labels in DevicePrefetcher(data, device):
                loss = train_step(images, labels)
                metrics.update("loss", loss, n=len(labels))
                if log_now(step) or step == args.steps - 1:
                    mean = metrics.compute(all_ranks=True)["loss"]  # every rank must call it
                    metrics.reset()
                    if rank == 0:
                        print(f"step {step:4d}  loss {mean:.4f} (mean over ranks)")
                step += 1
                if step == args.steps:
                    break
        if rank == 0:
            elapsed = time.perf_counter() - start
            total = step * args.batch_size * dist.get_world_size()
            print(f"done: {step} steps in {elapsed:.1f} s ({total / elapsed:.0f} samples/s, all ranks)")
        finished = True
    finally:
        # every rank meets before the group goes (gloo can abort a rank that leaves
        # first); after an error the others may never come, so don't wait for them
        end_process_group(wait_for_peers=finished)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit("interrupted") from None
