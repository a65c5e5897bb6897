"""The example model and data as `pitstop tune` factories (MODULE:FACTORY targets):

    pitstop tune model --model examples/tune_example.py:model
    pitstop tune loader --dataset examples/tune_example.py:dataset --model examples/tune_example.py:model
    pitstop tune --dataset examples/tune_example.py:dataset --model examples/tune_example.py:model

A model factory returns the model, a way to make a batch of any size (so other batch
sizes can be tried), the loss function and the optimizer the training uses; a
dataset factory returns the Dataset (or a dict of DataLoader arguments holding it).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from example_model import IMAGE_SHAPE, NUM_CLASSES, SmallResNet, SyntheticImages


def dataset() -> dict[str, Any]:
    return {"dataset": SyntheticImages(), "batch_size": 64}


def model() -> dict[str, Any]:
    torch.manual_seed(0)

    def batch_fn(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(n)
        return torch.randn(n, *IMAGE_SHAPE, generator=g), torch.randint(0, NUM_CLASSES, (n,),
                                                                          generator=g)

    return {"model": SmallResNet(), "batch": batch_fn(64), "batch_fn": batch_fn,
            "loss_fn": F.cross_entropy,
            "optimizer": functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)}
