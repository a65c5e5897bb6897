"""Shared pieces for the bench tests: a tiny synthetic image set and a tiny workload."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from pitstop.bench.dataset import DataSource, ImageDataset, SyntheticSpec, open_data
from pitstop.bench.ladder import Workload
from pitstop.bench.measure import Plan
from pitstop.bench.model import SIZES
from pitstop.bench.transforms import TrainTransform

TINY_SPEC = SyntheticSpec(num_images=24, num_classes=4, min_side=40, max_side=56)

# Options that make a CLI run take seconds: tiny model, tiny images, few steps.
TINY_CLI = ["--device", "cpu", "--model", "tiny", "--images", "24", "--image-size", "16",
            "--batch-size", "4", "--warmup", "1", "--steps", "2", "--repeats", "2"]


def make_workload(source: DataSource, *, warmup: int = 1, steps: int = 3, repeats: int = 2,
                  log_every: int = 50, transform: object | None = None) -> Workload:
    spec = SIZES["tiny"]
    dataset = ImageDataset(source.items, transform or TrainTransform(16))  # type: ignore[arg-type]
    return Workload(device=torch.device("cpu"), dataset=dataset, model_spec=spec,
                    num_classes=source.num_classes, batch_size=4,
                    plan=Plan(warmup=warmup, steps=steps, repeats=repeats), log_every=log_every)


def tiny_source(root: Path) -> DataSource:
    return open_data(root, TINY_SPEC)


class PidRecordingTransform:
    """A TrainTransform that appends the id of the process running it to a file, to prove
    where decoding happened (main process or DataLoader workers)."""

    def __init__(self, size: int, log: Path) -> None:
        self.inner = TrainTransform(size)
        self.log = log

    def __call__(self, image: object) -> torch.Tensor:
        import os

        with open(self.log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return self.inner(image)  # type: ignore[arg-type]


class FailsInWorkersTransform:
    """A TrainTransform that raises in any process but the one that made it: the rung
    that decodes in DataLoader workers fails, the others run."""

    def __init__(self, size: int) -> None:
        self.inner = TrainTransform(size)
        self.owner = os.getpid()

    def __call__(self, image: object) -> torch.Tensor:
        if os.getpid() != self.owner:
            raise RuntimeError("decoding refused in a worker process (test)")
        return self.inner(image)  # type: ignore[arg-type]


def recorded_pids(log: Path) -> set[int]:
    return {int(line) for line in log.read_text().split()} if log.exists() else set()


def cli_env() -> dict[str, str]:
    """The environment the root conftest's run_pitstop uses, for tests that need Popen."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("COLUMNS", "200")
    env["PYTHONUNBUFFERED"] = "1"
    return env
