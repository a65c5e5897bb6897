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


def _reason(err: BaseException) -> str:
    return str(err).strip() or type(err).__name__


def is_permanent(err: BaseException) -> bool:
    """Whether an NVML error will not change by asking again: a field the GPU or driver
    does not have (``Not Supported``, ``Function Not Found``, bindings without it), or
    is not allowed to read. ``GPU is lost``, timeouts and unknown errors are not: the
    next sample asks again (and shows the reason meanwhile)."""
    if isinstance(err, AttributeError):
        return True
    text = _reason(err).lower()
    return any(k in text for k in ("not supported", "function not found", "no permission",
                                   "insufficient permissions"))


class GpuReader:
    """Reads :data:`TIMELINE_FIELDS` of every GPU; unsupported fields become ``None``.

    A field that fails for good on a GPU is not asked again on that GPU (``Not
    Supported`` does not change), which keeps a sample on a consumer GPU from paying for
    errors 10 times a second; other errors (``GPU is lost`` when a GPU falls off the bus,
    a timeout) are asked again every read. A GPU's reading carries
    ``unavailable_fields`` ({field: NVML's reason}) when a field could not be read and,
    when no field could be read at all, ``error`` (the reason). A GPU whose handle cannot be had (lost before the
    start, hidden by the container's device rules) is left out, with its reason in
    :attr:`missing`, so that one bad GPU does not hide the others.
    ``fields`` picks other :data:`~pitstop.telemetry.nvml.GPU_FIELDS` (the monitor reads
    more than a profile); ``static_fields`` are read once, here, and repeated in every
    reading (a GPU's name, memory size, clock and temperature limits).
    """

    def __init__(self, nv: Any, indices: list[int] | None = None, *,
                 fields: tuple[str, ...] = TIMELINE_FIELDS,
                 static_fields: tuple[str, ...] = ()) -> None:
        self._nv = nv
        count = int(nv.nvmlDeviceGetCount())
        wanted = list(range(count)) if indices is None else indices
        self.missing: dict[int, str] = {}
        self.indices: list[int] = []
        self._handles: list[Any] = []
        for i in wanted:
            try:
                self._handles.append(nv.nvmlDeviceGetHandleByIndex(i))
                self.indices.append(i)
            except Exception as err:
                self.missing[i] = _reason(err)
        self._fields: dict[str, Callable[[Any, Any], Any]] = {
            name: GPU_FIELDS[name] for name in fields}
        #: (GPU index, field) -> reason, for fields that fail for good.
        self.unsupported: dict[tuple[int, str], str] = {}
        self.static: list[dict[str, Any]] = []
        for index, h in zip(self.indices, self._handles, strict=True):
            static: dict[str, Any] = {}
            for name in static_fields:
                try:
                    static[name] = GPU_FIELDS[name](nv, h)
                except Exception as err:  # a limit this board does not report stays unknown
                    static[name] = None
                    self.unsupported[(index, name)] = _reason(err)
            self.static.append(static)
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
            failed: dict[str, str] = {k: r for (i, k), r in self.unsupported.items()
                                      if i == index}
            read_any = False
            for name, getter in self._fields.items():
                if (index, name) in self.unsupported:
                    entry[name] = None
                    continue
                try:
                    entry[name] = getter(self._nv, handle)
                    read_any = True
                except Exception as err:
                    entry[name] = None
                    failed[name] = _reason(err)
                    if is_permanent(err):
                        self.unsupported[(index, name)] = failed[name]
            if failed:  # (only then: profile keeps 10 readings a second)
                entry["unavailable_fields"] = failed
                transient = [r for k, r in failed.items() if (index, k) not in self.unsupported]
                if transient and not read_any:
                    entry["error"] = transient[0]
            gpus.append(entry)
        return {"gpus": gpus}

    @property
    def handles(self) -> list[Any]:
        return list(self._handles)

    def close(self) -> None:
        close_nvml()


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
        lost = "; ".join(f"GPU {i}: {r}" for i, r in reader.missing.items())
        return None, f"NVML cannot open any GPU ({lost})" if lost else "NVML sees no GPU"
    return reader, None


def is_unavailable(value: Any) -> bool:
    return value is None or isinstance(value, Unavailable)
