"""Facts about the machine that the settings need: GPUs and tools.

Mounts, block devices, ``/proc/meminfo`` and container detection are read by
:mod:`pitstop.hostinfo`, the same code the doctor uses.

Everything is read through a :class:`~pitstop.sysroot.Sysroot`, so a fake tree under
``--sysroot DIR`` is a complete stand-in for a machine, including two things that are
not files on a real machine:

- **GPUs.** On the live machine they are read through NVML
  (:mod:`pitstop.telemetry.nvml`). A fake tree has no driver, so its GPUs are the
  recorded NVML values in ``DIR/pitstop-recorded/nvml.json`` — the doctor's recording
  (``{"gpus": [{...}, ...], ...}``, the field names of
  :data:`pitstop.telemetry.nvml.GPU_FIELDS`). No recording: no GPU.
- **Tools** (``nvidia-smi``, ``mount``). On the live machine they are found on
  ``$PATH``; under a fake tree only inside it (``DIR/usr/bin``, ``DIR/usr/sbin``,
  ``DIR/bin``, ``DIR/sbin``). So a test can never run the real ``nvidia-smi`` against a
  real GPU by accident: a fake tree without a fake tool simply lacks the tool.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from pitstop.hostinfo.recorded import RECORDED_DIR, read_recording
from pitstop.sysroot import Sysroot

__all__ = [
    "GpuState",
    "find_tool",
    "read_gpus",
]

TOOL_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

# How to install each external tool on Debian / Ubuntu.
INSTALL_HINTS = {
    "cpupower": "apt install linux-cpupower",
    "nvidia-smi": "apt install nvidia-smi (Debian) or apt install nvidia-utils-<driver> (Ubuntu)",
    "mount": "apt install mount",
}


def find_tool(sr: Sysroot, name: str) -> str | None:
    """The path (a real one, to execute) of tool ``name`` on this machine, or ``None``."""
    if sr.is_live:
        return shutil.which(name)
    for d in TOOL_DIRS:
        candidate = sr.path(f"{d}/{name}")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@dataclass(frozen=True)
class GpuState:
    """What the GPU settings need to know about one GPU; ``None`` where NVML cannot say."""

    index: int
    name: str
    bus_id: str
    persistence: bool | None
    power_limit_w: float | None
    power_default_limit_w: float | None
    power_max_limit_w: float | None


GPU_SETTING_FIELDS = ("name", "pci_bus_id", "persistence_mode", "power_limit_w",
                      "power_default_limit_w", "power_max_limit_w")
RECORDED_NVML = f"{RECORDED_DIR}/nvml.json"


def _gpu_from_snapshot(snap: dict[str, Any]) -> GpuState:
    def num(key: str) -> float | None:
        v = snap.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    pm = snap.get("persistence_mode")
    return GpuState(
        index=int(snap.get("index", 0)),
        name=str(snap.get("name")) if isinstance(snap.get("name"), str) else "GPU",
        bus_id=str(snap.get("pci_bus_id")) if isinstance(snap.get("pci_bus_id"), str) else "",
        persistence=pm if isinstance(pm, bool) else None,
        power_limit_w=num("power_limit_w"),
        power_default_limit_w=num("power_default_limit_w"),
        power_max_limit_w=num("power_max_limit_w"),
    )


def read_gpus(sr: Sysroot) -> tuple[list[GpuState], str]:
    """The GPUs and, when there are none to show, why (``([], reason)``)."""
    if not sr.is_live:
        try:
            doc = read_recording(sr, "nvml")
        except ValueError as err:
            return [], f"unreadable {RECORDED_NVML}: {err}"
        if doc is None:
            return [], f"no NVIDIA GPU in this tree (no {RECORDED_NVML})"
        gpus = [_gpu_from_snapshot(g) for g in doc.get("gpus", []) if isinstance(g, dict)]
        return gpus, "" if gpus else f"no GPU listed in {RECORDED_NVML}"
    from pitstop.telemetry.nvml import GPU_FIELDS, NvmlUnavailableError, gpu_snapshot, nvml_session

    fields = {k: GPU_FIELDS[k] for k in GPU_SETTING_FIELDS}
    try:
        with nvml_session() as nv:
            count = int(nv.nvmlDeviceGetCount())
            gpus = [_gpu_from_snapshot(gpu_snapshot(nv, i, fields)) for i in range(count)]
    except NvmlUnavailableError as err:
        return [], f"NVML unavailable: {err}"
    except Exception as err:  # a broken driver must not crash `pitstop system show`
        return [], f"NVML error: {err}"
    return gpus, "" if gpus else "NVML reports no GPU"
