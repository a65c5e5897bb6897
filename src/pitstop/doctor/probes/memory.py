"""Memory, swap, transparent hugepages and the size of /dev/shm."""

from __future__ import annotations

import os
import re
from typing import Any

from pitstop.doctor.probes import ProbeContext, cgroup


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` in bytes."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"(\S+):\s+(\d+)(?:\s+kB)?", line)
        if m:
            value = int(m.group(2))
            out[m.group(1)] = value * 1024 if line.rstrip().endswith("kB") else value
    return out


def bracketed(text: str | None) -> str | None:
    """``"always [madvise] never"`` -> ``"madvise"``."""
    if not text:
        return None
    m = re.search(r"\[(\w[\w+]*)\]", text)
    return m.group(1) if m else text.strip()


def parse_size(text: str) -> int | None:
    """A tmpfs ``size=`` option (``65536k``, ``8g``, ``50%``) in bytes; ``None`` for a percentage."""
    m = re.fullmatch(r"(\d+)([kmgtKMGT]?)", text.strip())
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def shm_facts(ctx: ProbeContext, mem_total: int | None) -> dict[str, Any]:
    """Size of /dev/shm: statvfs live, else the ``size=`` option in mountinfo."""
    sr = ctx.sysroot
    mounts = sr.read_text("/proc/self/mountinfo")
    source = "/proc/self/mountinfo"
    entries: list[tuple[str, str, str]] = []  # (mountpoint, fstype, options)
    if mounts:
        for line in mounts.splitlines():
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) >= 6 and len(rfields) >= 3:
                entries.append((fields[4], rfields[0], rfields[2] + "," + fields[5]))
    else:
        mounts = sr.read_text("/proc/mounts")
        source = "/proc/mounts"
        for line in (mounts or "").splitlines():
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
        "thp_enabled": bracketed(sr.read_text("/sys/kernel/mm/transparent_hugepage/enabled")),
        "thp_defrag": bracketed(sr.read_text("/sys/kernel/mm/transparent_hugepage/defrag")),
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
