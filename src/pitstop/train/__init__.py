"""pitstop.train: the fast training loop as a library.

    from pitstop.train import fast_defaults, loader, DevicePrefetcher, TrainStep, Metrics, every

    print(fast_defaults())                       # cudnn autotune + TF32, and what changed
    train = loader(dataset, 256, shuffle=True, device="cuda")   # workers, pinning, prefetch
    step = TrainStep(model, optimizer, precision="auto", accumulate=4)
    metrics = Metrics("cuda")
    log_now = every(50)
    for i, (x, y) in enumerate(DevicePrefetcher(train, "cuda")):   # copy n+1 while n runs
        loss = step(x, y)                        # device tensor: no sync here
        metrics.update("loss", loss, n=len(x))
        if log_now(i):
            print(i, metrics.compute()); metrics.reset()   # the only sync

See docs/train.md.
"""

from pitstop.train import _requires  # noqa: F401  (first: one clear error without torch)
from pitstop.train.defaults import FastDefaults, SettingChange, fast_defaults
from pitstop.train.distributed import end_process_group
from pitstop.train.loader import (
    PitstopDataLoader,
    format_settings,
    loader,
    loader_settings,
    training_threads,
    use_training_threads,
)
from pitstop.train.loader import save_config as save_loader_config
from pitstop.train.metrics import Metrics, MetricSummary, every
from pitstop.train.precision import PrecisionChoice, choose_precision
from pitstop.train.prefetch import DevicePrefetcher, to_device
from pitstop.train.step import TrainStep

__all__ = [
    "DevicePrefetcher",
    "FastDefaults",
    "MetricSummary",
    "Metrics",
    "PitstopDataLoader",
    "PrecisionChoice",
    "SettingChange",
    "TrainStep",
    "choose_precision",
    "end_process_group",
    "every",
    "fast_defaults",
    "format_settings",
    "loader",
    "loader_settings",
    "save_loader_config",
    "to_device",
    "training_threads",
    "use_training_threads",
]
