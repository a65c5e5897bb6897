"""Which processes use each GPU: memory (compute and graphics contexts) and, where
NVML keeps them, per-process SM and memory-controller utilisation samples.

``nvmlDeviceGetProcessUtilization`` returns the samples taken since a timestamp; the
reader keeps the newest timestamp per GPU, so each call sees only new samples. A GPU
that does not keep them (many consumer boards, MIG) answers ``Not Supported`` once and
is not asked again; ``Not Found`` means no sample since the last call, not an error.

NVML reports the PIDs of the host's PID namespace. Inside a container with its own
PID namespace those PIDs are not this process's; the monitor says so rather than
pairing them with the wrong process.
"""

from __future__ import annotations

from typing import Any

from pitstop.telemetry.nvml import running_processes

__all__ = ["GpuProcessReader"]

def _is_not_found(err: BaseException) -> bool:
    return "not found" in str(err).lower()


class GpuProcessReader:
    """Processes on each GPU in ``handles``; see the module docstring."""

    def __init__(self, nv: Any, handles: list[Any], indices: list[int]) -> None:
        self._nv = nv
        self._handles = handles
        self.indices = indices
        self._since = dict.fromkeys(indices, 0)
        self.util_unsupported: dict[int, str] = {}

    def _utilisation(self, index: int, handle: Any) -> dict[int, tuple[int, int]]:
        if index in self.util_unsupported:
            return {}
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(handle, self._since[index])
        except Exception as err:
            if not _is_not_found(err):
                self.util_unsupported[index] = str(err).strip() or type(err).__name__
            return {}
        latest: dict[int, tuple[int, int, int]] = {}
        for s in samples:
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
        return {"gpu_processes": rows}
