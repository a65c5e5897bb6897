"""Splitting a batch into micro-batches, and the cross-rank pieces of automatic
micro-batching.

Automatic micro-batching (``TrainStep(..., microbatch="auto")``) shrinks the
micro-batch when a forward/backward runs out of memory and keeps the effective batch
by accumulating more micro-steps. Under DDP every rank must take the same decision,
and no rank may enter a gradient all-reduce that another rank will never join
because it ran out of memory. So in that mode all micro-steps run without DDP's
gradient sync, the ranks then agree in one small all-reduce whether any of them ran
out of memory, and only then are the gradients all-reduced, explicitly, once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from pitstop.train.prefetch import iter_tensors, map_tensors

# Gradients are all-reduced in flat buckets of about this many bytes (DDP's default).
BUCKET_BYTES = 25 * 2**20


def batch_size_of(batch: Any) -> int:
    """The leading dimension of the first tensor in a nested batch."""
    for t in iter_tensors(batch):
        if t.dim() > 0:
            return int(t.shape[0])
    raise ValueError("the batch holds no tensor with a batch dimension: pass tensors (or "
                     "tuples/dicts of tensors) whose first dimension is the batch")


def micro_batches(batch: Any, n: int, micro: int) -> Iterator[tuple[Any, float]]:
    """Slices of ``batch`` (every tensor whose first dimension is ``n``) of ``micro``
    samples, each with its share of the batch (``len(slice) / n``) as loss weight."""
    for start in range(0, n, micro):
        stop = min(n, start + micro)

        def cut(t: torch.Tensor, start: int = start, stop: int = stop) -> torch.Tensor:
            return t[start:stop] if t.dim() > 0 and t.shape[0] == n else t

        yield map_tensors(batch, cut), (stop - start) / n


# Out-of-memory failures that do not come from the caching allocator (which raises
# torch.OutOfMemoryError) but from libraries allocating on their own: the CUDA
# runtime itself, cuBLAS and cuDNN workspaces.
_OOM_MESSAGES = ("CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
                 "CUDNN_STATUS_ALLOC_FAILED", "CUDA out of memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` means the device ran out of memory (worth a smaller micro-batch)."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _OOM_MESSAGES)


def count_micro_steps(n: int, micro: int) -> int:
    return math.ceil(n / micro)


def agree_on_oom(oom: bool, micro: int, group: Any, device: torch.device) -> tuple[bool, int]:
    """All ranks: did any rank run out of memory, and the smallest micro-batch in use.

    One all-reduce (MAX over ``[oom, -micro]``) and one host read of two numbers.
    """
    flags = torch.tensor([1.0 if oom else 0.0, -float(micro)], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=group)
    # One read per step on purpose: every rank must know before the next attempt.
    any_oom, neg_micro = flags.tolist()  # noqa: LT001
    return any_oom > 0, int(-neg_micro)


def all_reduce_gradients(params: list[torch.nn.Parameter], group: Any) -> int:
    """Average ``params``' gradients over the ranks of ``group`` (as DDP does), in flat
    buckets. Missing gradients count as zeros so every rank reduces the same layout.
    Returns the number of all-reduce calls made."""
    world = dist.get_world_size(group)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    calls = 0
    bucket: list[torch.Tensor] = []
    size = 0

    def flush() -> None:
        nonlocal calls, size
        if not bucket:
            return
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat, group=group)
        flat.div_(world)
        offset = 0
        for g in bucket:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        calls += 1
        bucket.clear()
        size = 0

    for p in params:
        g = p.grad
        assert g is not None
        if bucket and (g.dtype != bucket[0].dtype or g.device != bucket[0].device):
            flush()
        bucket.append(g)
        size += g.numel() * g.element_size()
        if size >= BUCKET_BYTES:
            flush()
    flush()
    return calls


def broadcast_buffers(module: torch.nn.Module, group: Any) -> None:
    """Copy rank 0's buffers (e.g. BatchNorm statistics) to every rank, as DDP does
    before a synced forward."""
    src = dist.get_global_rank(group, 0) if group is not None else 0
    for buf in module.buffers():
        dist.broadcast(buf, src=src, group=group)
