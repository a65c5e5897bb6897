"""Documentation of the storage codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import COPY_LOCAL, SYSTEM_APPLY, P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR030", "data-on-rotational-disk", "Training data on a spinning disk", "storage", P,
        "Resolves the filesystem under `--data` through `/proc/self/mountinfo` and sysfs "
        "(device-mapper/LVM, md RAID, loop files, partitions) to the disks and decides what "
        "stores the data: a spinning disk is `queue/rotational=1` on a local link (SATA, SAS, "
        "SCSI, USB). Network volumes (AWS EBS `Amazon Elastic Block Store`, GCP Persistent "
        "Disk `PersistentDisk`/`nvme_card-pd`, Azure `MSFT NVMe Accelerator`, Ceph `rbdN`, "
        "`nbdN`, iSCSI LUNs below a session in sysfs) are DR031's; virtual disks (virtio, Xen, "
        "Hyper-V, VMware, QEMU) report `rotational=1` whatever stores them and are not called "
        "spinning.",
        "A hard disk does ~100-200 random reads per second: a DataLoader reading individual "
        "image files gets a few MB/s and the GPU waits.",
        "```\ndata on a spinning disk (sda (sata HDD ST8000DM004, 7.3 TiB))\n"
        "  chain=dm dm-0 (vg0-data) -> partition sda2 -> sda\n```",
        COPY_LOCAL, "manual: copying data needs space on the fast disk."),
    doc("DR031", "data-on-network-filesystem", "Training data on a network or FUSE filesystem",
        "storage", W,
        "Flags the filesystem type under `--data`: nfs, cifs/smb, 9p, ceph, glusterfs, lustre, "
        "virtiofs, and FUSE filesystems (sshfs, s3fs, gcsfuse, rclone, ...); and block devices "
        "that are network volumes, named as such: AWS EBS and GCP Persistent Disk / Azure "
        "managed disks by their sysfs model, Ceph RBD and NBD devices by name, iSCSI LUNs by "
        "their session in the sysfs path, NVMe over Fabrics (TCP, RDMA, FC) by its "
        "controller's `transport`. Instance-local NVMe (`Amazon EC2 NVMe Instance "
        "Storage`, GCP `nvme_card`) is local.",
        "Every small file costs network round trips (metadata + data); FUSE adds user-space "
        "copies. Throughput per worker is often 10-50x below a local SSD.",
        "```\ndata on a FUSE filesystem sshfs (user@host:/data)\n```",
        COPY_LOCAL, "manual: copying data needs space on the fast disk; pitstop only reads."),
    doc("DR032", "data-on-usb-disk", "Training data on a USB-attached disk", "storage", W,
        "Reports disks behind the data path whose sysfs device path runs through a USB "
        "controller.",
        "USB bridges limit queue depth and throughput (often < 400 MB/s, fewer IOPS) and can "
        "disconnect under load.",
        "```\ndata on a USB-attached disk (sdb (usb SSD Portable SSD T7, 931.5 GiB))\n```",
        COPY_LOCAL, "manual: copying data needs space on the local disk; pitstop only reads."),
    doc("DR033", "data-disk-low-free-space", "Little free space where the data lives", "storage", W,
        "statvfs of the data path: free below 5 GiB or 5 %.",
        "Checkpoints, caches (torch.compile, datasets) and logs fail to write mid-run; "
        "near-full filesystems also fragment and slow down.",
        "```\nonly 3.2 GiB (1.1 %) free on /data\n```",
        "```sh\ndu -xh --max-depth=2 /data | sort -h | tail -20\n```",
        "manual: deleting files is your decision."),
    doc("DR034", "data-random-read-slow", "Random reads of the data too slow for a DataLoader",
        "storage", W,
        "With `--io`: reads random 4 KiB and 128 KiB blocks of existing files under `--data` "
        "(O_DIRECT where the filesystem allows it, queue depth 1, a few seconds) and reports "
        "IOPS and MB/s. It never writes to your data; if there is too little data it measures a "
        "64 MiB temp file it creates beside it and removes.",
        "A DataLoader reading ImageNet-sized JPEGs (~110 KiB) at 2,000 images/s needs about "
        "220 MB/s of random reads; below half of that the GPU waits for data.",
        "```\nrandom 128 KiB reads at 18 MB/s: a DataLoader at 2,000 images/s needs ~220 MB/s\n```",
        COPY_LOCAL, "manual: copying data needs space on a fast disk; pitstop only reads."),
    doc("DR035", "data-disk-readahead-small",
        "Small readahead on the spinning disk or network volume under the data",
        "storage", W,
        "For data on a spinning disk or a network block volume (see DR030/DR031 for how each "
        "is recognised), reads `queue/read_ahead_kb` of the device the filesystem sits on (the "
        "device-mapper/md device when stacked). The finding says which of the two it is.",
        "The kernel default of 128 KiB makes a hard disk stop and seek every 128 KiB while a "
        "loader streams large files or shards; on a network volume it splits a sequential read "
        "into small requests, each a round trip that counts against the volume's provisioned "
        "IOPS. A few MiB of readahead keeps either streaming.",
        "```\nreadahead of dm-0 is 128 KiB\n```",
        "```sh\nsudo blockdev --setra 8192 /dev/dm-0   # 512-byte units: 4 MiB\n```\n"
        + SYSTEM_APPLY.format("readahead"),
        "safe: readahead only changes how much the kernel prefetches; resets at reboot."),
]
