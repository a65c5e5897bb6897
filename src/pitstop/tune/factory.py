"""``MODULE:FACTORY``: finding, importing and calling the user's dataset and model factories,
and checking what they return.

``MODULE`` is a dotted module name (found from the working directory, like
``python -m``) or a path to a ``.py`` file; ``FACTORY`` is an attribute of it, called
with no arguments (a non-callable attribute is used as it is).

What a dataset factory may return (``--dataset``):

* a map-style ``torch.utils.data.Dataset`` (anything with ``__len__`` and
  ``__getitem__``), or
* a dict of ``DataLoader`` keyword arguments that holds one under ``"dataset"``
  (``{"dataset": ds, "batch_size": 64, "collate_fn": fn, "num_workers": 2}``). The
  tuner keeps ``collate_fn``, ``worker_init_fn``, ``drop_last`` and the like, and
  measures the loader settings given there as "your settings".

What a model factory may return (``--model``), as a dict (or an object with these
attributes, or a tuple in this order):

* ``model``: the ``nn.Module``;
* ``batch``: one batch, or ``batch_fn``: a callable ``batch_fn(n)`` giving a batch of
  ``n`` samples (needed to try other batch sizes; a fixed batch is repeated or cut);
* ``loss_fn``: ``loss_fn(outputs, targets)``; the batch is then ``(inputs, targets)``.
  Without it the model computes its own loss (the Hugging Face / nanoGPT style): the
  whole batch goes in (``model(**batch)`` for a dict, ``model(*batch)`` for a tuple)
  and the loss is read from what comes out (see :func:`loss_of`);
* ``optimizer`` (optional): a callable ``optimizer(params, **extra)`` (an optimizer
  class such as ``torch.optim.AdamW`` or a ``functools.partial`` of one); default
  ``AdamW(lr=1e-3)``. ``extra`` carries ``foreach=``/``fused=`` in the optimizer trials.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError

# DataLoader arguments the tuner sets itself in every trial (the user's values, when
# given, are measured as the baseline trial "your settings").
TUNED_LOADER_KEYS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers",
                     "multiprocessing_context")
# DataLoader arguments that decide which samples a batch holds: the tuner drives the
# sampling itself (a controlled sampler), so these are read but replaced.
SAMPLING_KEYS = ("shuffle", "sampler", "batch_sampler", "batch_size", "drop_last")
KNOWN_LOADER_KEYS = frozenset({
    "dataset", *TUNED_LOADER_KEYS, *SAMPLING_KEYS, "collate_fn", "worker_init_fn",
    "generator", "timeout", "pin_memory_device", "in_order", "snapshot_every_n_steps",
})


def split_target(text: str, *, option: str) -> tuple[str, str]:
    """``"pkg.mod:make"`` -> ``("pkg.mod", "make")``; a usage error otherwise."""
    module, sep, attr = text.rpartition(":")
    if not sep or not module or not attr or not attr.replace("_", "a").replace(".", "a").isalnum():
        raise UsageError(f"{option} {text!r}: expected MODULE:FACTORY, e.g. mydata.py:make_dataset "
                         f"or mypackage.data:make_dataset")
    return module, attr


def import_target(text: str, *, option: str) -> Any:
    """The attribute ``FACTORY`` of ``MODULE`` (not called yet)."""
    module_name, attr = split_target(text, option=option)
    module = _import_module(module_name, text=text, option=option)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))[:12]
            raise UsageError(f"{option} {text}: {module_name} has no attribute {attr!r}"
                             + (f" (it has: {', '.join(public)})" if public else ""))
        obj = getattr(obj, part)
    return obj


def _import_module(name: str, *, text: str, option: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    looks_like_file = name.endswith(".py") or os.sep in name
    if looks_like_file:
        path = Path(name).expanduser()
        if not path.is_file():
            raise UsageError(f"{option} {text}: file {path} does not exist")
        return _import_file(path, text=text, option=option)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            raise UsageError(f"{option} {text}: no module named {name!r} (searched the working "
                             f"directory and sys.path); give a module or a path to a .py file"
                             ) from None
        raise UsageError(f"{option} {text}: importing {name} failed: {_one_line(err)}") from None
    except Exception as err:  # the user's module raised while importing
        raise UsageError(f"{option} {text}: importing {name} failed: {_one_line(err)}") from None


def _import_file(path: Path, *, text: str, option: str) -> Any:
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        # Siblings import each other, and spawned DataLoader workers re-import the
        # module by this name (they receive the parent's sys.path).
        sys.path.insert(0, folder)
    name = path.stem
    existing = sys.modules.get(name)
    existing_file = getattr(existing, "__file__", None)
    if existing is not None and existing_file and Path(existing_file).resolve() == path.resolve():
        return existing
    if existing is not None or not name.isidentifier():
        name = f"pitstop_tune_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{option} {text}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as err:
        sys.modules.pop(name, None)
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        raise UsageError(f"{option} {text}: importing {path} failed: {_one_line(err)}") from None
    return module


def call_factory(text: str, *, option: str) -> Any:
    """Import ``MODULE:FACTORY`` and call it (a non-callable attribute is returned as is)."""
    target = import_target(text, option=option)
    if not isinstance(target, type) and (
            not callable(target) or _is_dataset_like(target) or _is_module(target)):
        return target  # an instance: a dataset or a model built at import time
    try:
        return target()
    except TypeError as err:
        raise UsageError(f"{option} {text}: calling it with no arguments failed ({err}); the "
                         f"factory must take no required arguments") from None
    except Exception as err:
        raise UsageError(f"{option} {text}: the factory raised {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    where = ""
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({err.filename}:{err.lineno})"
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ") + where


def _is_module(obj: Any) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return isinstance(obj, torch.nn.Module)


def _is_dataset_like(obj: Any) -> bool:
    return hasattr(obj, "__getitem__") and hasattr(obj, "__len__") and not isinstance(
        obj, (Mapping, str, bytes, list, tuple))


# ---------------------------------------------------------------- datasets

@dataclass
class DatasetTarget:
    """A dataset and the DataLoader arguments it came with."""

    dataset: Any
    loader_kwargs: dict[str, Any] = field(default_factory=dict)
    named: str = "dataset"

    @property
    def user_settings(self) -> dict[str, Any]:
        """The loader settings the user gave (measured as the "your settings" trial)."""
        return {k: self.loader_kwargs[k] for k in TUNED_LOADER_KEYS if k in self.loader_kwargs}

    @property
    def batch_size(self) -> int | None:
        value = self.loader_kwargs.get("batch_size")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_dataset_target(obj: Any, *, named: str = "dataset") -> DatasetTarget:
    """Check what a dataset factory returned (see the module docstring)."""
    from torch.utils.data import IterableDataset

    kwargs: dict[str, Any] = {}
    if isinstance(obj, DatasetTarget):
        return obj
    if isinstance(obj, Mapping):
        if "dataset" not in obj:
            raise UsageError(f"{named}: the dict of DataLoader arguments has no 'dataset' key "
                             f"(keys: {', '.join(map(str, obj)) or 'none'})")
        unknown = sorted(str(k) for k in obj if k not in KNOWN_LOADER_KEYS)
        if unknown:
            raise UsageError(f"{named}: {', '.join(unknown)} is not a DataLoader argument "
                             f"pitstop tune knows")
        kwargs = {k: v for k, v in obj.items() if k != "dataset"}
        if kwargs.get("batch_sampler") is not None:
            raise UsageError(f"{named}: a batch_sampler decides batch sizes itself; return the "
                             f"dataset with batch_size= instead (the tuner samples batches itself)")
        obj = obj["dataset"]
    if isinstance(obj, IterableDataset):
        raise UsageError(f"{named}: an IterableDataset ({type(obj).__name__}) cannot be tuned "
                         f"yet (its epoch length and sharding are its own); return a map-style "
                         f"Dataset (__len__ and __getitem__)")
    if not _is_dataset_like(obj):
        raise UsageError(f"{named}: returned {type(obj).__name__}, not a Dataset; return a "
                         f"map-style Dataset (with __len__ and __getitem__) or a dict of "
                         f"DataLoader arguments holding one")
    try:
        length = len(obj)
    except Exception as err:
        raise UsageError(f"{named}: len(dataset) raised {_one_line(err)}") from None
    if length == 0:
        raise UsageError(f"{named}: the dataset is empty (len 0); nothing to load")
    return DatasetTarget(obj, kwargs, named)


# ---------------------------------------------------------------- models

@dataclass
class ModelTarget:
    """A model, how to get a batch for it, and how its loss is computed."""

    model: Any
    batch: Any = None
    batch_fn: Callable[[int], Any] | None = None
    loss_fn: Callable[..., Any] | None = None
    optimizer: Callable[..., Any] | None = None
    named: str = "model"

    @property
    def computes_own_loss(self) -> bool:
        return self.loss_fn is None

    @property
    def has_batch(self) -> bool:
        return self.batch is not None or self.batch_fn is not None


_MODEL_KEYS = ("model", "batch", "batch_fn", "loss_fn", "optimizer")
_ALIASES = {"make_batch": "batch_fn", "loss": "loss_fn", "criterion": "loss_fn",
            "optim": "optimizer"}


def as_model_target(obj: Any, *, named: str = "model") -> ModelTarget:
    """Check what a model factory returned (see the module docstring)."""
    import torch

    if isinstance(obj, ModelTarget):
        return obj
    parts: dict[str, Any] = {}
    if isinstance(obj, torch.nn.Module):
        parts["model"] = obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            key = _ALIASES.get(str(key), str(key))
            if key not in _MODEL_KEYS:
                raise UsageError(f"{named}: unknown key {key!r}; a model factory returns "
                                 f"{', '.join(_MODEL_KEYS)}")
            parts[key] = value
    elif isinstance(obj, (tuple, list)):
        if not 1 <= len(obj) <= 4:
            raise UsageError(f"{named}: a tuple must be (model, batch[, loss_fn[, optimizer]]), "
                             f"got {len(obj)} items")
        parts = dict(zip(("model", "batch", "loss_fn", "optimizer"), obj, strict=False))
    elif hasattr(obj, "model"):
        parts = {k: getattr(obj, k) for k in _MODEL_KEYS if getattr(obj, k, None) is not None}
    else:
        raise UsageError(f"{named}: returned {type(obj).__name__}; return an nn.Module, or a "
                         f"dict with model, batch (or batch_fn) and loss_fn")
    model = parts.get("model")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{named}: 'model' is {type(model).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in model.parameters()):
        raise UsageError(f"{named}: the model has no trainable parameters")
    batch = parts.get("batch")
    batch_fn = parts.get("batch_fn")
    if batch is not None and callable(batch) and not isinstance(batch, torch.Tensor):
        batch_fn, batch = batch, None
    if batch_fn is not None and not callable(batch_fn):
        raise UsageError(f"{named}: 'batch_fn' must be a callable batch_fn(n) -> batch")
    loss_fn = parts.get("loss_fn")
    if loss_fn is not None and not callable(loss_fn):
        raise UsageError(f"{named}: 'loss_fn' must be callable, got {type(loss_fn).__name__}")
    optimizer = parts.get("optimizer")
    if optimizer is not None and not callable(optimizer):
        raise UsageError(f"{named}: 'optimizer' must be a callable optimizer(params, **kw), such "
                         f"as torch.optim.AdamW or functools.partial(torch.optim.SGD, lr=0.1)")
    return ModelTarget(model, batch, batch_fn, loss_fn, optimizer, named)


def loss_of(outputs: Any) -> Any:
    """The loss inside what a model that computes its own loss returned.

    In this order: a 0-dim tensor itself; ``outputs.loss`` (Hugging Face
    ``ModelOutput``); ``outputs["loss"]``; the first 0-dim tensor of a tuple or list
    (nanoGPT's ``(logits, loss)``).
    """
    import torch

    if isinstance(outputs, torch.Tensor):
        if outputs.dim() == 0:
            return outputs
        raise ValueError(f"the model returned a tensor of shape {tuple(outputs.shape)}, not a "
                         f"loss; without loss_fn the model must compute its own loss")
    loss = getattr(outputs, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(outputs, Mapping) and isinstance(outputs.get("loss"), torch.Tensor):
        return outputs["loss"]
    if isinstance(outputs, (tuple, list)):
        for item in outputs:
            if isinstance(item, torch.Tensor) and item.dim() == 0:
                return item
    raise ValueError(f"cannot find a loss in the model's output ({type(outputs).__name__}); "
                     f"return a scalar loss, an object with .loss, a dict with 'loss', or a "
                     f"tuple holding a 0-dim loss tensor, or give loss_fn")
