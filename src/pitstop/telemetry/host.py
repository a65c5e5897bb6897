"""Host readings (psutil): per-core CPU, iowait, disk reads, and a tree of processes.

Each reader is called once per sample and returns plain JSON-able values: rates are
computed against the previous call, so the first call of a reader returns ``None``
for them. Readers never raise for a vanished process or an unreadable ``/proc``
file; the value is left out and :attr:`notes` says why once.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from pitstop.telemetry.procfs import read_children

__all__ = ["CpuReader", "DiskDeviceReader", "DiskReader", "ProcessTreeReader", "real_disk_counters"]

# Block devices that are not storage a dataset lives on.
_VIRTUAL_DISK = re.compile(r"^(loop|ram|zram|sr|fd|md|nbd)\d*")


class CpuReader:
    """Per-core busy percent and the machine's iowait percent since the last call."""

    def __init__(self) -> None:
        self._last_per_core: list[Any] | None = None
        self._last_total: Any | None = None

    @staticmethod
    def _busy_pct(now: Any, before: Any) -> float:
        fields = now._fields
        total = sum(getattr(now, f) - getattr(before, f) for f in fields
                    if f not in ("guest", "guest_nice"))
        idle = (now.idle - before.idle) + (getattr(now, "iowait", 0.0) - getattr(before, "iowait", 0.0))
        return 0.0 if total <= 0 else max(0.0, min(100.0, 100.0 * (total - idle) / total))

    def read(self) -> dict[str, Any]:
        per_core = psutil.cpu_times(percpu=True)
        total = psutil.cpu_times()
        out: dict[str, Any] = {"cpu_pct": None, "cpu_per_core_pct": None, "iowait_pct": None}
        if self._last_per_core is not None and self._last_total is not None:
            out["cpu_per_core_pct"] = [round(self._busy_pct(n, b), 1)
                                       for n, b in zip(per_core, self._last_per_core, strict=False)]
            out["cpu_pct"] = round(self._busy_pct(total, self._last_total), 1)
            span = sum(total) - sum(self._last_total)
            iowait = getattr(total, "iowait", 0.0) - getattr(self._last_total, "iowait", 0.0)
            out["iowait_pct"] = round(100.0 * iowait / span, 1) if span > 0 else 0.0
        self._last_per_core, self._last_total = per_core, total
        return out


def real_disk_counters() -> dict[str, Any]:
    """psutil's per-disk I/O counters of real disks ({} without /proc/diskstats)."""
    try:
        counters = psutil.disk_io_counters(perdisk=True) or {}
    except Exception:  # no /proc/diskstats (some containers)
        return {}
    return {name: c for name, c in counters.items() if not _VIRTUAL_DISK.match(name)}


class DiskDeviceReader:
    """Read and write bytes/s and busy percent of each real disk (loop, ram, md… left out)."""

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None
        self._last_t = 0.0

    def read(self) -> dict[str, Any]:
        now = time.monotonic()
        disks = real_disk_counters()
        out: list[dict[str, Any]] | None = None
        if self._last is not None and now > self._last_t:
            out = []
            dt = now - self._last_t
            for name in sorted(disks):
                c, before = disks[name], self._last.get(name)
                if before is None:
                    continue
                busy = getattr(c, "busy_time", None)
                out.append({
                    "name": name,
                    "read_bps": round(max(0, c.read_bytes - before.read_bytes) / dt),
                    "write_bps": round(max(0, c.write_bytes - before.write_bytes) / dt),
                    "busy_pct": (round(min(100.0, max(0.0, (busy - before.busy_time) / 10.0 / dt)), 1)
                                 if busy is not None else None),
                })
        self._last, self._last_t = disks, now
        return {"disks": out}


class DiskReader:
    """Read throughput (bytes/s) summed over real disks, and the busiest disk's busy percent
    (profile's timeline; the monitor shows :class:`DiskDeviceReader`'s per-disk values)."""

    def __init__(self) -> None:
        self._devices = DiskDeviceReader()

    def read(self) -> dict[str, Any]:
        disks = self._devices.read()["disks"]
        if disks is None:
            return {"disk_read_bps": None, "disk_busy_pct": None, "disk_busiest": None}
        busiest, busy = None, 0.0
        for d in disks:
            if d["busy_pct"] is not None and d["busy_pct"] >= busy:
                busiest, busy = d["name"], d["busy_pct"]
        return {"disk_read_bps": sum(d["read_bps"] for d in disks),
                "disk_busy_pct": round(busy, 1), "disk_busiest": busiest}


@dataclass
class _Tracked:
    proc: psutil.Process
    cpu_s: float | None = None
    read_chars: int | None = None


@dataclass
class ProcessTreeReader:
    """CPU (fraction of one core), RSS, state and read rate of processes and their descendants.

    ``roots`` are the pids to follow (the training process, or ``pitstop``'s child);
    their descendants (DataLoader workers, torchrun's ranks) are found again every
    ``rescan_s`` seconds, because walking ``/proc`` at 10 Hz would cost more than the
    readings themselves, and at once when a tracked process starts a child from its
    main thread (a cheap read of its ``children`` file).
    """

    roots: list[int]
    rescan_s: float = 1.0
    include_roots: bool = True
    _tracked: dict[int, _Tracked] = field(default_factory=dict)
    _last_scan: float = -1e9
    _last_t: float = 0.0

    def _rescan(self) -> None:
        seen: dict[int, psutil.Process] = {}
        for pid in self.roots:
            try:
                root = psutil.Process(pid)
                if self.include_roots:
                    seen[pid] = root
                for child in root.children(recursive=True):
                    seen[child.pid] = child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        for pid in list(self._tracked):
            if pid not in seen:
                del self._tracked[pid]
        for pid, proc in seen.items():
            if pid not in self._tracked:
                self._tracked[pid] = _Tracked(proc)

    def _new_child_started(self) -> bool:
        """Whether a tracked process's main thread has a child not tracked yet.

        One small read per process (``/proc/PID/task/PID/children``) catches DataLoader
        workers and torchrun ranks the moment they start, so that a short profiled
        window or a new epoch's workers do not go unseen until the next full rescan.
        """
        # (a process gone, or a kernel without CONFIG_PROC_CHILDREN, has no children here)
        return any(kid not in self._tracked
                   for pid in list(self._tracked) for kid in read_children(pid))

    def read(self) -> dict[str, Any]:
        now = time.monotonic()
        if now - self._last_scan >= self.rescan_s or self._new_child_started():
            self._rescan()
            self._last_scan = now
        dt = now - self._last_t if self._last_t else 0.0
        self._last_t = now
        procs: dict[str, Any] = {}
        for pid, t in list(self._tracked.items()):
            try:
                with t.proc.oneshot():
                    times = t.proc.cpu_times()
                    cpu_s = times.user + times.system
                    entry: dict[str, Any] = {
                        "ppid": t.proc.ppid(),
                        "rss": t.proc.memory_info().rss,
                        "state": t.proc.status(),
                        "cpu": None,
                        "read_bps": None,
                    }
                    try:
                        rc = int(t.proc.io_counters().read_chars)
                    except (psutil.AccessDenied, AttributeError, NotImplementedError):
                        rc = None
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                del self._tracked[pid]
                continue
            if dt > 0 and t.cpu_s is not None:
                entry["cpu"] = round(max(0.0, cpu_s - t.cpu_s) / dt, 3)
            if dt > 0 and rc is not None and t.read_chars is not None:
                entry["read_bps"] = round(max(0, rc - t.read_chars) / dt)
            t.cpu_s, t.read_chars = cpu_s, rc
            procs[str(pid)] = entry
        return {"procs": procs}
