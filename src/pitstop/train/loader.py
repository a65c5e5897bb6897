"""``loader()``: a DataLoader whose settings are computed for this process on this machine.

Each setting comes from one of four sources, recorded next to its value in
``loader.pitstop_settings`` (and returned by :func:`loader_settings`):

* ``"override"`` — a keyword argument of the call; always wins.
* ``"config file <path>"`` — a loader config (JSON, as written by
  ``save_config``): the path given as ``config=``, else ``$PITSTOP_LOADER_CONFIG``, else
  ``./pitstop-loader.json`` in the working directory.
* ``"computed: <why>"`` — derived from what was measured: the CPUs this process may
  use (affinity mask and cgroup CPU quota) shared among the local ranks
  (``LOCAL_WORLD_SIZE``), the size of one sample, free RAM and free ``/dev/shm``.
* ``"default"`` — PyTorch's own default, kept.

One entry is not a DataLoader argument: ``torch_threads``, the intra-op thread count
for the training process that leaves the workers their cores (CPU training only; see
:func:`training_threads` for when it pays). It is applied only by calling
:func:`use_training_threads`.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torch.utils.data.distributed import DistributedSampler

from pitstop.hostinfo.cpu import usable_cpus
from pitstop.schema import validate
from pitstop.sysroot import Sysroot
from pitstop.train.defaults import SettingChange
from pitstop.train.prefetch import resolve_device

log = logging.getLogger("pitstop.train")

CONFIG_ENV = "PITSTOP_LOADER_CONFIG"
CONFIG_FILENAME = "pitstop-loader.json"

# Settings a loader config file may carry, each with the JSON Schema its value must fit
# (checked by pitstop.schema.validate; the description is what the message says).
CONFIG_SCHEMA: dict[str, dict[str, Any]] = {
    "num_workers": {"type": "integer", "minimum": 0, "maximum": 1024,
                    "description": "an integer >= 0"},
    "prefetch_factor": {"type": ["integer", "null"], "minimum": 1, "maximum": 1024,
                        "description": "an integer >= 1 or null"},
    "pin_memory": {"type": "boolean", "description": "true or false"},
    "persistent_workers": {"type": "boolean", "description": "true or false"},
    "multiprocessing_context": {"enum": ["fork", "spawn", "forkserver"],
                                "description": '"fork", "spawn" or "forkserver"'},
    "drop_last": {"type": "boolean", "description": "true or false"},
}
# The same, as (what the value must be, a check): for callers that test one value.
CONFIG_KEYS: dict[str, tuple[str, Any]] = {
    key: (schema["description"], lambda v, schema=schema: validate(v, schema) is None)
    for key, schema in CONFIG_SCHEMA.items()}
MAX_CONFIG_BYTES = 1 << 20  # a loader config is a few hundred bytes

# Fractions of free memory the batches in flight may take: workers' output batches
# live in /dev/shm (PyTorch shares them through shared memory) and, pinned, in RAM.
SHM_SHARE = 0.5
RAM_SHARE = 0.25
# Aim for this many batches queued across all workers: enough to absorb a slow sample.
TARGET_BATCHES_IN_FLIGHT = 8
MAX_PREFETCH = 8
MAX_WORKERS = 16

Setting = tuple[Any, str]


def local_world_size(environ: Mapping[str, str] | None = None) -> int:
    """Ranks sharing this machine (``LOCAL_WORLD_SIZE`` from torchrun), 1 outside torchrun."""
    env = os.environ if environ is None else environ
    try:
        return max(1, int(env.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


# ---------------------------------------------------------------- sample size

def nbytes_of(obj: Any, _depth: int = 0) -> int | None:
    """Bytes held by a sample (tensors, arrays, bytes, PIL images, nested containers)."""
    if _depth > 16:
        return 0
    if isinstance(obj, torch.Tensor):
        return obj.element_size() * obj.numel()
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return len(obj)
    if isinstance(obj, str):
        return len(obj.encode("utf-8", errors="replace"))
    if isinstance(obj, (int, float, bool)) or obj is None:
        return 8
    nbytes = getattr(obj, "nbytes", None)  # numpy arrays
    if isinstance(nbytes, int):
        return nbytes
    if hasattr(obj, "getbands") and hasattr(obj, "size"):  # PIL images: decoded size
        width, height = obj.size
        return int(width * height * len(obj.getbands()))
    if isinstance(obj, Mapping):
        items: Any = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    elif hasattr(obj, "__dataclass_fields__"):
        items = [getattr(obj, name) for name in obj.__dataclass_fields__]
    else:
        return None
    total = 0
    for item in items:
        size = nbytes_of(item, _depth + 1)
        if size is None:
            return None
        total += size
    return total


def measure_sample_bytes(dataset: Any) -> tuple[int | None, str]:
    """Size of ``dataset[0]`` in bytes, or None and why it could not be measured."""
    if dataset is None:
        return None, "no dataset given"
    if isinstance(dataset, IterableDataset):
        return None, "an IterableDataset cannot be sampled without consuming it"
    try:
        if len(dataset) == 0:
            return None, "the dataset is empty"
        sample = dataset[0]
    except Exception as exc:  # the user's dataset: any error means "not measurable here"
        return None, f"dataset[0] failed: {type(exc).__name__}: {exc}"
    size = nbytes_of(sample)
    if size is None:
        return None, f"cannot size a sample of type {type(sample).__name__}"
    return size, "measured dataset[0]"


# ---------------------------------------------------------------- config file

def find_config(config: str | os.PathLike[str] | Literal[False] | None,
                environ: Mapping[str, str] | None = None,
                cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The loader config to read: ``config``, else ``$PITSTOP_LOADER_CONFIG``, else
    ``./pitstop-loader.json`` if it exists. ``config=False`` disables the search."""
    env = os.environ if environ is None else environ
    if config is False:
        return None
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ValueError(f"loader config {path} does not exist: pass an existing JSON file "
                             f"(e.g. written by pitstop.train.save_loader_config) or config=None")
        return path
    from_env = env.get(CONFIG_ENV)
    if from_env:
        path = Path(from_env)
        if not path.is_file():
            raise ValueError(f"${CONFIG_ENV}={from_env} does not exist: point it at a loader "
                             f"config file or unset it")
        return path
    default = Path(cwd or os.getcwd()) / CONFIG_FILENAME
    return default if default.is_file() else None


