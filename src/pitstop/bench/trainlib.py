"""The pieces of :mod:`pitstop.train` the ladder uses, in the shape the rungs call them.

The ladder measures pitstop's own library (``loader``, ``to_device``,
``DevicePrefetcher``, ``TrainStep``, ``Metrics``): the rungs are the code a user is
told to write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from pitstop.train import DevicePrefetcher, Metrics, TrainStep
from pitstop.train import loader as train_loader
from pitstop.train import loader_settings as train_loader_settings
from pitstop.train import to_device as train_to_device
from pitstop.train import training_threads as train_training_threads

# ---------------------------------------------------------------- loader


def make_loader(dataset: Dataset[Any], batch_size: int, *, device: torch.device,
                **overrides: Any) -> DataLoader[Any]:
    """``pitstop.train.loader`` (settings computed for this machine, no config file read)."""
    return train_loader(dataset, batch_size, shuffle=True, device=device, config=False,
                        **overrides)


def planned_workers(dataset: Dataset[Any], batch_size: int, *, device: torch.device
                    ) -> tuple[int | None, str]:
    """The worker count ``pitstop.train.loader`` would choose here, and why."""
    settings = train_loader_settings(dataset, batch_size, device=device, config=False)
    value, source = settings["num_workers"]
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
    torch's), as recommended by ``pitstop.train.loader`` in ``pitstop_settings``, or
    computed the same way for a plain DataLoader (the naive rung's)."""
    settings = getattr(loader, "pitstop_settings", None)
    if isinstance(settings, dict) and "torch_threads" in settings:
        value, source = settings["torch_threads"]
    else:
        value, source = train_training_threads(loader.num_workers, device=device)
    return (None if value is None else int(value)), str(source)


# ---------------------------------------------------------------- moving batches

def to_device(batch: Any, device: torch.device) -> Any:
    return train_to_device(batch, device)


def prefetcher(loader: Iterable[Any], device: torch.device) -> Iterable[Any]:
    return DevicePrefetcher(loader, device)


# ---------------------------------------------------------------- the training step

def make_step(model: Any, optimizer: torch.optim.Optimizer, *, precision: str) -> TrainStep:
    """``pitstop.train.TrainStep(model, optimizer, precision=precision)``; callable, with
    ``.precision`` the resolved precision and ``.precision_reason`` why."""
    return TrainStep(model, optimizer, precision=precision)  # type: ignore[arg-type]


def call_step(step: TrainStep, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return step(inputs, targets)


# ---------------------------------------------------------------- metrics

def make_metrics(device: torch.device) -> Metrics:
    return Metrics(device)
