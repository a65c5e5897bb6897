"""Parsers of the small text formats of procfs and sysfs (pure functions)."""

from __future__ import annotations

import re

from pitstop.sysroot import Sysroot

__all__ = ["kernel_release", "mem_total_bytes", "menu_choice", "parse_meminfo", "parse_size"]


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` in bytes (``kB`` values multiplied, counts kept as they are)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"(\S+):\s+(\d+)(?:\s+kB)?", line)
        if m:
            value = int(m.group(2))
            out[m.group(1)] = value * 1024 if line.rstrip().endswith("kB") else value
    return out


def mem_total_bytes(sr: Sysroot) -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` under ``sr`` in bytes, or ``None``."""
    return parse_meminfo(sr.read_text("/proc/meminfo") or "").get("MemTotal")


def menu_choice(text: str | None) -> str | None:
    """The selected entry of a sysfs menu: ``"always [madvise] never"`` -> ``"madvise"``.

    A file without brackets is returned stripped; ``None`` or empty text gives ``None``.
    """
    if text is None:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip() or None


def parse_size(text: str) -> int | None:
    """A tmpfs ``size=`` option (``65536k``, ``8g``, ``2T``) in bytes; ``None`` for a
    percentage (``50%``) or anything else."""
    m = re.fullmatch(r"(\d+)([kmgtKMGT]?)", text.strip())
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def kernel_release(sr: Sysroot) -> str | None:
    """The running kernel's release (``uname -r``): ``/proc/sys/kernel/osrelease``, else
    the second word after "Linux version" in ``/proc/version``."""
    release = sr.read_text("/proc/sys/kernel/osrelease")
    if release:
        return release
    m = re.match(r"Linux version (\S+)", sr.read_text("/proc/version") or "")
    return m.group(1) if m else None
