"""Training metrics that stay on the device until read.

``loss.item()`` every step makes the host wait for the device every step, which
drains the queue of launched kernels and leaves the GPU idle while Python catches
up. :class:`Metrics` instead keeps running sums and counts as device tensors
(``update`` only launches an add) and reads them all at once, in one transfer, in
:meth:`Metrics.compute` — call that every N steps (see :func:`every`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from pitstop.train.prefetch import resolve_device


@dataclass(frozen=True)
class MetricSummary:
    mean: float
    total: float
    count: float


def every(n: int) -> Callable[[int], bool]:
    """A predicate true at steps 0, n, 2n, ...: ``if log_now(step): print(metrics.compute())``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"every(n) needs an integer n >= 1, got {n!r}")

    def due(step: int) -> bool:
        return step % n == 0

    return due


class Metrics:
    """Running means of named scalars, accumulated on ``device``.

    Args:
        device: where the sums live (the training device; ``"auto"`` allowed).
        writer: an optional TensorBoard ``SummaryWriter`` (or anything with
            ``add_scalar(tag, value, step)``), or a directory path for one. When set,
            :meth:`compute` with a ``step`` writes each mean to it.

    ``update("loss", loss, n=batch_size)`` adds a mean over ``n`` samples; means are
    weighted by ``n``. ``n`` may itself be a device tensor (e.g. a count of valid
    tokens). Sums are kept in float64 (float32 where the device has no float64), so
    means of many steps stay exact to float rounding of the inputs.
    """

    def __init__(self, device: str | torch.device = "auto", writer: Any = None) -> None:
        self.device = resolve_device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = torch.float32 if self.device.type == "mps" else torch.float64
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, torch.Tensor] = {}
        if isinstance(writer, (str, os.PathLike)):
            writer = _summary_writer(os.fspath(writer))
        self.writer = writer

    def update(self, name: str, value: torch.Tensor | float, n: int | float | torch.Tensor = 1) -> None:
        """Add ``value`` (a scalar: the mean over ``n`` items) to the running mean of ``name``."""
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(f"Metrics.update({name!r}, ...) takes a scalar, got a tensor of "
                                 f"shape {tuple(value.shape)}: pass value.mean() with "
                                 f"n=value.numel()")
            if value.device != self.device:
                raise ValueError(f"Metrics on {self.device} got {name!r} on {value.device}: "
                                 f"create Metrics({str(value.device)!r})")
            # Widen before multiplying by n: a float32 product would round once more.
            value = value.detach().reshape(()).to(self.dtype)
        total = self._sums.get(name)
        if total is None:
            total = self._sums[name] = torch.zeros((), dtype=self.dtype, device=self.device)
            self._counts[name] = torch.zeros((), dtype=self.dtype, device=self.device)
        if isinstance(n, torch.Tensor):
            n = n.detach().reshape(())
        total.add_(value * n)
        self._counts[name].add_(n)

    def summary(self, *, all_ranks: bool = False) -> dict[str, MetricSummary]:
        """Mean, total and count of every metric — one device-to-host transfer.

        ``all_ranks=True`` sums over the ranks of torch.distributed first (every rank
        must call it).
        """
        names = list(self._sums)
        if not names:
            return {}
        stacked = torch.stack([torch.stack([self._sums[k], self._counts[k]]) for k in names])
        if all_ranks and dist.is_available() and dist.is_initialized():
            dist.all_reduce(stacked)
        rows = stacked.tolist()  # the one sync
        return {k: MetricSummary(mean=(s / c) if c else float("nan"), total=s, count=c)
                for k, (s, c) in zip(names, rows, strict=True)}

    def compute(self, step: int | None = None, *, all_ranks: bool = False) -> dict[str, float]:
        """The mean of every metric (one sync); written to the writer when ``step`` is given."""
        means = {k: v.mean for k, v in self.summary(all_ranks=all_ranks).items()}
        if self.writer is not None and step is not None:
            for k, v in means.items():
                self.writer.add_scalar(k, v, step)
        return means

    def reset(self) -> None:
        """Start every metric afresh (call after logging to get per-interval means)."""
        for t in self._sums.values():
            t.zero_()
        for t in self._counts.values():
            t.zero_()

    def close(self) -> None:
        """Flush and close the writer, if any."""
        if self.writer is not None and hasattr(self.writer, "close"):
            self.writer.close()


def _summary_writer(log_dir: str) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:  # tensorboard is an optional extra
        raise ValueError(f"Metrics(writer={log_dir!r}) needs tensorboard: pip install "
                         f"'pitstop[tensorboard]' (or pass writer=None)") from exc
    return SummaryWriter(log_dir=log_dir)
