"""The bench's network: a ResNet-style CNN (BatchNorm, residual basic blocks), sized by device.

Small enough on a 2-core CPU that one rung is measured in seconds; on a GPU a
ResNet-18-shaped network on 128 px inputs at a batch of 256, large enough to keep
the GPU busy, so that the input pipeline has to keep up with real compute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """Shape of the network and of its input."""

    name: str
    widths: tuple[int, ...]
    blocks: tuple[int, ...]
    image_size: int
    batch_size: int
    stem_stride: int = 1

    def describe(self) -> dict[str, Any]:
        return asdict(self)


SIZES: dict[str, ModelSpec] = {
    # For tests and smoke runs: milliseconds per step.
    "tiny": ModelSpec("tiny", widths=(8, 16), blocks=(1, 1), image_size=32, batch_size=8),
    # A 2-core CPU: ~0.1 s per fp32 step of 32 images at 64 px.
    "small": ModelSpec("small", widths=(16, 32, 64, 128), blocks=(1, 1, 1, 1), image_size=64,
                       batch_size=32),
    # A GPU: ResNet-18's stages on 128 px images (stem stride 2, no max-pool).
    "large": ModelSpec("large", widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), image_size=128,
                       batch_size=256, stem_stride=2),
}


def spec_for(size: str, device: torch.device) -> ModelSpec:
    """``size`` is ``tiny``/``small``/``large``, or ``auto``: ``large`` on CUDA, else ``small``."""
    if size == "auto":
        size = "large" if device.type == "cuda" else "small"
    return SIZES[size]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm and a residual connection (ResNet's basic block)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x), inplace=True)


class BenchNet(nn.Module):
    """Stem conv -> stages of basic blocks (each after the first halves the resolution)
    -> global average pool -> linear classifier."""

    def __init__(self, spec: ModelSpec, num_classes: int) -> None:
        super().__init__()
        first = spec.widths[0]
        self.stem = nn.Sequential(
            nn.Conv2d(3, first, 3, spec.stem_stride, 1, bias=False),
            nn.BatchNorm2d(first),
            nn.ReLU(inplace=True),
        )
        layers: list[nn.Module] = []
        in_channels = first
        for stage, (width, count) in enumerate(zip(spec.widths, spec.blocks, strict=True)):
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(in_channels, width, stride))
                in_channels = width
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(spec: ModelSpec, num_classes: int, *, seed: int = 0) -> BenchNet:
    """The network with the same initial weights for the same ``seed``."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return BenchNet(spec, num_classes)
    finally:
        torch.random.set_rng_state(generator_state)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
