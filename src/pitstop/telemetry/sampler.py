"""A background thread that takes a sample of the machine 10 times a second.

Used by ``pitstop profile`` (which keeps every sample for the report) and meant for a
live monitor (not built yet: it would pass ``on_sample`` and keep only a window). A sample is
one flat JSON-able dict::

    {"t": <CLOCK_MONOTONIC seconds>, "cpu_pct": .., "cpu_per_core_pct": [..],
     "iowait_pct": .., "disk_read_bps": .., "disk_busy_pct": .., "procs": {pid: {..}},
     "gpus": [{..}]}

Times are ``time.monotonic()``, which on Linux is the same clock in every process, so
samples line up with timestamps taken inside the training processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from pitstop.telemetry.gpu import GpuReader, open_gpu_reader
from pitstop.telemetry.host import CpuReader, DiskReader, ProcessTreeReader

__all__ = ["Reader", "Sampler", "default_readers"]


class Reader(Protocol):
    def read(self) -> dict[str, Any]: ...


def default_readers(root_pids: list[int], *, gpu: bool = True
                    ) -> tuple[list[Reader], dict[str, str]]:
    """Host CPU, disk and process-tree readers (+ NVML when available).

    Returns the readers and ``{what: reason}`` for each thing that cannot be measured.
    """
    readers: list[Reader] = [CpuReader(), DiskReader(), ProcessTreeReader(root_pids)]
    missing: dict[str, str] = {}
    if gpu:
        reader, reason = open_gpu_reader()
        if reader is not None:
            readers.append(reader)
        else:
            missing["gpu"] = reason or "NVML unavailable"
    return readers, missing


class Sampler:
    """Calls every reader each ``interval_s`` on a daemon thread and keeps the samples."""

    def __init__(self, readers: list[Reader], *, interval_s: float = 0.1,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 keep: bool = True) -> None:
        self.readers = readers
        self.interval_s = interval_s
        self.on_sample = on_sample
        self.keep = keep
        self.samples: list[dict[str, Any]] = []
        self.errors: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> dict[str, Any]:
        sample: dict[str, Any] = {"t": time.monotonic()}
        for reader in self.readers:
            try:
                sample.update(reader.read())
            except Exception as err:  # one broken reader must not stop the others
                self.errors.setdefault(type(reader).__name__, f"{type(err).__name__}: {err}")
        return sample

    def _run(self) -> None:
        # start() took a priming sample just now: rates over a few milliseconds of a
        # 10 ms CPU-time tick read as several cores, so the first kept one waits a period.
        next_t = time.monotonic() + self.interval_s
        self._stop.wait(self.interval_s)
        while not self._stop.is_set():
            sample = self.sample_once()
            if self.keep:
                self.samples.append(sample)
            if self.on_sample is not None:
                try:
                    self.on_sample(sample)
                except Exception as err:
                    self.errors.setdefault("on_sample", f"{type(err).__name__}: {err}")
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (a stalled machine): do not try to catch up
                next_t = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def start(self) -> Sampler:
        self.sample_once()  # prime the rate readers, so the first kept sample has rates
        self._thread = threading.Thread(target=self._run, name="pitstop-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.keep and not self.samples:  # ran shorter than one period: one sample over it all
                self.samples.append(self.sample_once())
        for reader in self.readers:
            if isinstance(reader, GpuReader):
                reader.close()
        return self.samples

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
