"""Block devices: from a mount down to the physical disks, through the sysfs tree.

A mount's ``major:minor`` leads to ``/sys/dev/block/M:m``, which is followed through
device-mapper and md (``slaves/``), loop devices (``loop/backing_file``, whose file is
resolved again) and partitions (the parent directory) down to the disks. The doctor
reports the chain and the disks; ``pitstop system`` changes the readahead of the top
device it finds.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pitstop.hostinfo.kernel_text import menu_choice
from pitstop.hostinfo.mounts import Mount, mount_for
from pitstop.sysroot import Sysroot

__all__ = ["BlockResolver", "Medium", "disk_medium", "readahead_file", "transport"]

MAX_DEPTH = 8

# Block volumes reached over the provider's network, with provisioned IOPS, that look
# like local NVMe or SCSI disks: their `device/model` (or `device/vendor`) in sysfs.
# AWS documents "Amazon Elastic Block Store" for EBS on Nitro NVMe; GCP's NVMe interface
# reports "nvme_card-pd" for Persistent Disk / Hyperdisk and its SCSI interface vendor
# "Google", model "PersistentDisk"; Azure's remote NVMe disks "MSFT NVMe Accelerator".
NETWORK_VOLUME_MODELS = (
    ("Amazon Elastic Block Store", "AWS EBS volume"),
    ("nvme_card-pd", "GCP Persistent Disk"),
    ("PersistentDisk", "GCP Persistent Disk"),
    ("MSFT NVMe Accelerator", "Azure managed disk"),
)
# Instance-local SSDs of the same clouds: local flash, whatever the queue says.
LOCAL_CLOUD_SSD_MODELS = ("Amazon EC2 NVMe Instance Storage", "nvme_card",
                          "Microsoft NVMe Direct Disk")
# Words in "vendor model" of disks a hypervisor emulates (Hyper-V/Azure "Msft Virtual
# Disk", VMware "Virtual disk", QEMU/VirtualBox "QEMU HARDDISK"/"VBOX HARDDISK"): their
# `rotational` flag is the emulator's default (1), not a property of what stores the data.
VIRTUAL_DISK_WORDS = ("virtual disk", "qemu harddisk", "vbox harddisk", "vmware")


def transport(sys_path: str, name: str) -> str:
    """How a disk is attached, from its name and its place in the sysfs device tree.

    iSCSI LUNs hang below their session (``/sys/devices/platform/hostH/sessionS/...``,
    iscsiadm(8)), Fibre Channel ones below a remote port (``rport-H:B-R``), Hyper-V's
    synthetic SCSI below ``VMBUS``; Ceph RBD and NBD devices are virtual ``rbdN``/``nbdN``;
    NVMe over Fabrics namespaces below ``nvme-fabrics`` (a multipath head, below
    ``nvme-subsystem``, is told by its controllers' ``transport``: :func:`nvme_transport`).
    """
    p = sys_path.lower()
    if name.startswith("nvme"):
        # NVMe over TCP/RDMA/FC controllers hang below the fabrics class device.
        return "nvme-of" if "/nvme-fabrics/" in p else "nvme"
    if "/usb" in p:
        return "usb"
    if name.startswith("vd") or "/virtio" in p:
        return "virtio"
    if name.startswith("xvd"):
        return "xen"
    if name.startswith("mmcblk"):
        return "mmc"
    if name.startswith("rbd"):
        return "rbd"
    if name.startswith("nbd"):
        return "nbd"
    if name.startswith("zram"):
        return "ram"
    if name.startswith("sd") or name.startswith("sr"):
        if re.search(r"/session\d+/", p):
            return "iscsi"
        if "/rport-" in p:
            return "fc"
        if "/vmbus" in p:
            return "hyperv"
        if "/ata" in p:
            return "sata"
        if "/end_device" in p or "sas" in p:
            return "sas"
        return "scsi"
    return "unknown"


# Controller transports (/sys/class/nvme/nvmeN/transport) that cross a network.
NVME_FABRICS = ("tcp", "rdma", "fc")


def nvme_transport(sr: Sysroot, sys_path: str) -> str | None:
    """``pcie``, ``tcp``, ``rdma``, ``fc`` or ``loop``: the transport of the controller of an
    NVMe namespace (``device`` is the controller, or for a native-multipath head the
    subsystem, which lists its controllers)."""
    found = sr.read_text(f"{sys_path}/device/transport")
    if found:
        return found
    for ctrl in sr.listdir(f"{sys_path}/device"):
        if re.fullmatch(r"nvme\d+", ctrl):
            found = sr.read_text(f"{sys_path}/device/{ctrl}/transport")
            if found:
                return found
    return None


@dataclass(frozen=True)
class Medium:
    """What stores a disk's data, as far as sysfs tells.

    ``kind``: ``hdd`` (a spinning disk), ``ssd`` (local flash), ``network-volume``
    (EBS, Persistent Disk, Ceph RBD, iSCSI, NBD, NVMe over Fabrics: every read crosses a
    network),
    ``virtual`` (a hypervisor's disk whose backing store the guest cannot see),
    ``ram`` or ``unknown``. ``label`` names it for a person; ``why`` is the sysfs
    evidence that decided.
    """

    kind: str
    label: str
    why: str


def disk_medium(disk: Mapping[str, Any]) -> Medium:
    """Classify one disk of :class:`BlockResolver`'s ``disks`` (its name, transport,
    vendor, model, rotational flag)."""
    name = str(disk.get("name") or "")
    tr = str(disk.get("transport") or "")
    model = str(disk.get("model") or "")
    vendor = str(disk.get("vendor") or "")
    rot = disk.get("rotational")
    for word, label in NETWORK_VOLUME_MODELS:
        if word in model or word in vendor:
            return Medium("network-volume", label, f"device model {model or vendor!r}")
    if tr == "rbd":
        return Medium("network-volume", "Ceph RBD volume", f"{name} is a Ceph RBD device")
    if tr == "nbd":
        return Medium("network-volume", "network block device (NBD)", f"{name} is an NBD device")
    if tr == "nvme-of":
        over = disk.get("nvme_transport")
        return Medium("network-volume", "NVMe over Fabrics volume" + (f" ({over})" if over else ""),
                      f"{name}'s controller uses the {over or 'fabrics'} transport")
    if tr == "iscsi":
        return Medium("network-volume", "iSCSI LUN", "an iSCSI session in its sysfs path")
    if tr == "network-block":  # facts written before the transports were split
        return Medium("network-volume", "network volume", "a network block device")
    if tr == "ram":
        return Medium("ram", "compressed RAM disk", f"{name} is zram")
    if any(model.startswith(m) for m in LOCAL_CLOUD_SSD_MODELS):
        return Medium("ssd", "instance-local NVMe SSD", f"device model {model!r}")
    ident = f"{vendor} {model}".lower()
    virtual = any(w in ident for w in VIRTUAL_DISK_WORDS)
    if tr in ("virtio", "xen", "hyperv") or virtual:
        why = (f"{tr} transport" if tr in ("virtio", "xen", "hyperv")
               else f"vendor {vendor!r} model {model!r}")
        return Medium("virtual", "virtual disk", why + ": rotational says nothing about "
                      "what stores the data")
    if rot == 1:
        return Medium("hdd", "spinning disk", f"rotational=1 on a {tr or 'local'} link")
    if rot == 0:
        return Medium("ssd", "SSD", f"rotational=0 on a {tr or 'local'} link")
    return Medium("unknown", "disk", "no rotational flag")


class BlockResolver:
    """Follows a mount down to its disks, recording the chain on the way.

    ``chain``: every node, top first (``partition``, ``dm``, ``md``, ``loop``,
    ``disk``, ``no-block-device``...); ``disks``: the physical disks at the bottom
    with their kind and queue settings; ``top``: the sysfs path of the first device
    with a request queue of its own (a partition has none: it is its disk's), whose
    ``queue/read_ahead_kb`` governs reads from the mount; ``top_partition``: the
    partition above it, if the mount is on one.
    """

    def __init__(self, sr: Sysroot, mounts: list[Mount]) -> None:
        self.sr = sr
        self.mounts = mounts
        self.chain: list[dict[str, Any]] = []
        self.disks: list[dict[str, Any]] = []
        self.top: str | None = None
        self.top_partition: str | None = None

    def from_mount(self, mount: Mount, depth: int = 0) -> None:
        """Resolve the device behind ``mount`` (call once, for the top mount)."""
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
        """Record the block device at ``sys_path`` and follow it down."""
        if depth > MAX_DEPTH:
            self.chain.append({"kind": "too-deep", "name": posixpath.basename(sys_path)})
            return
        sr = self.sr
        name = posixpath.basename(sys_path)
        if sr.exists(f"{sys_path}/partition"):
            self.chain.append({"kind": "partition", "name": name})
            if self.top is None:
                self.top_partition = name
            self.node(posixpath.dirname(sys_path), depth + 1)
            return
        if self.top is None:
            self.top = sys_path
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
        over = nvme_transport(sr, sys_path) if kind.startswith("nvme") else None
        if over in NVME_FABRICS:
            kind = "nvme-of"
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
        if over:
            disk["nvme_transport"] = over
        self.chain.append({"kind": "disk", "name": name})
        self.disks.append(disk)


def readahead_file(sr: Sysroot, mount: Mount, mounts: list[Mount]) -> tuple[str | None, str]:
    """The ``read_ahead_kb`` file that governs reads from ``mount``, and a description.

    A partition (``sda1``, ``nvme0n1p2``) has no queue of its own: its readahead is the
    whole disk's. Device-mapper, md and loop devices have their own queue.
    Returns ``(None, reason)`` when there is no such file.
    """
    res = BlockResolver(sr, mounts)
    res.from_mount(mount)
    if res.top is None:
        if mount.major != 0:
            return None, f"no /sys/dev/block/{mount.major_minor} (not a block device)"
        return None, f"no block device in sysfs for {mount.source}"
    name = posixpath.basename(res.top)
    desc = f"/dev/{name}"
    if res.top_partition:
        desc += f" (disk of partition {res.top_partition})"
    path = f"{res.top}/queue/read_ahead_kb"
    if not sr.exists(path):
        return None, f"{desc} has no {path}"
    return path, desc
