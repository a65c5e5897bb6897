"""NVML queries that answer "not available" instead of raising.

Every value comes from NVML through the official ``nvidia-ml-py`` bindings (never by
parsing ``nvidia-smi`` text). NVML is optional: without the library, without a driver,
or for a field a GPU does not support, the answer is an :class:`Unavailable` carrying
the reason, so that doctor can say "could not check: <reason>" and the sampler can
leave a gap in a timeline.

Used by ``pitstop doctor`` (one snapshot), and by the samplers of ``pitstop profile``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GPU_FIELDS",
    "Unavailable",
    "gpu_snapshot",
    "nvml_session",
    "open_nvml",
    "running_processes",
]


@dataclass(frozen=True)
class Unavailable:
    """A value NVML could not give, and why (e.g. ``"Not Supported"``, ``"no NVML library"``)."""

    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"unavailable": self.reason}


class NvmlUnavailableError(RuntimeError):
    """NVML cannot be used at all on this machine; the message says why."""


_lock = threading.Lock()
_refcount = 0


def _error_text(err: BaseException) -> str:
    text = str(err).strip()
    return text or type(err).__name__


def open_nvml() -> Any:
    """Initialise NVML (reference-counted) and return the ``pynvml`` module.

    Raises :class:`NvmlUnavailableError` with a readable reason when the bindings,
    the library or the driver are missing.
    """
    global _refcount
    try:
        import pynvml
    except ImportError as err:  # the nvidia-ml-py package itself is missing
        raise NvmlUnavailableError(f"nvidia-ml-py is not installed ({err})") from None
    with _lock:
        if _refcount == 0:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError_LibraryNotFound:
                raise NvmlUnavailableError(
                    "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
                ) from None
            except pynvml.NVMLError_DriverNotLoaded:
                raise NvmlUnavailableError("the NVIDIA kernel driver is not loaded") from None
            except pynvml.NVMLError as err:
                raise NvmlUnavailableError(f"nvmlInit failed: {_error_text(err)}") from None
            except OSError as err:
                raise NvmlUnavailableError(f"cannot load NVML: {err}") from None
        _refcount += 1
    return pynvml


def close_nvml() -> None:
    """Release one reference taken by :func:`open_nvml`."""
    global _refcount
    import pynvml

    with _lock:
        if _refcount == 0:
            return
        _refcount -= 1
        if _refcount == 0:
            with suppress(pynvml.NVMLError):
                pynvml.nvmlShutdown()


@contextmanager
def nvml_session() -> Iterator[Any]:
    """``with nvml_session() as nv:`` — NVML initialised for the block; raises
    :class:`NvmlUnavailableError` if it cannot be."""
    nv = open_nvml()
    try:
        yield nv
    finally:
        close_nvml()


def _safe(fn: Callable[[], Any]) -> Any:
    """Call an NVML getter; map every NVML error to :class:`Unavailable`."""
    try:
        return fn()
    except Exception as err:  # NVMLError subclasses, and AttributeError on old bindings
        return Unavailable(_error_text(err))


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


#: NVML's "not available" for usedGpuMemory (Windows WDDM, some vGPUs).
NO_MEMORY = 2**63


def running_processes(nv: Any, handle: Any) -> dict[int, tuple[int | None, str]]:
    """``{pid: (GPU memory bytes or None, "compute" | "graphics")}`` of one GPU's
    processes (a process with both kinds of context is listed once, as compute)."""
    procs: dict[int, tuple[int | None, str]] = {}
    for getter, kind in (
        ("nvmlDeviceGetComputeRunningProcesses", "compute"),
        ("nvmlDeviceGetGraphicsRunningProcesses", "graphics"),
    ):
        try:
            found = getattr(nv, getter)(handle)
        except Exception:
            continue
        for p in found:
            used = getattr(p, "usedGpuMemory", None)
            used = None if used is None or used >= NO_MEMORY else int(used)
            pid = int(p.pid)
            if pid not in procs or procs[pid][0] is None:
                procs[pid] = (used, procs[pid][1] if pid in procs else kind)
    return procs


def _processes(nv: Any, handle: Any) -> list[dict[str, Any]]:
    return [{"pid": pid, "used_memory_bytes": used, "type": kind, "name": _process_name(pid)}
            for pid, (used, kind) in sorted(running_processes(nv, handle).items())]


def _process_name(pid: int) -> str | None:
    try:
        import psutil

        return " ".join(psutil.Process(pid).cmdline()[:3]) or psutil.Process(pid).name()
    except Exception:
        # In a container the PID may belong to another PID namespace: NVML sees the
        # host's PIDs, we cannot name them.
        return None


def _pair(fn_a: Callable[[], Any], fn_b: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: [fn_a(), fn_b()]


# Field name -> how to read it from (pynvml module, device handle). Names carry units.
GPU_FIELDS: dict[str, Callable[[Any, Any], Any]] = {
    "name": lambda nv, h: _text(nv.nvmlDeviceGetName(h)),
    "uuid": lambda nv, h: _text(nv.nvmlDeviceGetUUID(h)),
    "pci_bus_id": lambda nv, h: _text(nv.nvmlDeviceGetPciInfo(h).busId).lower(),
    "memory_total_bytes": lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).total),
    "memory_used_bytes": lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).used),
    "utilization_gpu_pct": lambda nv, h: int(nv.nvmlDeviceGetUtilizationRates(h).gpu),
    "utilization_memory_pct": lambda nv, h: int(nv.nvmlDeviceGetUtilizationRates(h).memory),
    "temperature_c": lambda nv, h: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
    "temperature_slowdown_c": lambda nv, h: int(
        nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
    "temperature_shutdown_c": lambda nv, h: int(
        nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)),
    "power_draw_w": lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
    "power_limit_w": lambda nv, h: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
    "power_default_limit_w": lambda nv, h: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0,
    "power_max_limit_w": lambda nv, h: nv.nvmlDeviceGetPowerManagementLimitConstraints(h)[1] / 1000.0,
    "clock_sm_mhz": lambda nv, h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
    "clock_sm_max_mhz": lambda nv, h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
    "clock_mem_mhz": lambda nv, h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
    "clock_mem_max_mhz": lambda nv, h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
    # nvidia-ml-py before 12.535 names it "throttle reasons" (the same NVML call).
    "clocks_event_reasons": lambda nv, h: int(
        (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
         or nv.nvmlDeviceGetCurrentClocksThrottleReasons)(h)),
    "pcie_link_gen": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    "pcie_link_gen_max": lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
    "pcie_link_gen_device_max": lambda nv, h: int(nv.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
    "pcie_link_width": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
    "pcie_link_width_max": lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    "pcie_tx_kbps": lambda nv, h: int(
        nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)),
    "pcie_rx_kbps": lambda nv, h: int(
        nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)),
    "pcie_replay_counter": lambda nv, h: int(nv.nvmlDeviceGetPcieReplayCounter(h)),
    "persistence_mode": lambda nv, h: bool(nv.nvmlDeviceGetPersistenceMode(h)),
    "ecc_mode_current": lambda nv, h: bool(nv.nvmlDeviceGetEccMode(h)[0]),
    "retired_pages_pending": lambda nv, h: bool(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
    "remapped_rows": lambda nv, h: list(nv.nvmlDeviceGetRemappedRows(h)),
    "compute_capability": lambda nv, h: list(nv.nvmlDeviceGetCudaComputeCapability(h)),
}


def gpu_snapshot(nv: Any, index: int, fields: dict[str, Callable[[Any, Any], Any]] | None = None
                 ) -> dict[str, Any]:
    """Read every field of GPU ``index``; unsupported ones become :class:`Unavailable`."""
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    out: dict[str, Any] = {"index": index}
    for name, getter in (fields or GPU_FIELDS).items():
        out[name] = _safe(lambda g=getter: g(nv, handle))  # type: ignore[misc]
    out["processes"] = _safe(lambda: _processes(nv, handle))
    return out


def system_snapshot(nv: Any) -> dict[str, Any]:
    """Driver-level values: driver version, the CUDA version the driver supports, GPU count."""
    cuda = _safe(lambda: int(nv.nvmlSystemGetCudaDriverVersion_v2()))
    return {
        "driver_version": _safe(lambda: _text(nv.nvmlSystemGetDriverVersion())),
        "cuda_driver_version": (
            f"{cuda // 1000}.{(cuda % 1000) // 10}" if isinstance(cuda, int) else cuda
        ),
        "nvml_version": _safe(lambda: _text(nv.nvmlSystemGetNVMLVersion())),
        "device_count": _safe(lambda: int(nv.nvmlDeviceGetCount())),
    }


def to_jsonable(value: Any) -> Any:
    """Replace :class:`Unavailable` values (at any depth) by ``{"unavailable": reason}``."""
    if isinstance(value, Unavailable):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
