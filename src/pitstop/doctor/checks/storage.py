"""Storage layer: what kind of disk or filesystem the training data is read from."""

from __future__ import annotations

from typing import Any

from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    check,
    gib,
    ok,
    problem,
    section,
    warning,
)
from pitstop.doctor.remedies import system_apply
from pitstop.findings import Remedy
from pitstop.hostinfo import targets
from pitstop.hostinfo.blockdev import Medium, disk_medium

NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "afs",
              "lustre", "beegfs", "gpfs", "davfs", "virtiofs"}
FUSE_NAMES = ("sshfs", "s3fs", "gcsfuse", "rclone", "goofys", "mountpoint-s3", "blobfuse",
              "juicefs")

COPY_LOCAL = ("Copy the dataset to a local NVMe/SSD before training, e.g.\n"
              "rsync -a --info=progress2 {path}/ /local/nvme/dataset/\n"
              "then point the training script (and `pitstop doctor --data`) at the copy.")


def _chain_text(st: dict[str, Any]) -> str:
    parts = []
    for node in st.get("chain", []):
        label = node.get("name") or node.get("fstype") or node["kind"]
        if node["kind"] == "dm" and node.get("dm_name"):
            label = f"{label} ({node['dm_name']})"
        if node["kind"] == "loop" and node.get("backing_file"):
            label = f"{label} -> {node['backing_file']}"
        parts.append(f"{node['kind']} {label}" if node["kind"] != "disk" else label)
    return " -> ".join(parts)


def medium(facts: Facts, d: dict[str, Any]) -> Medium:
    """What stores a data disk (:func:`pitstop.hostinfo.blockdev.disk_medium`); in a
    virtual machine a plain SCSI disk that claims to rotate is the hypervisor's."""
    m = disk_medium(d)
    if m.kind == "hdd" and d.get("transport") in ("scsi", "unknown") and \
            (facts.get("platform") or {}).get("virtual_machine"):
        return Medium("virtual", "virtual disk", "a SCSI disk of a virtual machine: its "
                      "rotational flag says nothing about what stores the data")
    return m


MEDIUM_SHORT = {"hdd": "HDD", "ssd": "SSD", "ram": "RAM disk", "unknown": "disk"}


def _disk_text(d: dict[str, Any], facts: Facts | None = None) -> str:
    m = medium(facts or {}, d)
    model = d.get("model") or ""
    if m.kind in MEDIUM_SHORT:  # "nvme0n1 (nvme SSD Samsung SSD 990 PRO 2TB, 1863.0 GiB)"
        what = f"{d.get('transport')} {MEDIUM_SHORT[m.kind]}" + (f" {model}" if model else "")
    else:  # "nvme1n1 (AWS EBS volume, model Amazon Elastic Block Store, 2048.0 GiB)"
        what = m.label + (f", model {model}" if model and model not in m.label else "")
    return f"{d['name']} ({what}, {gib(d.get('size_bytes'))})"


def _base_evidence(st: dict[str, Any], facts: Facts) -> dict[str, Any]:
    return {"path": st.get("path"), "filesystem": st.get("fstype"),
            "mountpoint": st.get("mountpoint"), "chain": _chain_text(st),
            "disks": [_disk_text(d, facts) for d in st.get("disks", [])],
            "media": [f"{d.get('name')}: {medium(facts, d).kind} ({medium(facts, d).why})"
                      for d in st.get("disks", [])]}


@check("DR030", "storage", 75)
def rotational(facts: Facts) -> Outcome:
    st = section(facts, "storage")
    disks = st.get("disks") or []
    ev = _base_evidence(st, facts)
    if not disks:
        raise CannotCheck(f"no block device behind {st.get('fstype')} at {st.get('mountpoint')} "
                          f"({_chain_text(st) or 'nothing found'})")
    kinds = {d["name"]: medium(facts, d) for d in disks}
    spinning = [d for d in disks if kinds[d["name"]].kind == "hdd"]
    if not spinning:
        if all(m.kind == "unknown" for m in kinds.values()):
            raise CannotCheck("the disks do not report whether they rotate")
        others = sorted({m.kind for m in kinds.values()} - {"ssd"})
        note = ""
        if "network-volume" in others:
            note = " (a network volume: DR031 judges it)"
        elif "virtual" in others:
            note = " (a virtual disk: its speed is the provider's; measure with --io)"
        return ok("data not on a spinning disk: " + ", ".join(_disk_text(d, facts)
                                                            for d in disks) + note, **ev)
    return problem(f"data on a spinning disk ({', '.join(_disk_text(d, facts) for d in spinning)}"
                   "): about 100-200 random reads/s, far below what a DataLoader needs",
                   Remedy.shell(COPY_LOCAL.format(path=st.get("path"))), **ev)


