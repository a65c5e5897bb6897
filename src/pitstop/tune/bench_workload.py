"""The bench's own workload as ``MODULE:FACTORY`` targets, so ``pitstop tune`` can be run
on exactly what ``pitstop bench`` measures and the two compared::

    pitstop tune --dataset pitstop.tune.bench_workload:dataset \\
                 --model pitstop.tune.bench_workload:model

``dataset``: the bench's synthetic JPEG set (written once to the bench's cache), decoded
and augmented like the bench's loader does, at the bench's batch size. ``model``: the
bench's ResNet-style network with the bench's optimizer (SGD, lr 0.05, momentum 0.9)
and cross-entropy; its batches are random images of the right shape. Sizes follow
the bench's ``auto``: ``large`` on CUDA, ``small`` on a CPU; the ``*_tiny`` factories
use the bench's ``tiny`` size (smoke tests).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

NUM_CLASSES = 10


def _spec(size: str) -> Any:
    from pitstop.bench.model import spec_for

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return spec_for(size, device), device


def _dataset(size: str) -> dict[str, Any]:
    from pitstop.bench.dataset import ImageDataset, SyntheticSpec, open_data
    from pitstop.bench.transforms import TrainTransform

    spec, device = _spec(size)
    images = 4096 if device.type == "cuda" and size != "tiny" else 1024
    source = open_data(None, SyntheticSpec(num_images=images, num_classes=NUM_CLASSES))
    return {"dataset": ImageDataset(source.items, TrainTransform(spec.image_size)),
            "batch_size": spec.batch_size}


def _model(size: str) -> dict[str, Any]:
    from pitstop.bench.model import build_model

    spec, _device = _spec(size)

    def batch_fn(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(n)
        return (torch.randn(n, 3, spec.image_size, spec.image_size, generator=g),
                torch.randint(0, NUM_CLASSES, (n,), generator=g))

    return {"model": build_model(spec, NUM_CLASSES), "batch": batch_fn(spec.batch_size),
            "batch_fn": batch_fn, "loss_fn": F.cross_entropy,
            "optimizer": functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)}


def dataset() -> dict[str, Any]:
    return _dataset("auto")


def model() -> dict[str, Any]:
    return _model("auto")


def dataset_tiny() -> dict[str, Any]:
    return _dataset("tiny")


def model_tiny() -> dict[str, Any]:
    return _model("tiny")
