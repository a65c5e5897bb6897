"""Where the data lives: the filesystem under ``--data`` and the physical disks behind it.

The mount comes from ``/proc/self/mountinfo`` (longest mount point that contains the
path); :class:`pitstop.hostinfo.blockdev.BlockResolver` follows it down to the disks.
"""

from __future__ import annotations

import os
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo.blockdev import BlockResolver
from pitstop.hostinfo.mounts import mount_for, parse_mountinfo


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    path = ctx.data_path
    if ctx.live:
        path = os.path.realpath(path)
    text = sr.read_text("/proc/self/mountinfo")
    if text is None:
        raise RuntimeError("/proc/self/mountinfo is not readable")
    mounts = parse_mountinfo(text)
    mount = mount_for(path, mounts)
    if mount is None:
        raise RuntimeError(f"no mount in /proc/self/mountinfo holds {path}")
    res = BlockResolver(sr, mounts)
    res.from_mount(mount)
    out: dict[str, Any] = {
        "path": path,
        "mountpoint": mount.mount_point,
        "fstype": mount.fstype,
        "source": mount.source,
        "mount_options": ",".join(mount.options),
        "chain": res.chain,
        "disks": res.disks,
    }
    if ctx.live:
        try:
            st = os.statvfs(path)
            out["total_bytes"] = st.f_frsize * st.f_blocks
            out["free_bytes"] = st.f_frsize * st.f_bavail
        except OSError as err:
            out["statvfs_error"] = str(err)
    else:
        rec = ctx.recorded("statvfs") or {}
        space = rec.get(path) or rec.get(mount.mount_point)
        if space:
            out.update(total_bytes=space.get("total_bytes"), free_bytes=space.get("free_bytes"))
        else:
            out["statvfs_error"] = "free space is not recorded in this sysroot"
    return out
