"""What machine a bench result comes from, so results from different machines compare.

Every field is read, never guessed; what cannot be read is ``None`` (or, for the GPU
driver, the reason NVML gave).
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from pitstop.hostinfo.cpu import usable_cpus


def cpu_model(cpuinfo: str | None = None) -> str | None:
    """The CPU's marketing name from ``/proc/cpuinfo`` (``model name``), else platform's guess."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or None


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def _gpus() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    out = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        out.append({"index": index, "name": props.name,
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "capability": f"{props.major}.{props.minor}",
                    "multiprocessors": props.multi_processor_count})
    return out


def _driver() -> dict[str, Any]:
    from pitstop.telemetry.nvml import (
        NvmlUnavailableError,
        nvml_session,
        system_snapshot,
        to_jsonable,
    )

    try:
        with nvml_session() as nv:
            snap = to_jsonable(system_snapshot(nv))
    except NvmlUnavailableError as err:
        return {"driver_version": None, "why_not": str(err)}
    except Exception as err:  # NVML quirks must never stop a benchmark
        return {"driver_version": None, "why_not": f"{type(err).__name__}: {err}"}
    return {"driver_version": snap.get("driver_version"),
            "cuda_driver_version": snap.get("cuda_driver_version")}


def collect_machine() -> dict[str, Any]:
    """The machine record stored in ``--json`` output."""
    import psutil

    flags = cpu_flags()
    usable, _ = usable_cpus()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "cpu_model": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "cpu_usable": usable,
        "cpu_bf16": bool(flags & {"avx512_bf16", "amx_bf16"}),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": _gpus(),
        **_driver(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": cudnn,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "os": _os_release() or platform.platform(),
        "kernel": platform.release(),
        "cxx": shutil.which("g++") or shutil.which("c++") or shutil.which("clang++"),
        "executable": sys.executable,
    }


def _os_release() -> str | None:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def short_description(machine: dict[str, Any]) -> str:
    """``AMD EPYC, 2 CPUs`` / ``NVIDIA H100 80GB HBM3 + AMD EPYC, 16 CPUs``: for titles."""
    cpu = f"{machine.get('cpu_model') or 'unknown CPU'}, {machine.get('cpu_usable')} CPUs"
    gpus = machine.get("gpus") or []
    if gpus:
        names = {g["name"] for g in gpus}
        count = f"{len(gpus)}x " if len(gpus) > 1 else ""
        return f"{count}{' / '.join(sorted(names))} + {cpu}"
    return cpu
