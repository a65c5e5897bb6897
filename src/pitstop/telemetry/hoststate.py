"""Host readings a live monitor adds to :mod:`pitstop.telemetry.host`: memory, swap,
``/dev/shm`` and the load average (per-disk throughput is
:class:`pitstop.telemetry.host.DiskDeviceReader`).

Same conventions as ``host``: plain JSON-able values, rates against the previous call
(``None`` on the first), no exception for a missing file (a container without
``/proc/diskstats``, a ``/dev/shm`` that is not mounted).
"""

from __future__ import annotations

import os
from typing import Any

import psutil

__all__ = ["LoadReader", "MemoryReader"]


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
