"""The live feed: sources on their own threads, a snapshot every interval, verdicts over
a sliding window.

:class:`Collector` owns one :class:`~pitstop.telemetry.sources.PolledSource` per source
(CPU and load, memory, disks, processes, NVML, GPM), assembles a snapshot from their
latest readings every ``interval_s`` on its own thread, keeps the last ``window_s``
seconds of snapshots (bounded: nothing else is kept), adds the verdicts and hands the
snapshot to its listeners (the recorder, the exporter). The UI polls :meth:`latest`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from pitstop.monitor.diagnosis import diagnose
from pitstop.monitor.snapshot import build_snapshot
from pitstop.telemetry.gpm import GpmReader
from pitstop.telemetry.gpu import GpuReader
from pitstop.telemetry.gpu_processes import GpuProcessReader
from pitstop.telemetry.host import CpuReader, DiskDeviceReader
from pitstop.telemetry.hoststate import LoadReader, MemoryReader
from pitstop.telemetry.nvml import NvmlUnavailableError, close_nvml, open_nvml
from pitstop.telemetry.processes import ProcessReader
from pitstop.telemetry.sources import PolledSource, Reading

__all__ = ["GPU_FIELDS_LIVE", "GPU_FIELDS_STATIC", "Collector"]

Snapshot = dict[str, Any]

#: NVML fields read every sample, and those read once (names of telemetry.nvml.GPU_FIELDS).
GPU_FIELDS_LIVE: tuple[str, ...] = (
    "utilization_gpu_pct", "utilization_memory_pct", "memory_used_bytes", "power_draw_w",
    "power_limit_w", "temperature_c", "clock_sm_mhz", "clock_mem_mhz", "clocks_event_reasons",
    "pcie_tx_kbps", "pcie_rx_kbps", "pcie_link_gen", "pcie_link_width",
)
GPU_FIELDS_STATIC: tuple[str, ...] = (
    "name", "uuid", "pci_bus_id", "memory_total_bytes", "temperature_slowdown_c",
    "clock_sm_max_mhz", "clock_mem_max_mhz", "pcie_link_gen_max", "pcie_link_width_max",
)


class _Nvml:
    """The GPU side: NVML opened once, shared by the GPU and GPM sources."""

    def __init__(self, nv: Any | None) -> None:
        self.recorded = nv is not None
        self.reason: str | None = None
        self.notes: list[str] = []
        self.gpu: GpuReader | None = None
        self.procs: GpuProcessReader | None = None
        self.gpm: GpmReader | None = None
        try:
            self.nv = nv if nv is not None else open_nvml()
        except NvmlUnavailableError as err:
            self.nv, self.reason = None, f"no GPU panels: {err}"
            return
        try:
            self.gpu = GpuReader(self.nv, fields=GPU_FIELDS_LIVE, static_fields=GPU_FIELDS_STATIC)
        except Exception as err:
            self.reason = f"no GPU panels: NVML could not list GPUs ({err})"
            self.close()
            return
        self.notes = [f"GPU {i} cannot be opened: {why}" for i, why in self.gpu.missing.items()]
        if not self.gpu.indices:
            self.reason = ("no GPU panels: " + "; ".join(self.notes) if self.notes
                           else "no GPU panels: NVML sees no GPU")
            self.gpu = None
            self.close()
            return
        self.procs = GpuProcessReader(self.nv, self.gpu.handles, self.gpu.indices)
        self.gpm = GpmReader(self.nv, self.gpu.handles, self.gpu.indices)

    def read_gpu(self) -> dict[str, Any]:
        assert self.gpu is not None and self.procs is not None
        return {**self.gpu.read(), **self.procs.read()}

    def close(self) -> None:
        if self.gpm is not None:
            self.gpm.close()
        if self.nv is not None and not self.recorded:
            close_nvml()
        self.nv = None


class Collector:
    """See the module docstring. ``nvml``: a pynvml-like object (a recorded value set)
    instead of the real NVML; ``gpu=False`` skips NVML altogether."""

    def __init__(self, *, interval_s: float = 1.0, window_s: float = 30.0,
                 follow: list[int] | None = None, nvml: Any | None = None, gpu: bool = True,
                 rescan_s: float = 2.0) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self._procs = ProcessReader(follow=list(follow or []), rescan_s=rescan_s)
        cpu, load = CpuReader(), LoadReader()
        self.sources: dict[str, PolledSource] = {
            "cpu": PolledSource("cpu", lambda: {**cpu.read(), **load.read()}, interval_s=interval_s),
            "memory": PolledSource("memory", MemoryReader().read, interval_s=interval_s),
            "disks": PolledSource("disks", DiskDeviceReader().read, interval_s=interval_s),
            "processes": PolledSource("processes", self._procs.read, interval_s=interval_s),
        }
        self._nvml: _Nvml | None = None
        self.gpu_unavailable: str | None = "no GPU panels: NVML not asked (--no-gpu)"
        if gpu:
            self._nvml = _Nvml(nvml)
            self.gpu_unavailable = self._nvml.reason
            if self._nvml.gpu is not None and self._nvml.gpm is not None:
                self.sources["gpu"] = PolledSource("gpu", self._nvml.read_gpu, interval_s=interval_s)
                self.sources["gpm"] = PolledSource("gpm", self._nvml.gpm.read, interval_s=interval_s)
        self.window: deque[Snapshot] = deque()
        self._latest: Snapshot | None = None
        self.listeners: list[Callable[[Snapshot], None]] = []
        self.errors: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.count = 0

    # ------------------------------------------------------------------ snapshots
    def _readings(self) -> dict[str, Reading]:
        return {name: s.latest() for name, s in self.sources.items()}

    def _share_gpu_pids(self, readings: dict[str, Reading]) -> None:
        gpu = readings.get("gpu")
        rows = (gpu.value or {}).get("gpu_processes") if gpu is not None else None
        self._procs.gpu_pids = frozenset(r["pid"] for r in rows or [])

    def assemble(self, t: float | None = None) -> Snapshot:
        """A snapshot from the latest readings, with verdicts over the window (``t``:
        the snapshot's time, for simulations of long runs; default now)."""
        readings = self._readings()
        self._share_gpu_pids(readings)
        snap = build_snapshot(readings, interval_s=self.interval_s,
                              gpu_unavailable=self.gpu_unavailable, t=t,
                              notes=self._nvml.notes if self._nvml is not None else None)
        self.window.append(snap)
        while self.window and self.window[0]["t"] < snap["t"] - self.window_s:
            self.window.popleft()
        snap["verdicts"] = diagnose(list(self.window))
        self._latest = snap
        self.count += 1
        return snap

    def latest(self) -> Snapshot | None:
        return self._latest

    def prime(self) -> None:
        """Read every source once in this thread (rates need a previous reading); NVML
        first, so that the process reader already follows the GPU's processes."""
        if "gpu" in self.sources:
            self.sources["gpu"].read_now()
            self._share_gpu_pids(self._readings())
        for name, s in self.sources.items():
            if name != "gpu":
                s.read_now()

    def once(self, wait_s: float | None = None) -> Snapshot:
        """One snapshot without threads: read everything, wait, read again (for rates)."""
        try:
            self.prime()
            time.sleep(self.interval_s if wait_s is None else wait_s)
            self.prime()
            return self.assemble()
        finally:
            self.close()

    # ------------------------------------------------------------------ the thread
    def _emit(self, snap: Snapshot) -> None:
        for fn in list(self.listeners):
            try:
                fn(snap)
            except Exception as err:  # a broken listener must not stop the feed
                self.errors.setdefault(getattr(fn, "__name__", "listener"),
                                       f"{type(err).__name__}: {err}")

    def _run(self) -> None:
        next_t = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            self._emit(self.assemble())
            next_t += self.interval_s
            if next_t < time.monotonic():
                next_t = time.monotonic() + self.interval_s

    def start(self) -> Collector:
        self.prime()
        for s in self.sources.values():
            s.start()
        self._thread = threading.Thread(target=self._run, name="pitstop-collector", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for s in self.sources.values():
            s.request_stop()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval_s + 1)
        self.close()

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every source, waiting at most ``timeout_s`` in all: a source stuck in a
        call (a hung driver) is left to die with the process (its thread is a daemon)."""
        for s in self.sources.values():
            s.request_stop()
        deadline = time.monotonic() + timeout_s
        for s in self.sources.values():
            s.stop(timeout=max(0.0, deadline - time.monotonic()))
        if self._nvml is not None:
            self._nvml.close()
