"""Memory, swap, transparent hugepages and the size of /dev/shm."""

from __future__ import annotations

from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo import cgroup
from pitstop.hostinfo.kernel_text import menu_choice, parse_meminfo
from pitstop.hostinfo.shm import shm_size


def shm_facts(ctx: ProbeContext, mem_total: int | None) -> dict[str, Any]:
    """Size of /dev/shm (:func:`pitstop.hostinfo.shm.shm_size`) as facts."""
    shm = shm_size(ctx.sysroot, mem_total)
    out: dict[str, Any] = {"mounted": shm.mounted}
    if shm.mounted:
        out.update(fstype=shm.fstype, size_option=shm.size_option)
        if shm.size_option is not None or shm.default_half_of_ram:
            out["size_bytes"] = shm.size_bytes
        if shm.default_half_of_ram:
            out["size_is_default_half_of_ram"] = True
        out["source"] = shm.source
    if shm.free_bytes is not None:
        out.update(size_bytes=shm.size_bytes, free_bytes=shm.free_bytes, source=shm.source)
    if shm.statvfs_error is not None:
        out["statvfs_error"] = shm.statvfs_error
    return out


def parse_limit(limits: str, name: str) -> tuple[int | None, int | None] | None:
    """``(soft, hard)`` of one line of ``/proc/self/limits``; ``None`` means unlimited."""
    for line in limits.splitlines():
        if line.startswith(name):
            parts = line[len(name):].split()
            if len(parts) < 2:
                return None

            def num(v: str) -> int | None:
                return None if v == "unlimited" else int(v)

            try:
                return num(parts[0]), num(parts[1])
            except ValueError:
                return None
    return None


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    text = sr.read_text("/proc/meminfo")
    if text is None:
        raise RuntimeError("/proc/meminfo is not readable")
    mi = parse_meminfo(text)
    return {
        "mem_total_bytes": mi.get("MemTotal"),
        "mem_available_bytes": mi.get("MemAvailable"),
        "swap_total_bytes": mi.get("SwapTotal"),
        "swap_free_bytes": mi.get("SwapFree"),
        "swappiness": sr.read_int("/proc/sys/vm/swappiness", 10),
        "thp_enabled": menu_choice(sr.read_text("/sys/kernel/mm/transparent_hugepage/enabled")),
        "thp_defrag": menu_choice(sr.read_text("/sys/kernel/mm/transparent_hugepage/defrag")),
        "shm": shm_facts(ctx, mi.get("MemTotal")),
        "memlock": _memlock(ctx),
        "cgroup": cgroup.memory_limit(sr),
    }


def _memlock(ctx: ProbeContext) -> dict[str, Any]:
    text = ctx.sysroot.read_text("/proc/self/limits")
    if text is None:
        return {"error": "/proc/self/limits is not readable"}
    lim = parse_limit(text, "Max locked memory")
    if lim is None:
        return {"error": "no 'Max locked memory' line in /proc/self/limits"}
    return {"soft_bytes": lim[0], "hard_bytes": lim[1], "unlimited": lim[0] is None}
