"""The data side of the package: the loaders are built here, not in train.py."""
from torch.utils.data import DataLoader

from .datasets import ShardDataset


def make_loader(split, batch_size):
    return DataLoader(ShardDataset(split), batch_size=batch_size, shuffle=split == "train",  # want: LT004
                      num_workers=8, pin_memory=True)
