"""MODULE:FACTORY targets for the tune tests (run as `tests/tune/tune_factories.py:NAME`).

Datasets and models written in the shapes users write them: a Dataset class, a dict
of DataLoader arguments, a model factory returning model/batch/loss_fn, a model that
returns its own loss (Hugging Face style, nanoGPT style).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, get_worker_info

from pitstop.tune.calibration import SleepIO, SleepStep


class Records(Dataset):
    """Small fixed-size samples with a little waiting, like reading records."""

    def __init__(self, n: int = 2048, wait: float = 0.001) -> None:
        self.n = n
        self.wait = wait

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.wait:
            time.sleep(self.wait)
        return torch.full((3, 16, 16), float(i % 7)), i % 10


def quick() -> dict[str, Any]:
    return {"dataset": Records(), "batch_size": 8}


def quick_with_user_settings() -> dict[str, Any]:
    return {"dataset": Records(), "batch_size": 8, "num_workers": 1, "persistent_workers": False}


def slow_io() -> dict[str, Any]:
    """Interruptible: enough work that a tune runs for a while."""
    return {"dataset": SleepIO(4096, 0.004), "batch_size": 8}


def slow_items() -> Records:
    return Records(64, wait=0.5)


class Empty(Dataset):
    def __len__(self) -> int:
        return 0

    def __getitem__(self, i: int) -> Any:
        raise IndexError(i)


def empty() -> Empty:
    return Empty()


class CorruptInWorkers(Records):
    """Reads fine in the main process; in a worker, record 1000+ is corrupt."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if get_worker_info() is not None and i >= 1000:
            raise ValueError(f"corrupt record at offset {i * 4096}")
        return super().__getitem__(i)


def corrupt_in_workers() -> dict[str, Any]:
    # Every index in one fixed order: a worker meets a corrupt one in its first batches.
    return {"dataset": CorruptInWorkers(2048, wait=0.0), "batch_size": 64}


class Ragged(Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros(3 + i % 5)


def ragged() -> Ragged:
    return Ragged()


def not_a_dataset() -> list[int]:
    return [1, 2, 3]


def raising_factory() -> Any:
    raise RuntimeError("cannot open /data/train.lmdb")


# ---------------------------------------------------------------- models

def mlp_model() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 10))
    x = torch.randn(16, 3, 16, 16)
    y = torch.randint(0, 10, (16,))
    return {"model": model, "batch": (x, y), "loss_fn": F.cross_entropy}


def sleep_model() -> dict[str, Any]:
    """Trains at a known rate: 50 ms a step, whatever the batch."""
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))
    return {"model": SleepStep(0.05), "batch": (x, y), "loss_fn": F.cross_entropy}


@dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class HFStyle(torch.nn.Module):
    """Returns an object with .loss, takes keyword inputs (Hugging Face style)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> Output:
        logits = self.head(self.emb(input_ids))
        return Output(F.cross_entropy(logits.flatten(0, 1), labels.flatten()), logits)


def hf_style() -> dict[str, Any]:
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (8, 12))
    return {"model": HFStyle(), "batch": {"input_ids": ids, "labels": ids.roll(1, 1)}}


class GPTStyle(HFStyle):
    """Returns (logits, loss) from model(idx, targets) (nanoGPT style)."""

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        logits = self.head(self.emb(idx))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def gpt_style() -> dict[str, Any]:
    torch.manual_seed(0)
    idx = torch.randint(0, 50, (8, 12))
    return {"model": GPTStyle(), "batch": (idx, idx.roll(1, 1))}


class Cancellation(torch.nn.Module):
    """Adds and subtracts a large offset after a linear layer: exact in fp32, but under
    bf16 autocast the linear's bf16 output cannot hold the small values next to 1000."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(768, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(torch.flatten(x, 1))
        return ((h + 1000.0) - 1000.0) * 20.0


def cancellation_model() -> dict[str, Any]:
    torch.manual_seed(0)
    return {"model": Cancellation(), "batch": (torch.randn(16, 3, 16, 16),
                                               torch.randint(0, 10, (16,))),
            "loss_fn": F.cross_entropy}


class MemoryBound(torch.nn.Module):
    """Fails like the CUDA caching allocator when a batch is over ``limit`` samples; a
    step takes 20 ms whatever the batch, so larger batches are faster until then."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.lin = torch.nn.Linear(768, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {x.shape[0]} "
                                         f"samples' activations")
        time.sleep(0.02)
        return self.lin(torch.flatten(x, 1))


def _memory_bound(limit: int) -> dict[str, Any]:
    torch.manual_seed(0)

    def batch_fn(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(n, 3, 16, 16), torch.randint(0, 10, (n,))

    return {"model": MemoryBound(limit), "batch_fn": batch_fn, "loss_fn": F.cross_entropy}


def memory_bound() -> dict[str, Any]:
    return _memory_bound(40)


def rank_memory_bound() -> dict[str, Any]:
    """Under torchrun: rank 0 fits 24 samples, rank 1 fits 96."""
    rank = int(os.environ.get("RANK", "0"))
    return _memory_bound(24 if rank == 0 else 96)


class SlowUnderBf16(torch.nn.Module):
    """Fast in fp32; ``bf16_step_s`` seconds a step under bf16 autocast (an option far
    slower than the budget allows, as a CPU without bf16 instructions makes it)."""

    def __init__(self, bf16_step_s: float) -> None:
        super().__init__()
        self.bf16_step_s = bf16_step_s
        self.lin = torch.nn.Linear(768, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lin(torch.flatten(x, 1))
        if out.dtype == torch.bfloat16 and self.bf16_step_s > 0:
            time.sleep(self.bf16_step_s)
        return out


def _slow_under_bf16(seconds: float) -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))
    return {"model": SlowUnderBf16(seconds), "batch": (x, y), "loss_fn": F.cross_entropy}


def slow_under_bf16() -> dict[str, Any]:
    return _slow_under_bf16(4.0)


def rank_slow_under_bf16() -> dict[str, Any]:
    """Under torchrun: only rank 1 is slow under bf16."""
    return _slow_under_bf16(4.0 if int(os.environ.get("RANK", "0")) == 1 else 0.0)


def slow_model() -> dict[str, Any]:
    """Two seconds a step whatever the settings: no trial fits a budget of a second."""
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))
    return {"model": SleepStep(2.0), "batch": (x, y), "loss_fn": F.cross_entropy}


class SlowInWorkers(Records):
    """Quick in the main process; in a worker every item takes ``wait_in_worker`` s (a
    store that throttles the worker processes' connections)."""

    def __init__(self, n: int = 256, wait_in_worker: float = 3.0) -> None:
        super().__init__(n, wait=0.0)
        self.wait_in_worker = wait_in_worker

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if get_worker_info() is not None:
            time.sleep(self.wait_in_worker)
        return super().__getitem__(i)
