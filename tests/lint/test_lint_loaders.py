"""The loader model (issue 10, cause 4): DataLoader settings read through **kwargs dicts
(literal, conditional, .update(), merged), argparse defaults and factory functions, and
loaders returned from methods."""

from __future__ import annotations

import textwrap

import pytest
from lint_helpers import found, program

from pitstop.lint import lint_source

HEAD = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--pin", action="store_true")
args = parser.parse_args()
use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
"""
LOOP = """
for epoch in range(10):
    for x, y in loader:
        x = x.to(device)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
"""


def _codes(build: str) -> set[str]:
    src = HEAD + textwrap.dedent(build) + LOOP
    return {f.code for f in lint_source(src, "train.py", select=("LT002", "LT003", "LT004"))}


@pytest.mark.parametrize(("build", "expected"), [
    # a conditional dict: on a GPU, 1 worker and pinned memory; no persistent workers
    ("kw = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}\n"
     "loader = DataLoader(ds, batch_size=64, **kw)\n", {"LT004"}),
    # built with .update() under `if use_cuda:` (the MNIST example's shape)
    ("train_kwargs = {'batch_size': 64}\nif use_cuda:\n"
     "    train_kwargs.update({'num_workers': 2, 'pin_memory': True, 'shuffle': True})\n"
     "loader = DataLoader(ds, **train_kwargs)\n", {"LT004"}),
    # merged dicts, keys added by subscript
    ("base = dict(batch_size=64)\nextra = {'pin_memory': True}\nkw = {**base, **extra}\n"
     "kw['num_workers'] = 8\nkw['persistent_workers'] = True\nloader = DataLoader(ds, **kw)\n",
     set()),
    # an argparse default of 0 is no workers
    ("loader = DataLoader(ds, batch_size=64, num_workers=args.workers, pin_memory=True)\n",
     {"LT002"}),
    # pin_memory from a store_true flag: off by default
    ("loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=args.pin,\n"
     "                    persistent_workers=True)\n", {"LT003"}),
    # nothing passed at all through an empty dict
    ("kw = {}\nloader = DataLoader(ds, batch_size=64, **kw)\n", {"LT002", "LT003"}),
    # a factory returns the kwargs
    ("def loader_kwargs():\n    return {'num_workers': 4, 'pin_memory': True,"
     " 'persistent_workers': True}\nloader = DataLoader(ds, **loader_kwargs())\n", set()),
    # unreadable: stay silent
    ("loader = DataLoader(ds, **config.loader_kwargs)\n", set()),
])
def test_loader_kwargs(build, expected) -> None:
    assert _codes(build) == expected, build


def test_loaders_returned_from_methods(tmp_path) -> None:
    run = program(tmp_path, {
        "datamodule.py": """
            from torch.utils.data import DataLoader

            class DataModule:
                def __init__(self, ds, workers=4):
                    self.ds = ds
                    self.workers = workers

                def train_dataloader(self):
                    return DataLoader(self.ds, batch_size=32, shuffle=True,
                                      num_workers=self.workers)
            """,
        "train.py": """
            import torch
            from datamodule import DataModule

            def main(ds, model, opt):
                dm = DataModule(ds)
                loader = dm.train_dataloader()
                for epoch in range(5):
                    for x, y in loader:
                        loss = model(x.cuda(), y.cuda())
                        loss.backward()
                        opt.step()
            """,
    }, select=("LT003", "LT004"))
    assert found(run) == {("datamodule.py", 9, "LT003"), ("datamodule.py", 9, "LT004")}


def test_in_memory_and_on_device_data_need_no_workers_or_pinning() -> None:
    src = HEAD + textwrap.dedent("""
        from torch.utils.data import TensorDataset
        X, Y = torch.randn(1000, 8), torch.randn(1000, 1)
        loader = DataLoader(TensorDataset(X, Y), batch_size=64)
        """) + LOOP
    assert not lint_source(src, "train.py", select=("LT002", "LT003"))


def test_one_iterator_for_the_whole_run_keeps_its_workers() -> None:
    src = HEAD + textwrap.dedent("""
        it = iter(DataLoader(ds, batch_size=64, num_workers=3, pin_memory=True))
        while True:
            x, y = next(it)
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
        """)
    assert not lint_source(src, "train.py", select=("LT004",))


def test_items_that_cost_nothing_to_load() -> None:
    # prompts and indices (a class-image sampling loader): no workers, nothing to pin;
    # tensors held in memory and only cast per item: no workers, but their batches are
    # still copies from pageable memory (pinning helps)
    src = HEAD + textwrap.dedent("""
        from torch.utils.data import Dataset

        class PromptDataset(Dataset):
            def __init__(self, prompt, n):
                self.prompt, self.n = prompt, n
            def __len__(self):
                return self.n
            def __getitem__(self, index):
                return {"prompt": self.prompt, "index": index}

        class HeldImages(Dataset):
            def __init__(self, images, labels):
                self.images, self.labels = images, labels
            def __getitem__(self, idx):
                return self.images[idx].float(), self.labels[idx]

        prompts = DataLoader(PromptDataset("a dog", 100), batch_size=4)
        for batch in prompts:
            x = batch["index"].to(device)
        loader = DataLoader(HeldImages(imgs, labels), batch_size=64)
        """) + LOOP
    got = {(f.line, f.code) for f in lint_source(src, "train.py", select=("LT002", "LT003"))}
    assert got == {(src.splitlines().index(
        "loader = DataLoader(HeldImages(imgs, labels), batch_size=64)") + 1, "LT003")}


def test_lightning_datamodule_loaders_placed_by_fabric(tmp_path) -> None:
    # `fabric.setup_dataloaders(train_dl, val_dl)` re-binds the names a data module's
    # `train_dataloader()` gave: the batches arrive on the GPU, so `.item()` on them syncs
    # (through an iterator class of the program that cycles over the loader)
    run = program(tmp_path, {
        "cycle.py": """
            import torch

            class CycleIterator:
                def __init__(self, iterable):
                    self.iterable = iterable
                    self._iterator = None

                def __next__(self):
                    if self._iterator is None:
                        self._iterator = iter(self.iterable)
                    try:
                        return next(self._iterator)
                    except StopIteration:
                        self._iterator = iter(self.iterable)
                        return next(self._iterator)
            """,
        "finetune.py": """
            import torch
            from cycle import CycleIterator

            def main(fabric, data, model, optimizer):
                train_dl, val_dl = get_dataloaders(fabric, data)
                fit(fabric, model, optimizer, train_dataloader=train_dl)

            def get_dataloaders(fabric, data):
                train_dl = data.train_dataloader()
                val_dl = data.val_dataloader()
                train_dl, val_dl = fabric.setup_dataloaders(train_dl, val_dl)
                return train_dl, val_dl

            def fit(fabric, model, optimizer, train_dataloader):
                it = CycleIterator(train_dataloader)
                step = 0
                while step < 1000:
                    batch = next(it)
                    loss = model(batch["input_ids"]).mean()
                    fabric.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                    step += 1
                    seen = batch["counts"].sum().item()
            """,
    }, select=("LT001",))
    assert found(run) == {("finetune.py", 24, "LT001")}
