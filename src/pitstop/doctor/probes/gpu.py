"""NVIDIA GPUs as the PCI bus, the kernel and NVML see them."""

from __future__ import annotations

import os
import re
from typing import Any

from pitstop.doctor.data import PCIE_GEN_BY_GTS
from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo.cgroup import device_rules

NVIDIA_VENDOR = 0x10DE
PCI_DEVICES = "/sys/bus/pci/devices"


def link_gen(speed: str | None) -> int | None:
    """``"16.0 GT/s PCIe"`` -> 4; ``None`` for unknown text."""
    if not speed:
        return None
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed)
    if not m:
        return None
    return PCIE_GEN_BY_GTS.get(float(m.group(1)))


def _link(sr: Any, dev_path: str) -> dict[str, Any]:
    cur = sr.read_text(f"{dev_path}/current_link_speed")
    mx = sr.read_text(f"{dev_path}/max_link_speed")
    return {
        "current_gen": link_gen(cur),
        "current_width": sr.read_int(f"{dev_path}/current_link_width", 10),
        "max_gen": link_gen(mx),
        "max_width": sr.read_int(f"{dev_path}/max_link_width", 10),
    }


def probe_pci(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    if not sr.exists(PCI_DEVICES):
        raise RuntimeError(f"{PCI_DEVICES} is not readable")
    gpus = []
    for addr in sr.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{addr}"
        if sr.read_int(f"{base}/vendor", 16) != NVIDIA_VENDOR:
            continue
        cls = sr.read_int(f"{base}/class", 16)
        if cls is None or (cls >> 16) != 0x03:  # display controllers only (not audio/USB)
            continue
        driver_link = sr.realpath(f"{base}/driver")
        real = sr.realpath(base)
        upstream = os.path.dirname(real) if real else None
        up_name = os.path.basename(upstream) if upstream else ""
        gpu: dict[str, Any] = {
            "pci_address": addr.lower(),
            "device_id": f"0x{sr.read_int(f'{base}/device', 16) or 0:04x}",
            "class": f"0x{cls:06x}",
            "driver": os.path.basename(driver_link) if driver_link else None,
            "numa_node": sr.read_int(f"{base}/numa_node", 10),
            "link": _link(sr, base),
        }
        # The port the GPU hangs on: its maximum is what the slot can do.
        if upstream and re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", up_name):
            gpu["upstream_port"] = up_name
            gpu["upstream_link"] = _link(sr, upstream)
        gpus.append(gpu)
    return {"nvidia_gpus": gpus}


def probe_kernel_modules(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    text = sr.read_text("/proc/modules")
    loaded = {line.split()[0] for line in (text or "").splitlines() if line.strip()}
    # /sys/module/NAME exists for loaded modules and for built-in drivers alike; it is
    # the only source on kernels without loadable-module support (no /proc/modules).
    for name in ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nouveau"):
        if sr.exists(f"/sys/module/{name}"):
            loaded.add(name)
    if text is None and not sr.exists("/sys/module"):
        raise RuntimeError("neither /proc/modules nor /sys/module is readable")
    interesting = sorted(m for m in loaded if m.startswith(("nvidia", "nouveau")))
    version_text = sr.read_text("/proc/driver/nvidia/version")
    driver_version = None
    if version_text:
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", version_text)
        driver_version = m.group(1) if m else None
    blacklisted = False
    for name in sr.listdir("/etc/modprobe.d"):
        body = sr.read_text(f"/etc/modprobe.d/{name}") or ""
        if re.search(r"^\s*blacklist\s+nouveau\b", body, re.MULTILINE):
            blacklisted = True
    dev_nodes = [n for n in sr.listdir("/dev") if n.startswith("nvidia")]
    # RDMA devices NCCL would use for inter-node traffic (InfiniBand / RoCE).
    infiniband = sr.listdir("/sys/class/infiniband")
    # The verbs device nodes a process needs to use them (a container gets them only
    # when the RDMA device plugin or --device passes them in).
    rdma_nodes = [n for n in sr.listdir("/dev/infiniband") if n.startswith(("uverbs", "rdma_cm"))]
    return {
        "proc_modules_readable": text is not None,
        "nvidia_loaded": "nvidia" in loaded,
        "nouveau_loaded": "nouveau" in loaded,
        "modules": interesting,
        "proc_driver_version": driver_version,
        "proc_driver_text": (version_text or "").splitlines()[0] if version_text else None,
        "nouveau_blacklisted": blacklisted,
        "dev_nodes": dev_nodes,
        "infiniband_devices": infiniband,
        "rdma_dev_nodes": rdma_nodes,
    }


# Where the NVIDIA device plugin's "volume-mounts" strategy lists the GPUs it gave a
# pod (NVIDIA_VISIBLE_DEVICES then names this directory instead of the GPUs).
CONTAINER_DEVICES_DIR = "/var/run/nvidia-container-devices"


def probe_gpu_access(ctx: ProbeContext) -> dict[str, Any]:
    """What this process was given of the machine's GPUs: its ``/dev/nvidiaN`` nodes,
    its cgroup's device rules and the device plugin's list (the environment variables
    are in the ``environment`` section)."""
    sr = ctx.sysroot
    return {
        "dev_gpu_nodes": sorted((n for n in sr.listdir("/dev") if re.fullmatch(r"nvidia\d+", n)),
                                key=lambda n: int(n[6:])),
        "cgroup_devices": device_rules(sr),
        "container_devices": (sr.listdir(CONTAINER_DEVICES_DIR)
                              if sr.exists(CONTAINER_DEVICES_DIR) else None),
    }


def probe_nvml(ctx: ProbeContext) -> dict[str, Any]:
    """One NVML snapshot of every GPU; a recorded one under a sysroot."""
    if not ctx.live:
        rec = ctx.recorded("nvml")
        if rec is None:
            return {"available": False,
                    "reason": "no NVML recording in this sysroot (pitstop-recorded/nvml.json)"}
        return dict(rec)
    from pitstop.telemetry.nvml import (
        NvmlUnavailableError,
        gpu_snapshot,
        nvml_session,
        system_snapshot,
        to_jsonable,
    )

    try:
        with nvml_session() as nv:
            system = system_snapshot(nv)
            count = system.get("device_count")
            gpus = []
            for i in range(count if isinstance(count, int) else 0):
                try:
                    gpus.append(gpu_snapshot(nv, i))
                except Exception as err:  # e.g. GPU_IS_LOST for a GPU that fell off the bus
                    gpus.append({"index": i, "error": f"{type(err).__name__}: {err}"})
    except NvmlUnavailableError as err:
        return {"available": False, "reason": str(err)}
    return {"available": True, "self_pid": os.getpid(), "system": to_jsonable(system),
            "gpus": to_jsonable(gpus)}