def read_config(path: Path) -> dict[str, Any]:
    """The settings in a loader config file, validated.

    The file is a JSON object, either the settings themselves
    (``{"num_workers": 6, "prefetch_factor": 4}``) or, as ``save_config``
    writes it, ``{"settings": {...}, ...}`` with any other top-level keys ignored.
    """
    from pitstop.schema import BadJSON, parse_json, read_bounded

    try:
        data = parse_json(read_bounded(path, MAX_CONFIG_BYTES))
    except OSError as exc:
        raise ValueError(f"loader config {path} cannot be read ({exc}): fix its permissions "
                         f"or pass config=False") from exc
    except BadJSON as exc:
        raise ValueError(f"loader config {path} is not valid JSON ({exc}): fix or delete "
                         f"it") from exc
    if isinstance(data, dict) and isinstance(data.get("settings"), dict):
        data = data["settings"]
    if not isinstance(data, dict):
        raise ValueError(f"loader config {path} must hold a JSON object of settings, like "
                         f'{{"num_workers": 4}}')
    for key, value in data.items():
        _check_setting(key, value, f"loader config {path}: ")
    return dict(data)


def _check_setting(key: str, value: Any, where: str) -> None:
    if key not in CONFIG_SCHEMA:
        raise ValueError(f"{where}unknown setting {key!r}; known settings: "
                         f"{', '.join(CONFIG_SCHEMA)}")
    problem = validate(value, CONFIG_SCHEMA[key], key)
    if problem:
        raise ValueError(f"{where}{problem}")