@check("DR031", "storage", 70)
def network_fs(facts: Facts) -> Outcome:
    st = section(facts, "storage")
    fstype = str(st.get("fstype") or "")
    source = str(st.get("source") or "")
    ev = _base_evidence(st, facts) | {"source": source}
    fuse_kind = next((n for n in FUSE_NAMES if n in fstype or n in source), None)
    net_disks = [d for d in st.get("disks") or [] if medium(facts, d).kind == "network-volume"]
    if fstype in NETWORK_FS or fstype.split(".")[0] in NETWORK_FS:
        kind = f"network filesystem {fstype}"
    elif fstype.startswith("fuse"):
        kind = f"FUSE filesystem {fuse_kind or fstype}"
    elif net_disks:
        kind = "network block volume: " + ", ".join(
            f"{d['name']} ({medium(facts, d).label}"
            + (f", model {d['model']}" if d.get("model") else "") + ")" for d in net_disks)
        return warning(f"data on a {kind}; every read crosses the network, and IOPS and "
                       "throughput are provisioned (often a few thousand IOPS); measure "
                       "with --io",
                       Remedy.shell("pitstop doctor --io --data " + str(st.get("path"))
                                    + "   # measure first\n"
                                    + COPY_LOCAL.format(path=st.get("path"))
                                    + "\n# (cloud: the instance's local NVMe, or more "
                                      "provisioned IOPS/throughput)"), **ev)
    else:
        return ok(f"data on a local {fstype} filesystem", **ev)
    return warning(f"data on a {kind} ({source}): every small-file read pays a network round "
                   "trip",
                   Remedy.shell(COPY_LOCAL.format(path=st.get("path"))
                                + "\n# or pack samples into large shards (WebDataset/tar) read "
                                  "sequentially"), **ev)


@check("DR032", "storage", 55)
def usb_disk(facts: Facts) -> Outcome:
    st = section(facts, "storage")
    disks = st.get("disks") or []
    if not disks:
        raise CannotCheck("no block device behind the data path")
    usb = [d for d in disks if d.get("transport") == "usb"]
    ev = _base_evidence(st, facts)
    if not usb:
        return ok("data not on a USB disk: " + ", ".join(
            f"{d['name']} via {d.get('transport')}" for d in disks), **ev)
    return warning(f"data on a USB-attached disk ({', '.join(_disk_text(d, facts) for d in usb)})",
                   Remedy.shell(COPY_LOCAL.format(path=st.get("path"))), **ev)


@check("DR033", "storage", 35)
def free_space(facts: Facts) -> Outcome:
    st = section(facts, "storage")
    total, free = st.get("total_bytes"), st.get("free_bytes")
    if total is None or free is None:
        raise CannotCheck(st.get("statvfs_error") or "free space unknown")
    pct = 100.0 * free / total if total else 0.0
    ev = {"mountpoint": st.get("mountpoint"), "free": gib(free), "total": gib(total),
          "free_pct": round(pct, 1)}
    if free < (5 << 30) or pct < 5:
        return warning(f"only {gib(free)} ({pct:.1f} %) free on {st.get('mountpoint')}: "
                       "checkpoints and caches will fail to write",
                       Remedy.shell(f"du -xh --max-depth=2 {st.get('mountpoint')} | sort -h | "
                                    "tail -20   # find what to delete"), **ev)
    return ok(f"{gib(free)} ({pct:.0f} %) free", **ev)


# A DataLoader reading ImageNet-sized JPEGs (~110 KiB) at 2,000 images/s needs about
# 220 MB/s of random 128 KiB reads; half of that is a warning, a quarter a problem.
IO_NEED_MBPS = 220.0


