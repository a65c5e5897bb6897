"""Small models, data and DDP worker bodies shared by the pitstop.train tests."""

from __future__ import annotations

import json
import os
import time
from collections import namedtuple
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from pitstop.train import TrainStep, end_process_group


def tiny_mlp(seed: int = 0, d_in: int = 12, classes: int = 5) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, 32), nn.Tanh(), nn.Linear(32, classes))


def tiny_data(n: int, seed: int = 1, d_in: int = 12, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, classes, generator=g)
    y = (x @ w).argmax(dim=1)  # a learnable rule, so the loss really goes down
    return x, y


# ---------------------------------------------------------------- nested batches (to_device)

Pair = namedtuple("Pair", ["image", "label"])


@dataclass
class Sample:
    pixels: torch.Tensor
    meta: dict[str, object]
    note: str = "x"
    cache: list[int] = field(default_factory=list, init=False)


def nested() -> dict[str, object]:
    return {
        "pair": Pair(torch.randn(2, 3), torch.tensor([1, 2])),
        "list": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), "text", 3, None)],
        "sample": Sample(torch.rand(4), {"mask": torch.ones(4, dtype=torch.bool), "id": 7}),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
    }


def assert_same_structure(a: object, b: object, *, same_values: bool) -> None:
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.shape == b.shape and a.dtype == b.dtype
        if same_values:
            assert torch.equal(a.cpu(), b.cpu())
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            assert_same_structure(a[k], b[k], same_values=same_values)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same_structure(x, y, same_values=same_values)
    elif isinstance(a, Sample):
        assert isinstance(b, Sample)
        assert_same_structure(a.pixels, b.pixels, same_values=same_values)
        assert_same_structure(a.meta, b.meta, same_values=same_values)
        assert a.note == b.note
    else:
        assert a == b


class OutOfBudget(torch.nn.Module):
    """Wraps a model and fails like the CUDA caching allocator does when a
    micro-batch's activations would exceed a byte budget.

    The "allocation" is the activation memory the forward (or the backward) of a
    micro-batch of ``len(x)`` samples would need: ``len(x) * bytes_per_sample``.
    Past ``budget`` bytes it raises ``torch.OutOfMemoryError``, the exception type
    ``torch.cuda.OutOfMemoryError`` is an alias of.
    """

    def __init__(self, inner: nn.Module, *, bytes_per_sample: int, budget: int,
                 in_backward: bool = False, fail_calls: tuple[int, ...] = (),
                 runtime_error: str | None = None) -> None:
        super().__init__()
        # Raise RuntimeError(runtime_error) instead, as cuBLAS/cuDNN/the CUDA runtime do.
        self.runtime_error = runtime_error
        self.inner = inner
        self.bytes_per_sample = bytes_per_sample
        self.budget = budget
        self.in_backward = in_backward
        self.attempts: list[int] = []  # micro-batch sizes tried, in order
        self.fail_calls = set(fail_calls)  # forward calls (0-based) that fail regardless of size

    def _check(self, n: int) -> None:
        need = n * self.bytes_per_sample
        if need > self.budget and self.runtime_error is not None:
            raise RuntimeError(self.runtime_error)
        if need > self.budget:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {need} bytes "
                f"(budget {self.budget} bytes imposed by the test)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = int(x.shape[0])
        call = len(self.attempts)
        self.attempts.append(n)
        if call in self.fail_calls:
            raise torch.OutOfMemoryError(f"CUDA out of memory (call {call} made to fail by the test)")
        out = self.inner(x)
        if self.in_backward:
            out.register_hook(lambda g: (self._check(n), g)[1])
        else:
            self._check(n)
        return out


