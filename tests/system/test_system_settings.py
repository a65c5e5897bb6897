"""Reading the fake machines: what each setting finds and which exact changes it plans."""

from __future__ import annotations

import os
from pathlib import Path

from pitstop.hostinfo.kernel_text import menu_choice, parse_size
from pitstop.hostinfo.mounts import mount_for, parse_mountinfo
from pitstop.sysroot import Sysroot
from pitstop.system.actions import FileWrite, RunCommand
from pitstop.system.settings import (
    SETTING_NAMES,
    Machine,
    Status,
    _summary,
    inspect_all,
)

CONTRACT_NAMES = ("governor", "energy-preference", "boost", "min-perf-pct", "cstate-latency",
                  "gpu-persistence", "gpu-power-limit", "swappiness", "thp", "readahead",
                  "shm")


def readings(root: Path, data: str | None = None) -> dict:
    m = Machine.probe(Sysroot.of(root), data)
    return {s.name: r for s, r in inspect_all(m)}


def test_setting_names_are_the_contract() -> None:
    # The doctor's remedies name these in `pitstop system apply --only NAME`.
    assert SETTING_NAMES == CONTRACT_NAMES


def test_workstation_every_setting_differs_with_exact_changes(machine) -> None:
    root = machine("workstation-4090")
    r = readings(root, "/data sets/imagenet")
    assert {n: x.status for n, x in r.items()} == dict.fromkeys(CONTRACT_NAMES, Status.DIFFERS)

    gov = r["governor"]
    assert gov.current == "powersave" and "intel_pstate" in gov.detail
    assert [c.action for c in gov.changes] == [
        FileWrite(f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor", b"performance\n")
        for i in range(4)]
    assert all(c.undo.data == b"powersave\n" for c in gov.changes)  # type: ignore[union-attr]

    epp = r["energy-preference"]
    assert len(epp.changes) == 8  # 4 EPP + 4 EPB
    assert {c.action.data for c in epp.changes} == {b"performance\n", b"0\n"}  # type: ignore[union-attr]

    cst = r["cstate-latency"]
    # only C6 (170 µs) is deeper than the 99 µs limit; POLL/C1/C1E stay enabled
    assert [c.action.path for c in cst.changes] == [  # type: ignore[union-attr]
        f"/sys/devices/system/cpu/cpu{i}/cpuidle/state3/disable" for i in range(4)]

    assert [c.action for c in r["gpu-persistence"].changes] == [
        RunCommand(("nvidia-smi", "-i", "0", "-pm", "1"))]
    pl = r["gpu-power-limit"].changes[0]
    assert pl.action == RunCommand(("nvidia-smi", "-i", "0", "-pl", "450"))
    assert pl.undo == RunCommand(("nvidia-smi", "-i", "0", "-pl", "350"))

    thp = r["thp"].changes[0]
    # the file reads as a menu; undo writes the selected word back
    assert thp.action.data == b"madvise\n" and thp.undo.data == b"never\n"  # type: ignore[union-attr]

    ra = r["readahead"]
    # /data sets is sda1, a partition: its readahead is the disk's (sda) queue
    assert ra.changes[0].action.path.endswith("/block/sda/queue/read_ahead_kb")  # type: ignore[union-attr]
    assert "partition sda1" in ra.current

    shm = r["shm"].changes[0]
    assert shm.action == RunCommand(("mount", "-o", "remount,size=32768000k", "/dev/shm"))
    assert shm.undo == RunCommand(("mount", "-o", "remount,size=1048576k", "/dev/shm"))
    assert not any(c.blocked for x in r.values() for c in x.changes)
    # the saved state is keyed by (setting, target): every change needs its own key
    keys = [(c.setting, c.target) for x in r.values() for c in x.changes]
    assert len(keys) == len(set(keys)) == 24


def test_readahead_of_the_root_partition_uses_its_nvme_disk(machine) -> None:
    r = readings(machine("workstation-4090"), "/home/me/data")
    path = r["readahead"].changes[0].action.path  # type: ignore[union-attr]
    assert path.endswith("/nvme0n1/queue/read_ahead_kb")


def test_readahead_needs_data(machine) -> None:
    r = readings(machine("workstation-4090"))
    assert r["readahead"].status is Status.UNKNOWN and "--data" in r["readahead"].detail


def test_cloud_vm_reports_what_it_cannot_change(machine) -> None:
    r = readings(machine("cloud-vm-nfs"), "/mnt/datasets/imagenet")
    for name in ("governor", "energy-preference", "boost", "min-perf-pct",
                 "gpu-persistence", "gpu-power-limit"):
        assert r[name].status is Status.UNSUPPORTED, name
        assert r[name].detail
    assert r["cstate-latency"].status is Status.OK  # haltpoll is 1 µs
    assert r["thp"].status is Status.OK  # always
    # tmpfs without size= is the kernel default, half of RAM
    assert r["shm"].status is Status.OK and r["shm"].current == "7.8 GiB"
    # NFS has no block device; its readahead is the backing device's (bdi)
    ra = r["readahead"]
    assert ra.changes[0].action == FileWrite("/sys/class/bdi/0:48/read_ahead_kb", b"4096\n")
    assert "nfs4" in ra.detail


def test_container_blocks_every_change_and_says_why(machine) -> None:
    r = readings(machine("docker-container"))
    changes = [c for x in r.values() for c in x.changes]
    assert changes and all(c.blocked for c in changes)
    gov = r["governor"].changes[0]
    assert "/sys is mounted read-only inside a docker container" in gov.blocked
    assert "/proc/sys is mounted read-only" in r["swappiness"].changes[0].blocked
    assert "--shm-size" in r["shm"].changes[0].blocked
    assert r["governor"].host_command == "cpupower frequency-set -g performance"


def test_missing_nvidia_smi_blocks_gpu_changes_with_install_hint(machine) -> None:
    root = machine("workstation-4090")
    (root / "usr/bin/nvidia-smi").unlink()
    r = readings(root)
    for name in ("gpu-persistence", "gpu-power-limit"):
        (change,) = r[name].changes
        assert "nvidia-smi not found" in change.blocked
        assert "apt install nvidia-smi" in change.blocked


def test_policy_shared_by_cpus_is_written_once(machine) -> None:
    root = machine("workstation-4090")
    # make cpu1 share cpu0's policy, as on CPUs with one clock domain per module
    link = root / "sys/devices/system/cpu/cpu1/cpufreq"
    link.unlink()
    link.symlink_to("../cpufreq/policy0")
    targets = [c.target for c in readings(root)["governor"].changes]
    assert targets == ["cpu0", "cpu2", "cpu3"]


def test_parse_mountinfo_escapes_and_shadowing() -> None:
    text = (
        "25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=65536k\n"
        "28 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n"
        "30 28 8:17 / /data rw - xfs /dev/sdb1 rw\n"
        "31 28 8:33 / /database rw - xfs /dev/sdc1 rw\n"
        "32 28 8:49 / /my\\040data rw - ext4 /dev/sdd1 rw\n"
        "33 24 0:27 / /dev/shm rw - tmpfs tmpfs rw,size=1024k\n"
        "garbage line\n"
    )
    mounts = parse_mountinfo(text)
    assert len(mounts) == 6
    assert mount_for("/database/x", mounts).source == "/dev/sdc1"  # type: ignore[union-attr]
    assert mount_for("/data/x", mounts).source == "/dev/sdb1"  # type: ignore[union-attr]
    assert mount_for("/my data/x", mounts).source == "/dev/sdd1"  # type: ignore[union-attr]
    assert mount_for("/home", mounts).source == "/dev/sda2"  # type: ignore[union-attr]
    # the later /dev/shm mount shadows the earlier one
    assert mount_for("/dev/shm", mounts).super_option("size") == "1024k"  # type: ignore[union-attr]


def test_small_helpers() -> None:
    assert menu_choice("always madvise [never]") == "never"
    assert menu_choice("[always] madvise never") == "always"
    assert menu_choice("none") == "none" and menu_choice("") is None
    assert parse_size("65536k") == 64 << 20 and parse_size("2T") == 2 << 40
    assert parse_size("50%") is None
    assert _summary({"cpu0": "a", "cpu1": "a", "cpu2": "b", "cpu5": "a"}) == \
        "a (cpu0-1,5), b (cpu2)"
    assert _summary({"cpu0": "a", "cpu1": "a"}) == "a"


def test_readahead_btrfs_overlay_and_dm(machine) -> None:
    root = machine("workstation-4090")
    mountinfo = root / "proc/self/mountinfo"
    mountinfo.write_text(mountinfo.read_text() + (
        "80 28 0:33 / /btr rw - btrfs /dev/sda1 rw,ssd,subvol=/\n"
        "81 28 0:34 / /ovl rw - overlay overlay rw,lowerdir=/a\n"
        "82 28 253:0 / /lvm rw - ext4 /dev/mapper/vg-data rw\n"))
    # btrfs reports an anonymous 0:NN; its source names the partition, found as the
    # kernel lists it: /sys/class/block/NAME is a link into the device tree
    (root / "sys/class/block").mkdir(parents=True)
    (root / "sys/class/block/sda1").symlink_to(os.readlink(root / "sys/dev/block/8:1"))
    dm = root / "sys/devices/virtual/block/dm-0"
    (dm / "queue").mkdir(parents=True)
    (dm / "queue/read_ahead_kb").write_text("8192\n")
    (root / "sys/dev/block/253:0").symlink_to("../../devices/virtual/block/dm-0")

    r = readings(root, "/btr/x")["readahead"]
    assert r.changes[0].action.path.endswith("/block/sda/queue/read_ahead_kb")  # type: ignore[union-attr]
    r = readings(root, "/ovl/x")["readahead"]
    assert r.status is Status.UNSUPPORTED and "container" in r.detail
    r = readings(root, "/lvm/x")["readahead"]
    assert r.status is Status.OK and r.current == "8192 KiB on /dev/dm-0"


def test_per_policy_boost_of_amd_pstate_agrees_with_the_doctor(tmp_path: Path) -> None:
    # amd-pstate: no global switch, one cpufreq/boost per policy (cpuN/cpufreq links to
    # policyN, as the kernel lays it out).
    from pitstop.doctor.checks import run_checks
    from pitstop.doctor.facts import collect
    from pitstop.doctor.probes import ProbeContext

    cpu = tmp_path / "sys/devices/system/cpu"
    (cpu / "online").parent.mkdir(parents=True)
    (cpu / "online").write_text("0-1\n")
    for n, value in ((0, "0"), (1, "1")):
        policy = cpu / f"cpufreq/policy{n}"
        policy.mkdir(parents=True)
        (policy / "boost").write_text(value + "\n")
        (policy / "scaling_governor").write_text("performance\n")
        (cpu / f"cpu{n}").mkdir()
        (cpu / f"cpu{n}/cpufreq").symlink_to(f"../cpufreq/policy{n}")
    boost = readings(tmp_path)["boost"]
    assert boost.status is Status.DIFFERS
    assert [c.action for c in boost.changes] == [
        FileWrite("/sys/devices/system/cpu/cpu0/cpufreq/boost", b"1\n")]
    assert "policy*/boost" in boost.host_command

    facts = collect(ProbeContext(sysroot=Sysroot.of(tmp_path), data_path="/", environ={}),
                    only=["cpu", "platform"])
    dr042 = next(r for r in run_checks(facts) if r.code == "DR042")
    assert dr042.status == "warning" and dr042.remedy is not None
    assert "policy*/boost" in dr042.remedy.text
    assert "pitstop system apply --only boost" in dr042.remedy.text
