"""The DDP rung: under ``torchrun --nproc-per-node N`` the best configuration runs on all
N ranks, and the bench reports scaling efficiency = throughput of N ranks / (N x one rank).

Rank 0 climbs the single-rank ladder alone while the other ranks wait in a barrier
(a blocking socket read, no CPU spent), so "one rank" is measured without the others
competing for the machine. Then every rank builds the best configuration wrapped in
``DistributedDataParallel``, each reading its own shard (``DistributedSampler``).
Every timed repeat starts and ends with a barrier, so all ranks time the same
interval; the global rate of a repeat is the sum of the ranks' rates.
"""

from __future__ import annotations

import datetime as _dt
import gc
import os
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from pitstop.bench.ladder import (
    Knobs,
    Reporter,
    Trainer,
    Workload,
    _first_line,
    global_settings,
)
from pitstop.bench.measure import Measurement, device_sync, measure
from pitstop.train.distributed import end_process_group

# The other ranks wait while rank 0 climbs the whole ladder (minutes, with compile).
WAIT_TIMEOUT = _dt.timedelta(hours=3)


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def detect(environ: dict[str, str] | None = None) -> DistInfo | None:
    """The torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), or None."""
    env = dict(os.environ) if environ is None else environ
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", "0"))
        local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    except ValueError:
        return None
    if world <= 1 or "MASTER_ADDR" not in env:
        return None
    return DistInfo(rank, world, local, local_world)


class Group:
    """The process group, plus a gloo group for host-side waits and reductions."""

    def __init__(self, info: DistInfo, device: torch.device) -> None:
        self.info = info
        self.backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(self.backend, timeout=WAIT_TIMEOUT)
        self.host = dist.new_group(backend="gloo", timeout=WAIT_TIMEOUT) \
            if self.backend != "gloo" else dist.group.WORLD

    def barrier(self) -> None:
        dist.barrier(group=self.host)

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.host)
        return box[0]

    def sum_list(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.host)
        return [float(v) for v in t.tolist()]

    def close(self) -> None:
        end_process_group(group=self.host)


def device_for(info: DistInfo, device: torch.device) -> torch.device:
    """Each rank's own GPU (``cuda:LOCAL_RANK``); the CPU stays the CPU."""
    if device.type == "cuda":
        return torch.device("cuda", info.local_rank % max(1, torch.cuda.device_count()))
    return device


def run_ddp_rung(group: Group, workload: Workload, knobs: Knobs, *,
                 single_rank: float | None, naive: float | None, reporter: Reporter
                 ) -> dict[str, Any]:
    """Measure ``knobs`` on all ranks under DDP; every rank returns the same record."""
    info = group.info
    ddp_workload = replace(workload, world_size=info.world_size, distributed_sampler=True)
    record: dict[str, Any] = {"world_size": info.world_size, "backend": group.backend,
                              "knobs": knobs.active(), "status": "measured", "reason": None,
                              "samples_per_s": None, "per_rank_samples_per_s": None,
                              "single_rank_samples_per_s": single_rank,
                              "scaling_efficiency": None, "speedup": None, "applied": {}}
    local: Measurement | None = None
    error = ""
    trainer: Trainer | None = None
    try:
        trainer = Trainer(ddp_workload, knobs, ddp=True)
        reporter.rung_started(f"DDP x{info.world_size}", workload.plan.total_steps)
        device_wait = device_sync(workload.device)

        def sync() -> None:
            device_wait()
            group.barrier()  # all ranks time the same interval

        with global_settings(knobs):
            local = measure(trainer.run, workload.plan, sync=sync, tick=reporter.tick,
                            on_phase=reporter.phase)
        record["applied"] = dict(trainer.applied)
    except Exception as err:  # reported on every rank, then agreed on below
        error = _first_line(err)
    finally:
        if trainer is not None:
            trainer.close()
        # The DDP model's reducer must be gone before the process group is destroyed;
        # left to the garbage collector it can die at exit, after the group, and abort.
        trainer = None
        gc.collect()
    failures = group.sum_list([1.0 if local is None else 0.0])[0]
    if local is None or failures:
        record["status"] = "failed"
        record["reason"] = error or f"{int(failures)} rank(s) failed"
        return record
    totals = group.sum_list(local.rates)
    global_m = Measurement(rates=totals, samples=local.samples * info.world_size,
                           timed_seconds=local.timed_seconds,
                           warmup_seconds=local.warmup_seconds, steps=local.steps)
    record["samples_per_s"] = global_m.summary()
    record["per_rank_samples_per_s"] = round(local.median, 3)
    if single_rank:
        record["scaling_efficiency"] = round(global_m.median / (info.world_size * single_rank), 4)
    if naive:
        record["speedup"] = round(global_m.median / naive, 4)
    return record
