"""The size of ``/dev/shm``, where DataLoader workers hand batches to the main process."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pitstop.hostinfo.kernel_text import parse_size
from pitstop.hostinfo.mounts import MOUNTINFO, read_mounts
from pitstop.sysroot import Sysroot

__all__ = ["ShmSize", "shm_size"]


@dataclass(frozen=True)
class ShmSize:
    """What is known about ``/dev/shm``; ``size_bytes`` is ``None`` when unknown."""

    mounted: bool
    size_bytes: int | None = None
    source: str = ""  # where the size came from
    fstype: str | None = None
    size_option: str | None = None  # the mount's size= option as written
    default_half_of_ram: bool = False  # tmpfs without size=: the kernel's default
    free_bytes: int | None = None
    statvfs_error: str | None = None


def _option_bytes(option: str, mem_total: int | None) -> int | None:
    """A tmpfs ``size=``: absolute (``64m``) or a share of RAM (``50%``)."""
    pct = re.fullmatch(r"(\d+)%", option.strip())
    if pct:
        return mem_total * int(pct.group(1)) // 100 if mem_total else None
    return parse_size(option)


def shm_size(sr: Sysroot, mem_total: int | None) -> ShmSize:
    """Size of ``/dev/shm``: statvfs on the live machine, else its mount's ``size=``
    option (mountinfo, or ``/proc/mounts`` without it), else tmpfs's default of half
    of RAM."""
    source = MOUNTINFO
    # (mount point, fstype, options): size= is a superblock option in mountinfo and a
    # plain option in /proc/mounts.
    entries = [(m.mount_point, m.fstype, m.super_options + m.options) for m in read_mounts(sr)]
    if not entries:
        source = "/proc/mounts"
        for line in (sr.read_text(source) or "").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                entries.append((parts[1], parts[2], tuple(parts[3].split(","))))
    mine = [e for e in entries if e[0] == "/dev/shm"]
    size: int | None = None
    fstype = option = None
    default = False
    if mine:
        _, fstype, opts = mine[-1]  # the last mount on a path is the visible one
        sizes = [o[5:] for o in opts if o.startswith("size=")]
        option = sizes[0] if sizes else None
        if option is not None:
            size = _option_bytes(option, mem_total)
        elif fstype == "tmpfs" and mem_total:
            size, default = mem_total // 2, True
    free = error = None
    if sr.is_live:
        try:
            st = os.statvfs("/dev/shm")
            size, free, source = st.f_frsize * st.f_blocks, st.f_frsize * st.f_bavail, \
                "statvfs(/dev/shm)"
        except OSError as err:
            error = str(err)
    return ShmSize(bool(mine), size, source, fstype, option, default, free, error)
