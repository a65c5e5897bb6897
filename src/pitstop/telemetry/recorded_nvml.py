"""A stand-in for the ``pynvml`` module that replays NVML values recorded from real GPUs.

Tests, screenshots and demos need GPU panels, the GPM path and GPU verdicts on
machines without a GPU. :class:`RecordedNvml` answers the same calls as nvidia-ml-py
(``nvmlDeviceGetUtilizationRates``, ``nvmlGpmMetricsGet``, …) from a *value set*: a
JSON file with, per GPU, the fields that do not change (``static``) and a list of
``frames`` of those that do, replayed one frame per ``frame_s`` seconds. Field names are
those of :data:`pitstop.telemetry.nvml.GPU_FIELDS` (the doctor's recorded machines use
the same ones); GPM values are keyed by NVML's metric names without their
``NVML_GPM_METRIC_`` prefix, in NVML's units (percent, MiB/s). A value
``{"unavailable": REASON}`` makes the call raise an NVML-like error with that reason.

Every value set states where its values come from in ``_origin``; the loader refuses
one without it. Process PIDs may be placeholders (``"@train"``) bound at load time to
real processes, so that a test can put a real training process on a recorded GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pitstop.errors import UsageError

__all__ = ["RecordedNvml", "RecordedNvmlError", "load_recorded_nvml"]

MAX_RECORDING_BYTES = 16 << 20  # a value set is a few KiB per GPU

# NVML ABI values of the enums the readers pass (nvml.h; the same in nvidia-ml-py).
NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
NVML_GPM_METRICS_GET_VERSION = 1
_GPM_IDS = {"GRAPHICS_UTIL": 1, "SM_UTIL": 2, "SM_OCCUPANCY": 3, "ANY_TENSOR_UTIL": 5,
            "DRAM_BW_UTIL": 10, "PCIE_TX_PER_SEC": 20, "PCIE_RX_PER_SEC": 21}


class RecordedNvmlError(Exception):
    """What a recorded "not available" value raises (str: NVML's reason text)."""


class _Metrics:
    """The request structure of ``nvmlGpmMetricsGet`` (fields as nvidia-ml-py names them)."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(64)]


class RecordedNvml:
    """A ``pynvml``-compatible object over a loaded value set (see the module docstring)."""

    def __init__(self, value_set: Mapping[str, Any], *, bind: Mapping[str, int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.origin = str(value_set.get("_origin", ""))
        self._set = value_set
        self._gpus: list[Mapping[str, Any]] = list(value_set.get("gpus", []))
        self._frame_s = float(value_set.get("frame_s", 1.0))
        self._bind = dict(bind or {})
        self._clock = clock
        self._t0 = clock()
        for name, value in _GPM_IDS.items():
            setattr(self, f"NVML_GPM_METRIC_{name}", value)
        self._gpm_names = {v: k for k, v in _GPM_IDS.items()}
        for const in ("NVML_TEMPERATURE_GPU", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",
                      "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", "NVML_CLOCK_GRAPHICS",
                      "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_PCIE_UTIL_TX_BYTES",
                      "NVML_PCIE_UTIL_RX_BYTES", "NVML_GPM_METRICS_GET_VERSION"):
            setattr(self, const, globals()[const])
        self.c_nvmlGpmMetricsGet_t = _Metrics

    # ----------------------------------------------------------------- values
    def _frame(self, h: int) -> Mapping[str, Any]:
        frames = self._gpus[h].get("frames") or [{}]
        i = int((self._clock() - self._t0) / self._frame_s) % len(frames)
        return frames[i]

    def _value(self, h: int, name: str) -> Any:
        gpu = self._gpus[h]
        frame = self._frame(h)
        self._check_lost(frame)
        value = frame[name] if name in frame else gpu.get("static", {}).get(name)
        if value is None:
            raise RecordedNvmlError("Not Supported")
        if isinstance(value, dict) and "unavailable" in value:
            raise RecordedNvmlError(str(value["unavailable"]))
        return value

    @staticmethod
    def _check_lost(frame: Mapping[str, Any]) -> None:
        """A frame ``{"_error": "GPU is lost"}`` makes every call on that GPU fail, as on a
        GPU that fell off the bus (Xid 79)."""
        if frame.get("_error"):
            raise RecordedNvmlError(str(frame["_error"]))

    # ----------------------------------------------------------------- system
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._set.get("driver_version", "unknown"))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return int(self._set.get("cuda_driver_version", 0))

    def nvmlSystemGetNVMLVersion(self) -> str:
        return str(self._set.get("nvml_version", "unknown"))

    # ----------------------------------------------------------------- devices
    def nvmlDeviceGetCount(self) -> int:
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self._gpus):
            raise RecordedNvmlError("Invalid Argument")
        refused = self._gpus[index].get("static", {}).get("handle_error")
        if refused:  # e.g. "GPU is lost" at start, "No Permission" behind device rules
            raise RecordedNvmlError(str(refused))
        return index

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        mode = int(self._value(h, "mig_mode")) if "mig_mode" in self._gpus[h].get("static", {}) else 0
        return [mode, mode]

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self._value(h, "name"))

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return str(self._value(h, "uuid"))

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=str(self._value(h, "pci_bus_id")))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        total, used = int(self._value(h, "memory_total_bytes")), int(self._value(h, "memory_used_bytes"))
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=int(self._value(h, "utilization_gpu_pct")),
                               memory=int(self._value(h, "utilization_memory_pct")))

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._value(h, "temperature_c"))

    def nvmlDeviceGetTemperatureThreshold(self, h: int, kind: int) -> int:
        name = ("temperature_slowdown_c" if kind == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
                else "temperature_shutdown_c")
        return int(self._value(h, name))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(float(self._value(h, "power_draw_w")) * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return int(float(self._value(h, "power_limit_w")) * 1000)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return int(float(self._value(h, "power_default_limit_w")) * 1000)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: int) -> list[int]:
        return [0, int(float(self._value(h, "power_max_limit_w")) * 1000)]

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return int(self._value(h, "clock_mem_mhz" if clock == NVML_CLOCK_MEM else "clock_sm_mhz"))

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return int(self._value(h, "clock_mem_max_mhz" if clock == NVML_CLOCK_MEM
                               else "clock_sm_max_mhz"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._value(h, "clocks_event_reasons"))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return int(self._value(h, "pcie_link_gen"))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return int(self._value(h, "pcie_link_gen_max"))

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: int) -> int:
        return int(self._value(h, "pcie_link_gen_device_max"))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return int(self._value(h, "pcie_link_width"))

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return int(self._value(h, "pcie_link_width_max"))

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return int(self._value(h, "pcie_rx_kbps" if counter == NVML_PCIE_UTIL_RX_BYTES
                               else "pcie_tx_kbps"))

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return int(self._value(h, "pcie_replay_counter"))

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return int(bool(self._value(h, "persistence_mode")))

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        on = int(bool(self._value(h, "ecc_mode_current")))
        return [on, on]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(bool(self._value(h, "retired_pages_pending")))

    def nvmlDeviceGetRemappedRows(self, h: int) -> list[int]:
        return list(self._value(h, "remapped_rows"))

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        major, minor = self._value(h, "compute_capability")
        return int(major), int(minor)

    # ----------------------------------------------------------------- processes
    def _pid(self, pid: Any) -> int:
        if isinstance(pid, str):
            if pid not in self._bind:
                raise RecordedNvmlError(f"placeholder pid {pid} is not bound")
            return int(self._bind[pid])
        return int(pid)

    def _procs(self, h: int) -> list[Mapping[str, Any]]:
        self._check_lost(self._frame(h))
        procs = self._frame(h).get("processes")
        if procs is None:
            procs = self._gpus[h].get("static", {}).get("processes", [])
        return [p for p in procs if not isinstance(p.get("pid"), str) or p["pid"] in self._bind]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=self._pid(p["pid"]), usedGpuMemory=p.get("used_memory_bytes"))
                for p in self._procs(h) if p.get("type", "compute") == "compute"]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=self._pid(p["pid"]), usedGpuMemory=p.get("used_memory_bytes"))
                for p in self._procs(h) if p.get("type") == "graphics"]

    def nvmlDeviceGetProcessUtilization(self, h: int, since_us: int) -> list[Any]:
        support = self._gpus[h].get("static", {}).get("process_utilization", True)
        if support is not True:
            raise RecordedNvmlError(str(support.get("unavailable", "Not Supported"))
                                    if isinstance(support, dict) else "Not Supported")
        now_us = int(time.time() * 1e6)
        out = [SimpleNamespace(pid=self._pid(p["pid"]), timeStamp=now_us,
                               smUtil=int(p.get("sm_util", 0)), memUtil=int(p.get("mem_util", 0)),
                               encUtil=0, decUtil=0)
               for p in self._procs(h) if "sm_util" in p]
        if not out or now_us <= since_us:
            raise RecordedNvmlError("Not Found")
        return out

    # ----------------------------------------------------------------- GPM
    def nvmlGpmQueryDeviceSupport(self, h: int) -> Any:
        return SimpleNamespace(version=1, isSupportedDevice=int(
            bool(self._gpus[h].get("static", {}).get("gpm_supported", False))))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        return SimpleNamespace(handle=None, frame=None)

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        pass

    def nvmlGpmSampleGet(self, h: int, sample: Any) -> Any:
        self._check_lost(self._frame(h))
        sample.handle, sample.frame = h, self._frame(h)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        gpm = (request.sample2.frame or {}).get("gpm") or {}
        for i in range(int(request.numMetrics)):
            m = request.metrics[i]
            value = gpm.get(self._gpm_names.get(int(m.metricId), ""))
            m.nvmlReturn, m.value = (0, float(value)) if value is not None else (3, 0.0)
        return request


def load_recorded_nvml(path: str | Path, *, bind: Mapping[str, int] | None = None,
                       clock: Callable[[], float] = time.monotonic) -> RecordedNvml:
    """Read a value set; a missing, malformed or origin-less file is a :class:`UsageError`."""
    from pitstop.schema import BadJSON, parse_json, read_bounded

    p = Path(path)
    try:
        data = parse_json(read_bounded(p, MAX_RECORDING_BYTES))
    except OSError as err:
        raise UsageError(f"{p}: cannot read the NVML recording ({err.strerror or err})") from None
    except BadJSON as err:
        raise UsageError(f"{p}: not a JSON NVML recording ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list) or not data.get("_origin"):
        raise UsageError(f"{p}: an NVML recording needs 'gpus' and '_origin' (where the values "
                         "come from)")
    return RecordedNvml(data, bind=bind, clock=clock)
