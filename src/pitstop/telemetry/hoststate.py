"""Host readings a live monitor adds to :mod:`pitstop.telemetry.host`: memory, swap,
``/dev/shm``, load average, and read/write throughput per disk.

Same conventions as ``host``: plain JSON-able values, rates against the previous call
(``None`` on the first), no exception for a missing file (a container without
``/proc/diskstats``, a ``/dev/shm`` that is not mounted).
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from pitstop.telemetry.host import real_disk_counters

__all__ = ["DiskDeviceReader", "LoadReader", "MemoryReader"]


class MemoryReader:
    """RAM, swap and ``/dev/shm`` (where DataLoader workers hand over batches) in bytes."""

    def __init__(self, shm: str = "/dev/shm") -> None:
        self.shm = shm

    def read(self) -> dict[str, Any]:
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        out: dict[str, Any] = {
            "total_bytes": int(vm.total), "used_bytes": int(vm.total - vm.available),
            "available_bytes": int(vm.available),
            "swap_total_bytes": int(sw.total), "swap_used_bytes": int(sw.used),
            "shm_total_bytes": None, "shm_used_bytes": None,
        }
        try:
            st = os.statvfs(self.shm)
            out["shm_total_bytes"] = st.f_blocks * st.f_frsize
            out["shm_used_bytes"] = (st.f_blocks - st.f_bfree) * st.f_frsize
        except OSError:
            pass
        return {"memory": out}


class LoadReader:
    """The kernel's 1, 5 and 15 minute load averages."""

    def read(self) -> dict[str, Any]:
        try:
            return {"load_avg": [round(x, 2) for x in os.getloadavg()]}
        except OSError:
            return {"load_avg": None}


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
