"""The model and data shared by the examples and by benchmarks/bench_trainstep_overhead.py.

A small ResNet-style CNN on synthetic 32x32 RGB images of 10 classes. Each class is
a fixed random colour pattern plus noise, so the loss really goes down and a few
hundred steps are enough to see it; samples are generated from their index (no
files, no downloads), with a random flip as the "augmentation" done in the workers.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a bad value is a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def usable_device(parser: argparse.ArgumentParser, name: str) -> torch.device:
    """``--device NAME`` as a torch device this machine has, else a usage error."""
    try:
        device = torch.device(name)
    except RuntimeError:
        parser.error(f"--device {name!r} is not a torch device: use cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {name}: no usable CUDA GPU here; use --device cpu")
    return device


class SyntheticImages(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """``size`` images; image ``i`` is class ``i % 10``'s pattern plus noise seeded by ``i``."""

    def __init__(self, size: int = 4096, noise: float = 0.8, seed: int = 0) -> None:
        self.size = size
        self.noise = noise
        g = torch.Generator().manual_seed(seed)
        self.patterns = torch.randn(NUM_CLASSES, *IMAGE_SHAPE, generator=g)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(1_000_003 * (index + 1))
        label = index % NUM_CLASSES
        image = self.patterns[label] + self.noise * torch.randn(*IMAGE_SHAPE, generator=g)
        if torch.rand((), generator=g) < 0.5:
            image = image.flip(-1)
        return image, label


class Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                     if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.skip(x))


class SmallResNet(nn.Module):
    """About 0.7 M parameters: stem, three stages of one residual block, linear head."""

    def __init__(self, width: int = 32, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stages = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2),
                                    Block(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