@check("DR034", "storage", 72)
def random_read_speed(facts: Facts) -> Outcome:
    io = section(facts, "io")
    if not io.get("measured"):
        raise CannotCheck(io.get("reason") or io.get("error") or "not measured (run with --io)")
    res = {r.get("block_bytes"): r for r in io.get("results", []) if "error" not in r}
    big, small = res.get(131072), res.get(4096)
    if big is None:
        raise CannotCheck("the 128 KiB read test did not run: " + "; ".join(
            str(r.get("error")) for r in io.get("results", []) if "error" in r))
    ev = {"read_128k_mb_s": big.get("mb_per_s"), "read_128k_iops": big.get("iops"),
          "read_4k_iops": small.get("iops") if small else None,
          "o_direct": big.get("o_direct"), "queue_depth": 1,
          "files_sampled": io.get("files_sampled"), "temp_file": io.get("temp_file", False),
          "need_mb_s": IO_NEED_MBPS}
    mbps = float(big.get("mb_per_s") or 0)
    note = "" if big.get("o_direct") else " (page cache may have helped: O_DIRECT refused)"
    fix = Remedy.shell(COPY_LOCAL.format(path=(facts.get("storage") or {}).get("path", "DATA")))
    if mbps < IO_NEED_MBPS / 4:
        return problem(f"random 128 KiB reads at {mbps:.0f} MB/s{note}: a DataLoader at 2,000 "
                       f"images/s needs ~{IO_NEED_MBPS:.0f} MB/s", fix, **ev)
    if mbps < IO_NEED_MBPS / 2:
        return warning(f"random 128 KiB reads at {mbps:.0f} MB/s{note}, below the "
                       f"~{IO_NEED_MBPS:.0f} MB/s a fast DataLoader needs", fix, **ev)
    iops = ev["read_4k_iops"]
    return ok(f"random 128 KiB reads at {mbps:.0f} MB/s, 4 KiB at "
              f"{f'{iops:.0f}' if iops else '?'} IOPS{note}", **ev)


# Large sequential reads want a readahead of a few MiB; the kernel default of 128 KiB
# leaves a spinning disk seeking. The value `pitstop system` sets, so both agree.
READAHEAD_MIN_KB = targets.READAHEAD_KB


@check("DR035", "storage", 40)
def readahead(facts: Facts) -> Outcome:
    st = section(facts, "storage")
    disks = st.get("disks") or []
    if not disks:
        raise CannotCheck("no block device behind the data path")
    slow = [d for d in disks if medium(facts, d).kind in ("hdd", "network-volume")]
    if not slow:
        raise NotApplicable("readahead matters for spinning disks and network block volumes; "
                            "the data is on " + ", ".join(_disk_text(d, facts) for d in disks))
    # The readahead that applies is the top device's: dm/md if stacked, else the disk.
    top = next((n for n in st.get("chain", []) if n.get("read_ahead_kb") is not None), None)
    dev, ra = (top["name"], top["read_ahead_kb"]) if top else (
        disks[0]["name"], disks[0].get("read_ahead_kb"))
    if ra is None:
        raise CannotCheck(f"read_ahead_kb of {dev} is not readable")
    kinds = {medium(facts, d).kind for d in slow}
    labels = sorted({medium(facts, d).label for d in slow})
    ev = {"device": dev, "read_ahead_kb": ra, "wanted_kb": READAHEAD_MIN_KB,
          "under": ", ".join(labels)}
    if ra >= READAHEAD_MIN_KB:
        return ok(f"readahead {ra} KiB on {dev} ({', '.join(labels)})", **ev)
    if kinds == {"network-volume"}:
        why = (f"sequential reads of large files from the {', '.join(labels)} go out in small "
               "requests, each a network round trip that counts against the volume's IOPS")
    else:
        why = "sequential reads of large files from a spinning disk stop to seek every few blocks"
    return warning(f"readahead of {dev} is {ra} KiB: {why}",
                   Remedy.shell(f"sudo blockdev --setra {READAHEAD_MIN_KB * 2} /dev/{dev}   # "
                                f"units of 512 B = {READAHEAD_MIN_KB} KiB\n"
                                + system_apply("readahead"), "resets at reboot"), **ev)
