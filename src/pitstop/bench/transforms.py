"""The augmentation every image-classification recipe uses, in Pillow and torch.

``RandomResizedCrop`` + horizontal flip + ``ToTensor`` + ``Normalize``, the torchvision
ImageNet training pipeline, written out because torchvision is not always installable
beside a given torch build. The point is that each sample costs what a real input
pipeline costs: a JPEG decode, a resample, a conversion to float and a normalisation,
all on the CPU in the DataLoader's worker processes.

Randomness comes from Python's ``random`` module, which the DataLoader seeds
differently in every worker, so workers do not repeat each other's crops (and no
tiny torch tensor is created and read back per random number).
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
from PIL import Image

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def random_crop_box(width: int, height: int, *, scale: tuple[float, float] = (0.35, 1.0),
                    ratio: tuple[float, float] = (3 / 4, 4 / 3), tries: int = 10
                    ) -> tuple[int, int, int, int]:
    """A random box ``(left, top, right, bottom)`` covering ``scale`` of the image area with
    an aspect ratio in ``ratio`` (log-uniform); the central square if no try fits."""
    area = width * height
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(tries):
        target = area * random.uniform(*scale)
        aspect = math.exp(random.uniform(log_lo, log_hi))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = random.randint(0, width - w)
            top = random.randint(0, height - h)
            return left, top, left + w, top + h
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


class TrainTransform:
    """PIL image -> normalised float32 tensor ``(3, size, size)``.

    Args:
        size: output side in pixels.
        scale: range of the crop's share of the image area.
        flip_p: probability of a horizontal flip.
        mean, std: per-channel normalisation (of values in [0, 1]).
    """

    def __init__(self, size: int, *, scale: tuple[float, float] = (0.35, 1.0),
                 flip_p: float = 0.5, mean: tuple[float, float, float] = IMAGENET_MEAN,
                 std: tuple[float, float, float] = IMAGENET_STD) -> None:
        if size < 1:
            raise ValueError(f"crop size must be positive, got {size}")
        self.size = size
        self.scale = scale
        self.flip_p = flip_p
        # (x / 255 - mean) / std == x * a + b, folded into one multiply-add per pixel.
        self._mul = torch.tensor([1 / (255 * s) for s in std]).view(3, 1, 1)
        self._add = torch.tensor([-m / s for m, s in zip(mean, std, strict=True)]).view(3, 1, 1)

    def __call__(self, image: Image.Image) -> torch.Tensor:
        if image.mode != "RGB":
            image = image.convert("RGB")
        box = random_crop_box(image.width, image.height, scale=self.scale)
        image = image.resize((self.size, self.size), Image.Resampling.BILINEAR, box=box)
        if self.flip_p > 0 and random.random() < self.flip_p:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        array = np.asarray(image, dtype=np.uint8)  # (H, W, 3), a fresh buffer from Pillow
        pixels = torch.from_numpy(array.copy()).permute(2, 0, 1).float()
        return (pixels * self._mul + self._add).contiguous()

    def __repr__(self) -> str:
        return f"TrainTransform(size={self.size}, scale={self.scale}, flip_p={self.flip_p})"
