"""``/proc/self/mountinfo``: the mounts of this process, and the one that holds a path."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pitstop.sysroot import Sysroot

__all__ = ["MOUNTINFO", "Mount", "mount_for", "parse_mountinfo", "read_mounts", "unescape"]

MOUNTINFO = "/proc/self/mountinfo"


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo`` (see proc(5))."""

    mount_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: tuple[str, ...]  # per-mount options (rw, noatime, ...)
    fstype: str
    source: str
    super_options: tuple[str, ...]  # per-superblock options (size=..., errors=...)

    @property
    def major_minor(self) -> str:
        """``"8:1"``: the device number as ``/sys/dev/block`` names it."""
        return f"{self.major}:{self.minor}"

    @property
    def read_only(self) -> bool:
        return "ro" in self.options or "ro" in self.super_options

    def super_option(self, key: str) -> str | None:
        """The value of superblock option ``key=value``, or ``None``."""
        for opt in self.super_options:
            if opt.startswith(key + "="):
                return opt.split("=", 1)[1]
        return None


def unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo`` octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Every well-formed line of a mountinfo file, in file order (later mounts shadow)."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        parts = line.split()
        try:
            sep = parts.index("-", 6)  # after the optional fields
            major, minor = (int(x) for x in parts[2].split(":"))
            mounts.append(Mount(
                mount_id=int(parts[0]), major=major, minor=minor,
                root=unescape(parts[3]), mount_point=unescape(parts[4]),
                options=tuple(parts[5].split(",")), fstype=parts[sep + 1],
                source=unescape(parts[sep + 2]) if len(parts) > sep + 2 else "",
                super_options=tuple(parts[sep + 3].split(",")) if len(parts) > sep + 3 else (),
            ))
        except (ValueError, IndexError):
            continue
    return mounts


def read_mounts(sr: Sysroot) -> list[Mount]:
    """The mounts of ``/proc/self/mountinfo`` under ``sr`` (empty when unreadable)."""
    return parse_mountinfo(sr.read_text(MOUNTINFO) or "")


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that holds machine path ``path``: the longest mount point that is a
    prefix of it; of equal ones the last mounted (it shadows the earlier)."""
    path = os.path.normpath(path)
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point
        inside = path == mp or mp == "/" or path.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mount_point)):
            best = m
    return best
