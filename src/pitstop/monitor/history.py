"""Bounded per-metric histories for sparklines, filled from snapshots (nothing else kept).

A key names one series: ``("gpu", 0, "utilization_gpu_pct")``, ``("cpu", "busy_pct")``,
``("disk", "nvme0n1", "read_bps")``, ``("mem", "used_bytes")``. Each series keeps the
last ``maxlen`` values, so an hour-long session costs the same memory as a minute.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["GPM_KEYS", "GPU_KEYS", "History"]

GPU_KEYS = ("utilization_gpu_pct", "memory_used_bytes", "power_draw_w", "temperature_c",
            "clock_sm_mhz", "pcie_rx_kbps", "pcie_tx_kbps")
GPM_KEYS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_util_pct",
            "pcie_rx_bps", "pcie_tx_bps")


class History:
    """``push(snapshot)`` each sample; ``series(key)`` for a sparkline."""

    def __init__(self, maxlen: int = 240) -> None:
        self.maxlen = maxlen
        self._series: dict[tuple[Any, ...], deque[float | None]] = {}
        self.last_t: float | None = None

    def _add(self, key: tuple[Any, ...], value: Any) -> None:
        d = self._series.get(key)
        if d is None:
            if len(self._series) > 4096:  # a machine whose disks/GPUs keep changing names
                return
            d = self._series[key] = deque(maxlen=self.maxlen)
        d.append(float(value) if isinstance(value, (int, float)) else None)

    def push(self, snap: dict[str, Any]) -> None:
        if snap.get("t") == self.last_t:
            return
        self.last_t = snap.get("t")
        cpu = snap.get("cpu") or {}
        self._add(("cpu", "busy_pct"), cpu.get("busy_pct"))
        self._add(("cpu", "iowait_pct"), cpu.get("iowait_pct"))
        mem = snap.get("memory") or {}
        for k in ("used_bytes", "swap_used_bytes", "shm_used_bytes"):
            self._add(("mem", k), mem.get(k))
        for d in snap.get("disks") or []:
            self._add(("disk", d["name"], "read_bps"), d.get("read_bps"))
            self._add(("disk", d["name"], "write_bps"), d.get("write_bps"))
        for g in snap.get("gpus") or []:
            for k in GPU_KEYS:
                self._add(("gpu", g["index"], k), g.get(k))
            gpm = g.get("gpm") or {}
            for k in GPM_KEYS:
                self._add(("gpu", g["index"], k), gpm.get(k))

    def series(self, key: tuple[Any, ...]) -> list[float | None]:
        return list(self._series.get(key, ()))

    def __len__(self) -> int:
        return sum(len(d) for d in self._series.values())
