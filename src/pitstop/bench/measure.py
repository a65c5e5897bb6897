"""Timing a training loop honestly: warm-up, then timed repeats, median of the repeats.

The harness knows nothing about models or loaders: it calls ``run(n, tick)``, which
performs ``n`` training steps and returns how many samples they consumed. It reads
the clock only after ``sync()`` (``torch.cuda.synchronize`` on CUDA), because CUDA
kernels run asynchronously: without it the clock would measure how fast work is
*queued*, not done. Samples/s of a repeat is samples actually consumed (the real
batch sizes) divided by the wall time of that repeat.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

# ``run(n, tick)``: run ``n`` training steps, calling ``tick()`` after each; return samples consumed.
StepRunner = Callable[[int, Callable[[], None]], int]


@dataclass(frozen=True)
class Plan:
    """How much to measure: ``warmup`` untimed steps, then ``repeats`` x ``steps`` timed ones."""

    warmup: int
    steps: int
    repeats: int

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps * self.repeats


@dataclass
class Measurement:
    """Samples/s of each timed repeat, with what they were computed from."""

    rates: list[float]
    samples: int
    timed_seconds: float
    warmup_seconds: float
    steps: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return float(statistics.median(self.rates))

    @property
    def min(self) -> float:
        return float(min(self.rates))

    @property
    def max(self) -> float:
        return float(max(self.rates))

    def summary(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max,
                "repeats": [round(r, 3) for r in self.rates]}


def device_sync(device: torch.device) -> Callable[[], None]:
    """The function that waits for all queued work on ``device`` (a no-op on the CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def measure(run: StepRunner, plan: Plan, *, sync: Callable[[], None],
            tick: Callable[[], None] = lambda: None,
            on_phase: Callable[[str], None] = lambda phase: None,
            warmup_guard: Callable[[Callable[[], int]], int] | None = None) -> Measurement:
    """Warm up, then time ``plan.repeats`` runs of ``plan.steps`` steps each.

    ``warmup_guard`` wraps the warm-up call (the compile rung bounds its duration with it).
    """
    on_phase("warm-up")
    started = time.perf_counter()
    if plan.warmup:
        def warm() -> int:
            return run(plan.warmup, tick)

        if warmup_guard is not None:
            warmup_guard(warm)
        else:
            warm()
    sync()
    warmup_seconds = time.perf_counter() - started
    rates: list[float] = []
    total_samples = 0
    total_seconds = 0.0
    for repeat in range(plan.repeats):
        on_phase(f"timed {repeat + 1}/{plan.repeats}")
        sync()
        t0 = time.perf_counter()
        samples = run(plan.steps, tick)
        sync()
        elapsed = time.perf_counter() - t0
        if elapsed <= 0 or samples <= 0:
            raise RuntimeError(f"repeat {repeat + 1} consumed {samples} samples in {elapsed:.3g} s")
        rates.append(samples / elapsed)
        total_samples += samples
        total_seconds += elapsed
    return Measurement(rates=rates, samples=total_samples, timed_seconds=total_seconds,
                       warmup_seconds=warmup_seconds, steps=plan.steps * plan.repeats)
