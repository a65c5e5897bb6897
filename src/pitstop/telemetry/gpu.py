"""GPU readings for timelines: utilisation, memory, power, clocks, PCIe throughput (NVML).

A thin layer over :mod:`pitstop.telemetry.nvml` that reads only the fields that change
over time, cheaply enough for 10 Hz. Without NVML, :func:`open_gpu_reader` returns
``None`` and the reason, so that callers can say what they could not measure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pitstop.telemetry.nvml import (
    GPU_FIELDS,
    NvmlUnavailableError,
    Unavailable,
    close_nvml,
    open_nvml,
)

__all__ = ["TIMELINE_FIELDS", "GpuReader", "open_gpu_reader"]

# Fields worth a timeline; names carry their units.
TIMELINE_FIELDS: tuple[str, ...] = (
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "memory_used_bytes",
    "power_draw_w",
    "clock_sm_mhz",
    "pcie_tx_kbps",
    "pcie_rx_kbps",
)


class GpuReader:
    """Reads :data:`TIMELINE_FIELDS` of every GPU; unsupported fields become ``None``.

    A field that fails once is not asked again (``Not Supported`` does not change),
    which keeps a sample on a consumer GPU from paying for errors 10 times a second.
    ``fields`` picks other :data:`~pitstop.telemetry.nvml.GPU_FIELDS` (the monitor reads
    more than a profile); ``static_fields`` are read once, here, and repeated in every
    reading (a GPU's name, memory size, clock and temperature limits).
    """

    def __init__(self, nv: Any, indices: list[int] | None = None, *,
                 fields: tuple[str, ...] = TIMELINE_FIELDS,
                 static_fields: tuple[str, ...] = ()) -> None:
        self._nv = nv
        count = int(nv.nvmlDeviceGetCount())
        self.indices = list(range(count)) if indices is None else indices
        self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self._fields: dict[str, Callable[[Any, Any], Any]] = {
            name: GPU_FIELDS[name] for name in fields}
        self.static: list[dict[str, Any]] = [
            {name: _static_value(nv, h, name) for name in static_fields} for h in self._handles]
        self.unsupported: dict[str, str] = {}
        self.names = []
        for h in self._handles:
            try:
                name = nv.nvmlDeviceGetName(h)
                self.names.append(name.decode() if isinstance(name, bytes) else str(name))
            except Exception:
                self.names.append("unknown GPU")

    def read(self) -> dict[str, Any]:
        gpus = []
        for index, handle, static in zip(self.indices, self._handles, self.static, strict=False):
            entry: dict[str, Any] = {"index": index, **static}
            for name, getter in self._fields.items():
                if name in self.unsupported:
                    entry[name] = None
                    continue
                try:
                    entry[name] = getter(self._nv, handle)
                except Exception as err:
                    self.unsupported[name] = str(err) or type(err).__name__
                    entry[name] = None
            gpus.append(entry)
        return {"gpus": gpus}

    @property
    def handles(self) -> list[Any]:
        return list(self._handles)

    def close(self) -> None:
        close_nvml()


def _static_value(nv: Any, handle: Any, name: str) -> Any:
    try:
        return GPU_FIELDS[name](nv, handle)
    except Exception:  # an unsupported field stays unknown
        return None


def open_gpu_reader() -> tuple[GpuReader | None, str | None]:
    """A reader of every GPU, or ``(None, reason)`` when NVML or GPUs are missing."""
    try:
        nv = open_nvml()
    except NvmlUnavailableError as err:
        return None, str(err)
    try:
        reader = GpuReader(nv)
    except Exception as err:
        close_nvml()
        return None, f"NVML could not list GPUs: {err}"
    if not reader.indices:
        reader.close()
        return None, "NVML sees no GPU"
    return reader, None


def is_unavailable(value: Any) -> bool:
    return value is None or isinstance(value, Unavailable)
