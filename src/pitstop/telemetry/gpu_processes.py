"""Which processes use each GPU: memory (compute and graphics contexts) and, where
NVML keeps them, per-process SM and memory-controller utilisation samples.

``nvmlDeviceGetProcessesUtilizationInfo`` (driver 550+) or, where it is missing or
refused, the older ``nvmlDeviceGetProcessUtilization`` return the samples taken since a
timestamp; the reader keeps the newest timestamp per GPU, so each call sees only new
samples. A GPU that does not keep them (MIG, some boards and drivers) answers ``Not
Supported`` once and is not asked again (the reason is in the reading); ``Not Found``
means no sample since the last call, not an error.

NVML reports the PIDs of the host's PID namespace. Inside a container with its own
PID namespace those PIDs are not this process's; the monitor says so rather than
pairing them with the wrong process.
"""

from __future__ import annotations

from typing import Any

from pitstop.telemetry.gpu import is_permanent
from pitstop.telemetry.nvml import running_processes

__all__ = ["GpuProcessReader"]

# The newer call first (driver 550+; some Blackwell drivers answer only it), then the
# older one; both return samples with timeStamp, pid, smUtil and memUtil.
UTILISATION_CALLS = ("nvmlDeviceGetProcessesUtilizationInfo", "nvmlDeviceGetProcessUtilization")


def _no_samples(err: BaseException) -> bool:
    """``Not Found``: no sample since the timestamp asked for. nvidia-ml-py also raises
    ``NVMLError(NVML_SUCCESS)`` when the size query finds nothing to size."""
    return "not found" in str(err).lower() or getattr(err, "value", None) == 0


class GpuProcessReader:
    """Processes on each GPU in ``handles``; see the module docstring."""

    def __init__(self, nv: Any, handles: list[Any], indices: list[int]) -> None:
        self._nv = nv
        self._handles = handles
        self.indices = indices
        self._since = dict.fromkeys(indices, 0)
        self._call: dict[int, str] = {}  # the utilisation call that answered, per GPU
        self.util_unsupported: dict[int, str] = {}

    def _samples(self, index: int, handle: Any) -> list[Any]:
        calls = [self._call[index]] if index in self._call else list(UTILISATION_CALLS)
        refusals = []
        for call in calls:
            fn = getattr(self._nv, call, None)
            if fn is None:  # older bindings
                continue
            try:
                samples = list(fn(handle, self._since[index]))
            except Exception as err:
                if _no_samples(err):
                    self._call.setdefault(index, call)
                    return []
                if is_permanent(err):
                    refusals.append(str(err).strip() or type(err).__name__)
                    continue
                return []  # GPU lost, a timeout: ask again next time
            self._call[index] = call
            return samples
        self.util_unsupported[index] = (refusals[0] if refusals
                                        else "nvidia-ml-py has no per-process utilisation call")
        return []

    def _utilisation(self, index: int, handle: Any) -> dict[int, tuple[int, int]]:
        if index in self.util_unsupported:
            return {}
        latest: dict[int, tuple[int, int, int]] = {}
        for s in self._samples(index, handle):
            ts = int(s.timeStamp)
            self._since[index] = max(self._since[index], ts)
            if ts >= latest.get(int(s.pid), (-1, 0, 0))[0]:
                latest[int(s.pid)] = (ts, int(s.smUtil), int(s.memUtil))
        return {pid: (sm, mem) for pid, (_, sm, mem) in latest.items()}

    def read(self) -> dict[str, Any]:
        rows = []
        for index, handle in zip(self.indices, self._handles, strict=False):
            util = self._utilisation(index, handle)
            for pid, (mem, _) in sorted(running_processes(self._nv, handle).items()):
                sm, mu = util.get(pid, (None, None))
                rows.append({"gpu": index, "pid": pid, "memory_bytes": mem,
                             "sm_util_pct": sm, "mem_util_pct": mu})
        return {"gpu_processes": rows, "process_util_unavailable": dict(self.util_unsupported)}
