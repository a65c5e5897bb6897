"""Datasets and a model whose best loader settings are known, to judge the search by.

Each sample costs a controlled amount of one resource, so the shape of the
throughput curve over ``num_workers`` is known in advance:

* :class:`SleepIO`: every item waits ``seconds`` (a network or disk read): no CPU is
  used, so throughput scales with workers past the CPU count, and other processes
  competing for the cores barely move it. Best: the most workers tried.
* :class:`LimitedIO`: the same, from a store that serves at most ``concurrency``
  reads at once (a semaphore shared by the worker processes): throughput rises up to
  ``concurrency`` workers and is flat after. Best: ``concurrency`` workers (fewest
  within noise), a count the coarse sweep (1, 2, 4, 8) does not hit.
* :class:`CpuDecode`: every item burns ``seconds`` of CPU (hashing, standing in for a
  JPEG decode): throughput rises up to the CPU count and no further.
* :class:`SleepStep`: a model whose training step takes ``seconds`` (it waits, it does
  not compute): it consumes batches at a known rate, so the loader only has to
  outrun that, and the fewest workers that do are known.

Used by ``benchmarks/bench_tune_search.py`` (tuner against the full grid) and the
tests; the factories at the bottom are ``MODULE:FACTORY`` targets for the command
line, e.g. ``pitstop tune loader --dataset pitstop.tune.calibration:limited_io``.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import time
from typing import Any

import torch
from torch.utils.data import Dataset

SAMPLE_SHAPE = (3, 16, 16)


def _sample(index: int) -> tuple[torch.Tensor, int]:
    g = torch.Generator().manual_seed(index)
    return torch.rand(SAMPLE_SHAPE, generator=g), index % 10


class SleepIO(Dataset[tuple[torch.Tensor, int]]):
    """``length`` samples, each taking ``seconds`` of waiting (no CPU)."""

    def __init__(self, length: int = 4096, seconds: float = 0.004) -> None:
        self.length = length
        self.seconds = seconds

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.seconds)
        return _sample(index)


class LimitedIO(SleepIO):
    """:class:`SleepIO` from a store that serves ``concurrency`` reads at a time."""

    def __init__(self, length: int = 4096, seconds: float = 0.004, concurrency: int = 5) -> None:
        super().__init__(length, seconds)
        self.concurrency = concurrency
        # Fork-inherited (or passed on at spawn): one semaphore for all the workers.
        self.slots = multiprocessing.get_context().BoundedSemaphore(concurrency)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with self.slots:
            time.sleep(self.seconds)
        return _sample(index)


class CpuDecode(Dataset[tuple[torch.Tensor, int]]):
    """``length`` samples, each burning about ``seconds`` of one CPU core."""

    def __init__(self, length: int = 4096, seconds: float = 0.002) -> None:
        self.length = length
        self.seconds = seconds
        self.rounds = calibrate_rounds(seconds)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        burn(self.rounds, index)
        return _sample(index)


_BLOCK = bytes(range(256)) * 256  # 64 KiB


def burn(rounds: int, seed: int = 0) -> bytes:
    digest = seed.to_bytes(8, "little")
    for _ in range(rounds):
        digest = hashlib.blake2b(_BLOCK + digest, digest_size=16).digest()
    return digest


def calibrate_rounds(seconds: float) -> int:
    """Hash rounds that take about ``seconds`` on one core of this machine (the fastest
    of a few tries, so that a busy moment during calibration does not inflate it)."""
    probe = 64
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        burn(probe)
        best = min(best, time.perf_counter() - t0)
    return max(1, round(seconds / (best / probe)))


class SleepStep(torch.nn.Module):
    """A model whose every forward waits ``seconds``: a training step at a known rate."""

    def __init__(self, seconds: float = 0.03, features: int = SAMPLE_SHAPE[0] * SAMPLE_SHAPE[1]
                 * SAMPLE_SHAPE[2], classes: int = 10) -> None:
        super().__init__()
        self.seconds = seconds
        self.head = torch.nn.Linear(features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        return self.head(torch.flatten(x, 1))


# ---------------------------------------------------------------- MODULE:FACTORY targets

def sleep_io() -> dict[str, Any]:
    return {"dataset": SleepIO(), "batch_size": 16}


def limited_io() -> dict[str, Any]:
    return {"dataset": LimitedIO(), "batch_size": 16}


def cpu_decode() -> dict[str, Any]:
    return {"dataset": CpuDecode(), "batch_size": 16}


def sleep_step() -> dict[str, Any]:
    """A model that trains at 1 / 0.03 s = 33 batches/s on any machine."""
    return {"model": SleepStep(), "loss_fn": torch.nn.functional.cross_entropy}
