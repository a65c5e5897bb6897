"""The pieces of :mod:`pitstop.train` the ladder uses, with plain-torch stand-ins.

The ladder measures pitstop's own library (``loader``, ``to_device``,
``DevicePrefetcher``, ``TrainStep``, ``Metrics``): the rungs are the code a user is
told to write. Should a piece be missing from an installed pitstop (a partial
install, an older version), a plain-torch equivalent keeps the bench running, and
:data:`IMPLEMENTATION` records which one each rung used so the report can say so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

IMPLEMENTATION: dict[str, str] = {}


def _note(name: str, where: str) -> None:
    IMPLEMENTATION[name] = where


# ---------------------------------------------------------------- loader

def make_loader(dataset: Dataset[Any], batch_size: int, *, device: torch.device,
                **overrides: Any) -> DataLoader[Any]:
    """``pitstop.train.loader`` (settings computed for this machine, no config file read)."""
    try:
        from pitstop.train.loader import loader
    except ImportError:
        _note("loader", "plain torch (pitstop.train.loader unavailable)")
        workers = overrides.pop("num_workers", None)
        if workers is None:
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
            workers = max(1, cpus // 4) if device.type == "cpu" else max(1, min(16, cpus - 1))
        kwargs: dict[str, Any] = {"num_workers": workers, "pin_memory": device.type == "cuda",
                                  "persistent_workers": workers > 0}
        kwargs.update(overrides)
        sampler = kwargs.pop("sampler", None)
        return DataLoader(dataset, batch_size, shuffle=sampler is None, sampler=sampler, **kwargs)
    _note("loader", "pitstop.train.loader")
    return loader(dataset, batch_size, shuffle=True, device=device, config=False, **overrides)


def planned_workers(dataset: Dataset[Any], batch_size: int, *, device: torch.device
                    ) -> tuple[int | None, str]:
    """The worker count ``pitstop.train.loader`` would choose here, and why (None: unknown)."""
    try:
        from pitstop.train.loader import loader_settings
    except ImportError:
        return None, "pitstop.train.loader_settings unavailable"
    value, source = loader_settings(dataset, batch_size, device=device, config=False)["num_workers"]
    return int(value), str(source)


def loader_workers(loader: DataLoader[Any]) -> tuple[int, str]:
    """The worker count a loader really has, and where it came from."""
    settings = getattr(loader, "pitstop_settings", None)
    source = "DataLoader argument"
    if isinstance(settings, dict) and "num_workers" in settings:
        source = str(settings["num_workers"][1])
    return int(loader.num_workers), source


def training_threads(loader: DataLoader[Any], device: torch.device) -> tuple[int | None, str]:
    """Intra-op threads for the training process beside ``loader``'s workers (None: keep
    torch's), as recommended by ``pitstop.train.loader`` in ``pitstop_settings``."""
    settings = getattr(loader, "pitstop_settings", None)
    if isinstance(settings, dict) and "torch_threads" in settings:
        value, source = settings["torch_threads"]
        return (None if value is None else int(value)), str(source)
    if device.type != "cpu" or loader.num_workers <= 0:
        return None, "torch's own thread count"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus - loader.num_workers), "CPUs left after the loader workers (plain torch)"


# ---------------------------------------------------------------- moving batches

def to_device(batch: Any, device: torch.device) -> Any:
    try:
        from pitstop.train import prefetch
    except ImportError:
        _note("to_device", "plain torch (pitstop.train.to_device unavailable)")
        return [t.to(device, non_blocking=t.is_pinned()) if isinstance(t, torch.Tensor) else t
                for t in batch]
    _note("to_device", "pitstop.train.to_device")
    return prefetch.to_device(batch, device)


def prefetcher(loader: Iterable[Any], device: torch.device) -> Iterable[Any]:
    try:
        from pitstop.train.prefetch import DevicePrefetcher
    except ImportError:
        _note("DevicePrefetcher", "plain torch (pitstop.train.DevicePrefetcher unavailable)")
        return (to_device(b, device) for b in loader)
    _note("DevicePrefetcher", "pitstop.train.DevicePrefetcher")
    return DevicePrefetcher(loader, device)


# ---------------------------------------------------------------- the training step

def cpu_bf16_reason() -> str | None:
    """Why this CPU has no fast bf16 (None when it has: AVX512-BF16 or AMX)."""
    checks = [getattr(torch.cpu, name, None) for name in
              ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if any(callable(c) and c() for c in checks):
        return None
    return ("this CPU has neither AVX512-BF16 nor AMX instructions: bf16 would be emulated, "
            "slower than fp32")


class PlainStep:
    """Stand-in for ``pitstop.train.TrainStep``: one optimizer step, autocast when asked."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *,
                 precision: str = "auto") -> None:
        self.model = model
        self.optimizer = optimizer
        device = next(model.parameters()).device
        self.device_type = device.type
        if precision == "auto":
            if device.type == "cuda":
                precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
            else:
                precision = "bf16" if cpu_bf16_reason() is None else "fp32"
        self.precision = precision
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def __call__(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device_type, dtype=self.dtype or torch.float32,
                            enabled=self.dtype is not None):
            loss = F.cross_entropy(self.model(inputs), targets)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()


def make_step(model: Any, optimizer: torch.optim.Optimizer, *,
              precision: str) -> Any:
    """``pitstop.train.TrainStep(model, optimizer, precision=precision)``; callable, with
    ``.precision`` the resolved precision."""
    try:
        from pitstop.train import TrainStep
    except ImportError:
        _note("TrainStep", "plain torch (pitstop.train.TrainStep unavailable)")
        return PlainStep(model, optimizer, precision=precision)
    _note("TrainStep", "pitstop.train.TrainStep")
    return TrainStep(model, optimizer, precision=precision)  # type: ignore[arg-type]


def call_step(step: Any, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    fn = step if callable(step) else step.step
    return fn(inputs, targets)


def precision_reason(precision: str, device: torch.device) -> str:
    """Why ``precision="auto"`` stayed at fp32 on ``device``."""
    if device.type == "cpu":
        return cpu_bf16_reason() or "TrainStep chose fp32 on this CPU"
    return f"TrainStep chose fp32 on {device}"


# ---------------------------------------------------------------- metrics

class PlainMetrics:
    """Stand-in for ``pitstop.train.Metrics``: sums on the device, one host read per compute."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def update(self, name: str, value: torch.Tensor, n: int = 1) -> None:
        value = value.detach().float() * n
        self.sums[name] = self.sums[name] + value if name in self.sums else value
        self.counts[name] = self.counts.get(name, 0) + n

    def compute(self) -> dict[str, float]:
        if not self.sums:
            return {}
        names = list(self.sums)
        values = torch.stack([self.sums[n] for n in names]).tolist()
        return {n: v / self.counts[n] for n, v in zip(names, values, strict=True)}

    def reset(self) -> None:
        self.sums.clear()
        self.counts.clear()


def make_metrics(device: torch.device) -> Any:
    try:
        from pitstop.train import Metrics
    except ImportError:
        _note("Metrics", "plain torch (pitstop.train.Metrics unavailable)")
        return PlainMetrics(device)
    _note("Metrics", "pitstop.train.Metrics")
    return Metrics(device)
