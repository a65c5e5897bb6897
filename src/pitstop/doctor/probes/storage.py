"""Where the data lives: the filesystem under ``--data`` and the physical disks behind it.

The mount comes from ``/proc/self/mountinfo`` (longest mount point that contains the
path); its ``major:minor`` leads to ``/sys/dev/block/M:m``, which is followed through
device-mapper and md (``slaves/``), loop devices (``loop/backing_file``, whose file
is resolved again) and partitions (the parent directory) down to the disks.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo.kernel_text import menu_choice
from pitstop.hostinfo.mounts import Mount, mount_for, parse_mountinfo
from pitstop.sysroot import Sysroot

MAX_DEPTH = 8
# Models of cloud block volumes, which look like local NVMe/SCSI disks but are reached
# over the network with provisioned IOPS (AWS EBS, GCP Persistent Disk).
CLOUD_NETWORK_DISKS = ("Amazon Elastic Block Store", "PersistentDisk")


def transport(sys_path: str, name: str) -> str:
    """How a disk is attached, from its name and its place in the sysfs device tree."""
    p = sys_path.lower()
    if name.startswith("nvme"):
        return "nvme"
    if "/usb" in p:
        return "usb"
    if name.startswith("vd") or "/virtio" in p:
        return "virtio"
    if name.startswith("xvd"):
        return "xen"
    if name.startswith("mmcblk"):
        return "mmc"
    if name.startswith(("nbd", "rbd")):
        return "network-block"
    if name.startswith("zram"):
        return "ram"
    if name.startswith("sd") or name.startswith("sr"):
        if "/ata" in p:
            return "sata"
        if "/end_device" in p or "sas" in p:
            return "sas"
        return "scsi"
    return "unknown"


class _Resolver:
    def __init__(self, sr: Sysroot, mounts: list[Mount]) -> None:
        self.sr = sr
        self.mounts = mounts
        self.chain: list[dict[str, Any]] = []
        self.disks: list[dict[str, Any]] = []

    def from_mount(self, mount: Mount, depth: int = 0) -> None:
        sys_path = None
        if mount.major != 0:
            sys_path = self.sr.realpath(f"/sys/dev/block/{mount.major_minor}")
        elif mount.source.startswith("/dev/"):
            # btrfs and some others report an anonymous device number: use the source.
            sys_path = self._by_dev_name(mount.source)
        if sys_path is None:
            self.chain.append({"kind": "no-block-device", "fstype": mount.fstype,
                               "source": mount.source})
            return
        self.node(sys_path, depth)

    def _by_dev_name(self, dev: str) -> str | None:
        name = posixpath.basename(dev)
        if dev.startswith("/dev/mapper/"):
            for blk in self.sr.listdir("/sys/block"):
                if self.sr.read_text(f"/sys/block/{blk}/dm/name") == name:
                    return self.sr.realpath(f"/sys/block/{blk}")
        return self.sr.realpath(f"/sys/class/block/{name}")

    def node(self, sys_path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.chain.append({"kind": "too-deep", "name": posixpath.basename(sys_path)})
            return
        sr = self.sr
        name = posixpath.basename(sys_path)
        if sr.exists(f"{sys_path}/partition"):
            self.chain.append({"kind": "partition", "name": name})
            self.node(posixpath.dirname(sys_path), depth + 1)
            return
        slaves = sr.listdir(f"{sys_path}/slaves")
        if name.startswith("loop"):
            backing = sr.read_text(f"{sys_path}/loop/backing_file")
            self.chain.append({"kind": "loop", "name": name, "backing_file": backing})
            if backing:
                inner = mount_for(backing.removesuffix(" (deleted)"), self.mounts)
                if inner is not None:
                    self.from_mount(inner, depth + 1)
            return
        if slaves:
            kind = "dm" if name.startswith("dm-") else "md" if name.startswith("md") else "stacked"
            entry: dict[str, Any] = {
                "kind": kind, "name": name, "slaves": slaves,
                "read_ahead_kb": sr.read_int(f"{sys_path}/queue/read_ahead_kb", 10)}
            if kind == "dm":
                entry["dm_name"] = sr.read_text(f"{sys_path}/dm/name")
                uuid = sr.read_text(f"{sys_path}/dm/uuid") or ""
                entry["dm_target"] = uuid.split("-", 1)[0].lower() if uuid else None
            if kind == "md":
                entry["raid_level"] = sr.read_text(f"{sys_path}/md/level")
            self.chain.append(entry)
            for slave in slaves:
                real = sr.realpath(f"{sys_path}/slaves/{slave}")
                if real:
                    self.node(real, depth + 1)
            return
        model = sr.read_text(f"{sys_path}/device/model")
        kind = transport(sys_path, name)
        if model and any(m in model for m in CLOUD_NETWORK_DISKS):
            kind = "network-block"  # attached over the provider's network, not a local disk
        disk = {
            "name": name,
            "transport": kind,
            "rotational": sr.read_int(f"{sys_path}/queue/rotational", 10),
            "model": model,
            "vendor": sr.read_text(f"{sys_path}/device/vendor"),
            "size_bytes": (sr.read_int(f"{sys_path}/size", 10) or 0) * 512 or None,
            "removable": sr.read_int(f"{sys_path}/removable", 10),
            "scheduler": menu_choice(sr.read_text(f"{sys_path}/queue/scheduler")),
            "read_ahead_kb": sr.read_int(f"{sys_path}/queue/read_ahead_kb", 10),
            "sysfs_path": sys_path,
        }
        self.chain.append({"kind": "disk", "name": name})
        self.disks.append(disk)


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
    res = _Resolver(sr, mounts)
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