def save_config(path: str | os.PathLike[str], settings: Mapping[str, Any], *,
                measured: Mapping[str, Any] | None = None) -> Path:
    """Write a loader config that :func:`loader` will read (atomically, validated).

    ``settings`` holds only keys of :data:`CONFIG_KEYS`; ``measured`` is free-form
    evidence kept beside them (a measuring tool stores its evidence there).
    """
    from pitstop.fileio import atomic_write_json

    target = Path(path)
    for key, value in settings.items():
        _check_setting(key, value, "loader config setting ")
    doc: dict[str, Any] = {"pitstop": "loader-config", "version": 1, "settings": dict(settings)}
    if measured is not None:
        doc["measured"] = dict(measured)
    atomic_write_json(target, doc)
    return target


# ---------------------------------------------------------------- the computation

@dataclass(frozen=True)
class MachineFacts:
    """What the computation depends on, gathered once (and replaceable in tests)."""

    cpus: int
    cpus_why: str
    local_world_size: int
    ram_available: int | None
    shm_free: int | None


def gather_machine_facts(sysroot: Sysroot | None = None,
                         environ: Mapping[str, str] | None = None) -> MachineFacts:
    sysroot = sysroot or Sysroot()
    cpus, cpus_why = usable_cpus(sysroot)
    ram: int | None
    if sysroot.is_live:
        ram = int(psutil.virtual_memory().available)
    else:
        ram = _meminfo_available(sysroot.read_text("/proc/meminfo"))
    shm: int | None
    try:
        shm = int(shutil.disk_usage(sysroot.path("/dev/shm")).free)
    except OSError:
        shm = None
    return MachineFacts(cpus, cpus_why, local_world_size(environ), ram, shm)


def _meminfo_available(text: str | None) -> int | None:
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def batch_memory_budget(facts: MachineFacts) -> tuple[float, str] | None:
    """Bytes the batches in flight (workers x prefetch) may take on this rank, and the
    limit that sets it: the smaller of :data:`SHM_SHARE` of free ``/dev/shm`` (workers
    hand batches over through shared memory) and :data:`RAM_SHARE` of available RAM,
    split among the local ranks. None when neither could be read. ``pitstop tune``
    holds its trials to the same bound."""
    budgets: list[tuple[float, str]] = []
    if facts.shm_free is not None:
        budgets.append((facts.shm_free * SHM_SHARE / facts.local_world_size,
                        f"{int(SHM_SHARE * 100)}% of /dev/shm free ({_mib(facts.shm_free)})"))
    if facts.ram_available is not None:
        budgets.append((facts.ram_available * RAM_SHARE / facts.local_world_size,
                        f"{int(RAM_SHARE * 100)}% of available RAM ({_mib(facts.ram_available)})"))
    budget = min(budgets, key=lambda b: b[0]) if budgets else None
    if facts.local_world_size > 1 and budget is not None:
        budget = (budget[0], budget[1] + f" / {facts.local_world_size} local ranks")
    return budget


