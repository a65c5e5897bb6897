"""Shared views of the GPU facts: which NVIDIA GPUs exist, and their NVML snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pitstop.doctor.checks.base import CannotCheck, Facts, NotApplicable, Outcome
from pitstop.doctor.checks.gpu_access import in_use


def pci_gpus(facts: Facts) -> list[dict[str, Any]] | None:
    """NVIDIA display devices on the PCI bus, or ``None`` when the PCI probe failed."""
    pci = facts.get("pci") or {}
    if "nvidia_gpus" not in pci:
        return None
    return list(pci["nvidia_gpus"])


def nvml_ok(facts: Facts) -> bool:
    return bool((facts.get("nvml") or {}).get("available"))


def nvml_gpus(facts: Facts) -> list[dict[str, Any]]:
    """NVML snapshots of every GPU; NotApplicable without any NVIDIA GPU, CannotCheck
    when there is one but NVML cannot be used."""
    nvml = facts.get("nvml") or {}
    pci = pci_gpus(facts)
    if nvml.get("available"):
        gpus = list(nvml.get("gpus") or [])
        if gpus:
            return gpus
    if pci == []:
        raise NotApplicable("no NVIDIA GPU on the PCI bus")
    reason = nvml.get("reason") or nvml.get("error") or "no GPU reported by NVML"
    if pci is None:
        raise CannotCheck(f"NVML: {reason}; PCI bus: {(facts.get('pci') or {}).get('error')}")
    raise CannotCheck(f"NVML unavailable: {reason}")


def driver_version(facts: Facts) -> str | None:
    """The NVIDIA driver version from NVML, else from /proc/driver/nvidia/version."""
    system = (facts.get("nvml") or {}).get("system") or {}
    v = system.get("driver_version")
    if isinstance(v, str):
        return v
    mods = facts.get("kernel_modules") or {}
    pv = mods.get("proc_driver_version")
    return pv if isinstance(pv, str) else None


def subject(gpu: dict[str, Any]) -> str:
    name = gpu.get("name")
    return f"GPU {gpu.get('index', '?')}" + (f" ({name})" if isinstance(name, str) else "")


def busy(gpu: dict[str, Any]) -> bool | None:
    """Whether the GPU is working right now (utilisation >= 20 %), ``None`` if unknown."""
    util = gpu.get("utilization_gpu_pct")
    return util >= 20 if isinstance(util, (int, float)) else None


def per_gpu(facts: Facts, fn: Callable[[dict[str, Any]], Outcome]) -> list[Outcome]:
    """Run ``fn`` for each GPU this process's CUDA will use (all of them unless
    ``CUDA_VISIBLE_DEVICES`` picks some: another job's GPU on a shared node is not this
    run's problem); one GPU lacking a value gives that GPU an ``unknown``."""
    out = []
    for gpu in in_use(facts, nvml_gpus(facts)):
        if "error" in gpu:
            reason = f"NVML cannot read this GPU: {gpu['error']}"
            out.append(Outcome("unknown", f"could not check: {reason}",
                               {"could_not_check": reason}, None, subject(gpu)))
            continue
        try:
            out.append(fn(gpu))
        except CannotCheck as err:
            out.append(Outcome("unknown", f"could not check: {err}", {"could_not_check": str(err)},
                               None, subject(gpu)))
    return out
