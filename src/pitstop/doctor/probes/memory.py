"""Memory, swap, transparent hugepages and the size of /dev/shm."""

from __future__ import annotations

import os
from typing import Any

from pitstop.doctor.probes import ProbeContext, cgroup
from pitstop.hostinfo.kernel_text import menu_choice, parse_meminfo, parse_size
from pitstop.hostinfo.mounts import MOUNTINFO, read_mounts


def shm_facts(ctx: ProbeContext, mem_total: int | None) -> dict[str, Any]:
    """Size of /dev/shm: statvfs live, else the ``size=`` option in mountinfo."""
    sr = ctx.sysroot
    source = MOUNTINFO
    # (mount point, fstype, superblock and mount options): the size= option is a
    # superblock option in mountinfo and a plain option in /proc/mounts.
    entries = [(m.mount_point, m.fstype, ",".join(m.super_options + m.options))
               for m in read_mounts(sr)]
    if not entries:
        source = "/proc/mounts"
        for line in (sr.read_text(source) or "").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                entries.append((parts[1], parts[2], parts[3]))
    mine = [e for e in entries if e[0] == "/dev/shm"]
    out: dict[str, Any] = {"mounted": bool(mine)}
    if mine:
        _, fstype, opts = mine[-1]  # the last mount on a path is the visible one
        out["fstype"] = fstype
        sizes = [o[5:] for o in opts.split(",") if o.startswith("size=")]
        out["size_option"] = sizes[0] if sizes else None
        if sizes:
            out["size_bytes"] = parse_size(sizes[0])
        elif fstype == "tmpfs" and mem_total:
            out["size_bytes"] = mem_total // 2  # the tmpfs default
            out["size_is_default_half_of_ram"] = True
        out["source"] = source
    if ctx.live:
        try:
            st = os.statvfs("/dev/shm")
            out["size_bytes"] = st.f_frsize * st.f_blocks
            out["free_bytes"] = st.f_frsize * st.f_bavail
            out["source"] = "statvfs(/dev/shm)"
        except OSError as err:
            out["statvfs_error"] = str(err)
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