def compute_settings(facts: MachineFacts, *, device: torch.device, sample_bytes: int | None,
                     sample_why: str, batch_size: int) -> dict[str, Setting]:
    """The computed settings (no config, no overrides): a pure function of the facts."""
    out: dict[str, Setting] = {}
    per_rank = max(1, facts.cpus // facts.local_world_size)
    share = (f"{facts.cpus_why}" if facts.local_world_size == 1 else
             f"{facts.cpus_why}, shared by {facts.local_world_size} local ranks -> {per_rank} each")
    if per_rank < 2:
        workers, why = 0, f"{share}: one CPU, load in the training process itself"
    elif device.type == "cpu":
        # The training computes on the same cores; leave most of them to it.
        workers = max(1, per_rank // 4)
        why = f"{share}; training runs on these CPUs too, so a quarter of them load data"
    else:
        workers = min(MAX_WORKERS, per_rank - 1)
        why = f"{share}; one CPU left for the training process"
        if per_rank - 1 > MAX_WORKERS:
            why += f"; capped at {MAX_WORKERS}"
    batch_bytes = sample_bytes * batch_size if sample_bytes is not None else None
    budget = batch_memory_budget(facts)

    prefetch: int | None = None
    prefetch_why = ""
    if workers > 0:
        prefetch = max(2, min(MAX_PREFETCH, math.ceil(TARGET_BATCHES_IN_FLIGHT / workers)))
        prefetch_why = f"about {TARGET_BATCHES_IN_FLIGHT} batches queued across {workers} worker(s)"
        if batch_bytes is None:
            prefetch_why += f"; memory bound not checked ({sample_why})"
        elif budget is not None and batch_bytes > 0:
            fits = int(budget[0] // batch_bytes)  # batches that fit the budget
            if fits < workers:
                old = workers
                workers = max(0, fits)
                log.warning("pitstop.train.loader: %d worker(s) instead of %d: one batch "
                            "(%s) per worker must fit %s", workers, old, _mib(batch_bytes),
                            budget[1])
                why += (f"; cut from {old}: one batch ({_mib(batch_bytes)}) per worker must fit "
                        f"{budget[1]}")
                if workers == 0:
                    prefetch = None
            if workers > 0:
                max_prefetch = max(1, fits // workers)
                if prefetch is not None and max_prefetch < prefetch:
                    prefetch = max_prefetch
                    prefetch_why += (f"; bounded to {prefetch}: {workers}x{prefetch} batches of "
                                     f"{_mib(batch_bytes)} fit {budget[1]}")
                else:
                    prefetch_why += (f"; {workers}x{prefetch} batches of {_mib(batch_bytes)} "
                                     f"fit {budget[1]}")
    out["num_workers"] = (workers, "computed: " + why)
    if workers > 0:
        out["prefetch_factor"] = (prefetch, "computed: " + prefetch_why)
        out["persistent_workers"] = (True, "computed: workers are kept between epochs instead "
                                           "of re-forked (and the dataset re-pickled) each epoch")
    else:
        out["prefetch_factor"] = (None, "computed: no worker processes")
        out["persistent_workers"] = (False, "computed: no worker processes")
    pin = device.type == "cuda"
    out["pin_memory"] = (pin, "computed: " + (
        "target is CUDA: page-locked batches copy asynchronously (non_blocking)" if pin
        else f"target is {device.type}: nothing to copy to a GPU"))
    out["sample_bytes"] = (sample_bytes, "computed: " + sample_why)
    return out


def loader_settings(dataset: Any, batch_size: int, *, device: str | torch.device = "auto",
                    shuffle: bool = False,
                    config: str | os.PathLike[str] | Literal[False] | None = None,
                    facts: MachineFacts | None = None,
                    **overrides: Any) -> dict[str, Setting]:
    """Every setting :func:`loader` would use, each as ``(value, source)``; builds nothing.

    ``facts`` replaces what is read from the machine (tests, or planning for another
    machine); by default the live machine is measured.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    target = resolve_device(device)
    facts = facts or gather_machine_facts()
    sample_bytes, sample_why = measure_sample_bytes(dataset)
    settings = compute_settings(facts, device=target, sample_bytes=sample_bytes,
                                sample_why=sample_why, batch_size=batch_size)
    settings["batch_size"] = (batch_size, "override")
    settings["shuffle"] = (shuffle, "override")

    path = find_config(config)
    if path is not None:
        for key, value in read_config(path).items():
            settings[key] = (value, f"config file {path}")
    for key, value in overrides.items():
        settings[key] = (value, "override")

    # Options that only exist with worker processes follow the final worker count.
    if settings["num_workers"][0] == 0:
        for key in ("prefetch_factor", "persistent_workers"):
            if settings.get(key, (None,))[0] not in (None, False):
                settings[key] = (None if key == "prefetch_factor" else False,
                                 "computed: num_workers is 0, so no worker options")
    elif settings.get("prefetch_factor", (None,))[0] is None:
        settings["prefetch_factor"] = (2, "default")
    if "torch_threads" not in overrides:
        settings["torch_threads"] = training_threads(int(settings["num_workers"][0]),
                                                     device=target, facts=facts)

    if (dist.is_available() and dist.is_initialized()
            and "sampler" not in overrides and "batch_sampler" not in overrides
            and not isinstance(dataset, IterableDataset)):
        settings["sampler"] = (
            f"DistributedSampler(rank {dist.get_rank()} of {dist.get_world_size()}, "
            f"shuffle={shuffle})",
            "computed: torch.distributed is initialized; each rank reads its own shard")
    return settings


def training_threads(num_workers: int, *, device: str | torch.device = "auto",
                     facts: MachineFacts | None = None) -> Setting:
    """The intra-op thread count the *training process* should use beside ``num_workers``
    loader workers, as ``(value, source)``; ``value`` None means "keep torch's own".

    Only CPU training gets a number: the model then computes on the same cores the
    workers decode on, and torch's default (one thread per CPU) plus the workers
    oversubscribes them. OpenMP threads that wait for a descheduled sibling at every
    parallel region can make that far slower than the lost core alone. Whether the
    cut pays depends on how busy the workers and the machine are:
    ``benchmarks/bench_loader_threads.py`` on 2 CPUs with 1 worker measured the cut at
    2.2-3.7x while other processes competed for the cores, and at 0.77-0.91x on a
    calm machine where the worker idles most of the time, so measure before adopting
    it (``pitstop bench`` does, in rung 1). On a GPU the training process's own CPU
    threads barely matter, so they are left alone. This is a recommendation:
    :func:`loader` never changes global thread counts; :func:`use_training_threads`
    applies it when called.
    """
    target = resolve_device(device)
    if target.type != "cpu":
        return None, f"computed: training on {target.type}: torch's own thread count is kept"
    facts = facts or gather_machine_facts()
    per_rank = max(1, facts.cpus // facts.local_world_size)
    if num_workers <= 0:
        return None, "computed: no worker processes share the CPUs: torch's own thread count is kept"
    threads = max(1, per_rank - num_workers)
    return threads, (f"computed: {per_rank} CPU(s) for this rank minus {num_workers} loader "
                     f"worker(s); more intra-op threads would oversubscribe the cores")


def use_training_threads(dl: DataLoader[Any]) -> SettingChange:
    """Set torch's intra-op threads to what ``dl.pitstop_settings["torch_threads"]``
    recommends (CPU training with worker processes); otherwise change nothing.

    Call it once, after building the loader, in the training process::

        train = loader(dataset, 32, shuffle=True, device="cpu")
        print(use_training_threads(train))   # e.g. torch threads 2 -> 1

    Returns what was done, printable, like the entries of :func:`fast_defaults`'s record.
    """
    settings = getattr(dl, "pitstop_settings", None)
    before = torch.get_num_threads()
    if not isinstance(settings, dict) or "torch_threads" not in settings:
        return SettingChange("torch.set_num_threads", before, before,
                             "not a pitstop loader: no recommendation to apply")
    value, why = settings["torch_threads"]
    if value is None or int(value) == before:
        return SettingChange("torch.set_num_threads", before, before, why)
    torch.set_num_threads(int(value))
    return SettingChange("torch.set_num_threads", int(value), before, why)


def format_settings(settings: Mapping[str, Setting]) -> str:
    """One line per setting: ``name = value  [source]``."""
    width = max((len(k) for k in settings), default=0)
    return "\n".join(f"{k:<{width}} = {v!r}  [{src}]" for k, (v, src) in settings.items())


# ---------------------------------------------------------------- the loader

class PitstopDataLoader(DataLoader):
    """A DataLoader that records where its settings came from and keeps a
    ``DistributedSampler``'s epoch moving on its own.

    Without ``set_epoch`` every epoch of a DistributedSampler shuffles the same way.
    This loader calls it with 0, 1, 2, ... at each new iteration unless the user calls
    :meth:`set_epoch` (then the user's numbering is used).
    """

    pitstop_settings: dict[str, Setting]

    def __init__(self, *args: Any, pitstop_settings: dict[str, Setting], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pitstop_settings = pitstop_settings
        self._pitstop_epoch = 0
        self._pitstop_user_epochs = False

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next iteration's shuffle (DistributedSampler only)."""
        self._pitstop_user_epochs = True
        self._pitstop_epoch = epoch

    def __iter__(self) -> Any:
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(self._pitstop_epoch)
            if not self._pitstop_user_epochs:
                self._pitstop_epoch += 1
        return super().__iter__()

    def describe(self) -> str:
        """The settings and their sources, one per line."""
        return format_settings(self.pitstop_settings)


_NOT_LOADER_KWARGS = ("sample_bytes", "torch_threads", "batch_size", "shuffle", "sampler")


def loader(dataset: Dataset[Any], batch_size: int, *, shuffle: bool,
           device: str | torch.device = "auto",
           config: str | os.PathLike[str] | Literal[False] | None = None,
           **overrides: Any) -> PitstopDataLoader:
    """A DataLoader with settings computed for this machine, this process and ``device``.

    Args:
        dataset: a map-style or iterable dataset. ``dataset[0]`` is read once to
            measure the size of a sample (which bounds the prefetch depth).
        batch_size: samples per batch (per rank under torch.distributed).
        shuffle: shuffle each epoch (through the DistributedSampler when distributed).
        device: where the batches will go; ``"cuda"`` turns on ``pin_memory``.
        config: a loader config JSON file; default: ``$PITSTOP_LOADER_CONFIG`` or
            ``./pitstop-loader.json`` if present; ``False`` to read none.
        **overrides: any ``DataLoader`` keyword (``num_workers=``, ``collate_fn=`` ...);
            these win over the config file and the computed values.

    The returned loader's ``pitstop_settings`` maps each setting to ``(value, source)``;
    ``print(loader.describe())`` shows them.
    """
    if shuffle and isinstance(dataset, IterableDataset):
        raise ValueError("shuffle=True with an IterableDataset: such a dataset yields samples in "
                         "its own order; pass shuffle=False and shuffle inside the dataset")
    settings = loader_settings(dataset, batch_size, device=device, shuffle=shuffle,
                               config=config, **overrides)
    kwargs: dict[str, Any] = {k: v for k, (v, _src) in settings.items()
                              if k not in _NOT_LOADER_KWARGS}
    sampler_setting = settings.get("sampler")
    if sampler_setting is not None and sampler_setting[1].startswith("computed"):
        kwargs["sampler"] = DistributedSampler(dataset, shuffle=shuffle,
                                               drop_last=bool(kwargs.get("drop_last", False)))
    elif "sampler" in overrides:
        kwargs["sampler"] = overrides["sampler"]
    if "batch_sampler" in overrides:
        # A batch sampler decides batch size, order and dropping by itself.
        kwargs.pop("drop_last", None)
        return PitstopDataLoader(dataset, pitstop_settings=settings, **kwargs)
    # With a sampler (or an iterable dataset) the order is not the DataLoader's to choose.
    ordered_elsewhere = kwargs.get("sampler") is not None or isinstance(dataset, IterableDataset)
    return PitstopDataLoader(dataset, batch_size=batch_size,
                             shuffle=None if ordered_elsewhere else shuffle,
                             pitstop_settings=settings, **kwargs)