def capture_grads(optimizer: torch.optim.Optimizer, sink: list[list[torch.Tensor]]) -> Any:
    """Record a copy of every parameter's gradient right before each optimizer step."""

    def hook(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        sink.append([p.grad.detach().clone() for g in opt.param_groups for p in g["params"]])

    return optimizer.register_step_pre_hook(hook)


# ---------------------------------------------------------------- DDP (2 gloo processes)

DDP_STEPS = 3
DDP_ACCUMULATE = 4
DDP_BATCH = 16  # per rank


def global_batches(steps: int, world: int, per_rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = tiny_data(steps * world * per_rank, seed=7)
    size = world * per_rank
    return [(x[i * size:(i + 1) * size], y[i * size:(i + 1) * size]) for i in range(steps)]


def train_single(steps: int, world: int, per_rank: int, *, accumulate: int) -> list[torch.Tensor]:
    """The reference: one process, each step over the union of the ranks' batches."""
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    step = TrainStep(model, opt, precision="fp32", accumulate=accumulate)
    for x, y in global_batches(steps, world, per_rank):
        step(x, y)
    return [p.detach().clone() for p in model.parameters()]


def ddp_worker(rank: int, world: int, workdir: str) -> None:
    """Body of each rank: (A) accumulate with a counting comm hook, (B) auto micro-batching
    with a smaller memory budget on rank 0 than on rank 1. Results go to rank<N>.pt."""
    torch.set_num_threads(1)
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"file://{workdir}/store", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    finished = False
    try:
        results: dict[str, Any] = {}
        batches = global_batches(DDP_STEPS, world, DDP_BATCH)

        def shard(x: torch.Tensor) -> torch.Tensor:
            return x[rank * DDP_BATCH:(rank + 1) * DDP_BATCH]

        # (A) gradient all-reduces per optimizer step, counted by a comm hook
        model = DDP(tiny_mlp())
        calls = {"n": 0}

        # No annotations: DDP checks them at runtime and postponed (string) ones fail its check.
        def counting_hook(state, bucket):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            return allreduce_hook(state, bucket)

        model.register_comm_hook(None, counting_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        step = TrainStep(model, opt, precision="fp32", accumulate=DDP_ACCUMULATE)
        for x, y in batches:
            step(shard(x), shard(y))
        results["A_params"] = [p.detach().clone() for p in model.module.parameters()]
        results["A_allreduces"] = calls["n"]
        results["A_steps"] = step.optimizer_steps

        # (C) the same through torch.compile (its wrapper hides the DDP class)
        compiled = torch.compile(DDP(tiny_mlp()), backend="eager")
        calls_c = {"n": 0}

        def counting_hook_c(state, bucket):  # type: ignore[no-untyped-def]
            calls_c["n"] += 1
            return allreduce_hook(state, bucket)

        compiled._orig_mod.register_comm_hook(None, counting_hook_c)
        opt_c = torch.optim.SGD(compiled.parameters(), lr=0.5)
        step_c = TrainStep(compiled, opt_c, precision="fp32", accumulate=DDP_ACCUMULATE)
        for x, y in batches:
            step_c(shard(x), shard(y))
        results["C_params"] = [p.detach().clone() for p in compiled._orig_mod.module.parameters()]
        results["C_allreduces"] = calls_c["n"]

        # (D) FSDP2 (fully_shard): reduce-scatter skipped on non-final micro-steps
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        sharded = tiny_mlp()
        fully_shard(sharded, mesh=init_device_mesh("cpu", (world,)))
        opt_d = torch.optim.SGD(sharded.parameters(), lr=0.5)
        step_d = TrainStep(sharded, opt_d, precision="fp32", accumulate=DDP_ACCUMULATE)
        # FSDP2 labels each gradient reduce-scatter "FSDP::post_backward_reduce" for the
        # profiler, and only when it does reduce: count those.
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for x, y in batches:
                step_d(shard(x), shard(y))
        results["D_params"] = [p.full_tensor().detach().clone() for p in sharded.parameters()]
        results["D_reduces"] = sum(1 for e in prof.events()
                                   if e.name.startswith("FSDP::post_backward_reduce"))

        # (B) microbatch="auto": rank 0 can hold 4 samples, rank 1 all 16
        budget = 4 * 100 if rank == 0 else 16 * 100
        inner = OutOfBudget(tiny_mlp(), bytes_per_sample=100, budget=budget)
        model_b = DDP(inner)
        opt_b = torch.optim.SGD(model_b.parameters(), lr=0.5)
        step_b = TrainStep(model_b, opt_b, precision="fp32", microbatch="auto")
        for x, y in batches:
            step_b(shard(x), shard(y))
        results["B_params"] = [p.detach().clone() for p in inner.inner.parameters()]
        results["B_micro"] = step_b.micro_batch_size
        results["B_attempts"] = list(inner.attempts)
        torch.save(results, Path(workdir) / f"rank{rank}.pt")
        finished = True
    finally:
        end_process_group(wait_for_peers=finished)


def free_env_for_children() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y)


def _wait_for(path: Path, seconds: float) -> bool:
    """Poll for a file another rank writes (a condition, not a sleep-for-timing)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def end_worker(rank: int, world: int, workdir: str, mode: str) -> None:
    """Body of each rank for the end_process_group tests; rank 0 writes result.json."""
    work = Path(workdir)
    dist.init_process_group("gloo", init_method=f"file://{workdir}/store", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    result: dict[str, Any] = {}
    if mode == "wait":
        # rank 1 holds back until rank 0 returns (or 2 s pass): if rank 0 returned without
        # waiting for it, rank 0 finds no "r1_arrived" when it looks
        if rank == 0:
            (work / "r0_entered").touch()
            end_process_group()
            result["peer_arrived_before_return"] = (work / "r1_arrived").exists()
            (work / "r0_returned").touch()
        else:
            assert _wait_for(work / "r0_entered", 60)
            _wait_for(work / "r0_returned", 2)
            (work / "r1_arrived").touch()
            end_process_group()
    elif mode == "no-wait":
        # rank 1 comes only once rank 0 is past its end: rank 0 must not wait for it
        if rank == 0:
            end_process_group(wait_for_peers=False, timeout=timedelta(seconds=120))
            (work / "r0_done").touch()
        else:
            saw_r0_done = _wait_for(work / "r0_done", 60)
            end_process_group(wait_for_peers=False)
            (work / f"r1_saw_r0_done_{saw_r0_done}").touch()
    elif mode == "missing":
        if rank == 1:
            os._exit(0)  # gone without a word: rank 0 must give up on it, not hang
        end_process_group(timeout=timedelta(seconds=2))
    if rank == 0:
        result["initialized_after"] = dist.is_initialized()
        (work / "result.json").write_text(json.dumps(result))
