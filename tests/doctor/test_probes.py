"""The probes: parsers of the kernel's file formats, block-device resolution on small
trees, the live machine, and the torch subprocess."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from doctor_helpers import load_generator

from pitstop.doctor.facts import collect
from pitstop.doctor.probes import ProbeContext, cpu, environment, gpu, iotest, memory, storage
from pitstop.doctor.probes.platform import parse_os_release
from pitstop.doctor.probes.python import _pins, parse_torch_version_py, torch_runtime
from pitstop.hostinfo.blockdev import disk_medium, transport
from pitstop.hostinfo.kernel_text import menu_choice, parse_meminfo, parse_size
from pitstop.hostinfo.mounts import mount_for, parse_mountinfo
from pitstop.sysroot import Sysroot

gen = load_generator()


def ctx_for(root: Path, data: str = "/data") -> ProbeContext:
    return ProbeContext(sysroot=Sysroot.of(root), data_path=data, environ={})


def test_parsers() -> None:
    assert cpu.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert cpu.parse_cpu_list("") == []
    assert menu_choice("always [madvise] never") == "madvise"
    assert parse_size("65536k") == 64 << 20
    assert parse_size("8g") == 8 << 30
    assert parse_size("50%") is None
    mi = parse_meminfo("MemTotal:  16 kB\nHugePages_Total: 4\n")
    assert mi == {"MemTotal": 16384, "HugePages_Total": 4}
    assert gpu.link_gen("16.0 GT/s PCIe") == 4 and gpu.link_gen("8.0 GT/s") == 3
    assert gpu.link_gen("Unknown") is None
    limits = ("Limit                     Soft Limit           Hard Limit           Units\n"
              "Max locked memory         65536                unlimited            bytes\n")
    assert memory.parse_limit(limits, "Max locked memory") == (65536, None)
    osr = parse_os_release('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\n# c\n')
    assert osr == {"PRETTY_NAME": "Debian GNU/Linux 13 (trixie)", "ID": "debian"}


def test_torch_version_py_and_pins() -> None:
    text = ("__version__ = '2.7.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
            "git_version = 'abc'\nhip: Optional[str] = None\n")
    v = parse_torch_version_py(text)
    assert v["__version__"] == "2.7.0+cu128" and v["cuda"] == "12.8" and v["hip"] is None
    pins = _pins(['nvidia-cudnn-cu12==9.7.1.26; platform_system == "Linux"', "filelock",
                  "nvidia_nccl_cu12 ==2.26.2", "sympy>=1.13.3", "nvidia-cublas-cu12>=12"])
    assert pins == {"nvidia-cudnn-cu12": "9.7.1.26", "nvidia-nccl-cu12": "2.26.2"}


def test_mountinfo_escapes_and_longest_prefix() -> None:
    mounts = parse_mountinfo(
        "27 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "30 27 0:50 / /mnt/my\\040data rw - fuse.sshfs u@h:/d rw\n"
        "31 27 0:51 / /mnt rw - nfs4 srv:/x rw\n")
    assert mounts[1].mount_point == "/mnt/my data"

    def fstype(path: str) -> str | None:
        m = mount_for(path, mounts)
        return m.fstype if m else None

    assert fstype("/mnt/my data/train") == "fuse.sshfs"
    assert fstype("/mnt/other") == "nfs4" and fstype("/mnt") == "nfs4"
    assert fstype("/home") == "ext4"


@pytest.mark.parametrize(("path", "name", "kind"), [
    ("/sys/devices/pci0000:00/0000:00:02.4/0000:02:00.0/nvme/nvme0/nvme0n1", "nvme0n1", "nvme"),
    ("/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb",
     "sdb", "usb"),
    ("/sys/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda", "sda",
     "sata"),
    ("/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda", "vda", "virtio"),
    ("/sys/devices/virtual/block/zram0", "zram0", "ram"),
    ("/sys/devices/platform/host3/session1/target3:0:0/3:0:0:0/block/sdb", "sdb", "iscsi"),
    ("/sys/devices/platform/host10/target10:0:0/10:0:0:0/block/sdc", "sdc", "scsi"),
    ("/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0/host7/rport-7:0-0/target7:0:0/"
     "7:0:0:1/block/sdd", "sdd", "fc"),
    ("/sys/devices/virtual/block/rbd0", "rbd0", "rbd"),
    ("/sys/devices/virtual/nvme-fabrics/ctl/nvme1/nvme1n1", "nvme1n1", "nvme-of"),
])
def test_transport(path: str, name: str, kind: str) -> None:
    assert transport(path, name) == kind


def test_md_raid_and_loop_file(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    gen.nvme_disk(t)
    md = "/sys/devices/virtual/block/md0"
    t.file(f"{md}/md/level", "raid1")
    disk = "/sys/devices/pci0000:00/0000:00:02.4/0000:02:00.0/nvme/nvme0/nvme0n1"
    t.link(f"{md}/slaves/nvme0n1p1", f"{disk}/nvme0n1p1")
    t.link(f"{md}/slaves/nvme0n1p2", f"{disk}/nvme0n1p2")
    t.link("/sys/dev/block/9:0", md)
    loop = "/sys/devices/virtual/block/loop3"
    t.file(f"{loop}/loop/backing_file", "/srv/images/dataset.squashfs")
    t.link("/sys/dev/block/7:3", loop)
    gen.mountinfo(t, ["9:0 / /srv rw,relatime - xfs /dev/md0 rw",
                      "7:3 / /data ro,relatime - squashfs /dev/loop3 ro"])
    facts = storage.probe(ctx_for(tmp_path, "/data/train"))
    kinds = [n["kind"] for n in facts["chain"]]
    assert kinds == ["loop", "md", "partition", "disk", "partition", "disk"]
    assert facts["chain"][0]["backing_file"] == "/srv/images/dataset.squashfs"
    assert facts["chain"][1]["raid_level"] == "raid1"
    assert [d["transport"] for d in facts["disks"]] == ["nvme", "nvme"]
    assert facts["statvfs_error"]


def test_btrfs_anonymous_device_uses_the_source(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    gen.nvme_disk(t)
    gen.mountinfo(t, ["0:33 /@home /home rw - btrfs /dev/nvme0n1p2 rw,ssd"])
    facts = storage.probe(ctx_for(tmp_path, "/home/user/data"))
    assert [d["name"] for d in facts["disks"]] == ["nvme0n1"]


def test_cgroup_v1_quota_and_affinity(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    t.file("/sys/devices/system/cpu/online", "0-63")
    t.file("/proc/self/status", "Cpus_allowed_list:\t0-15\n")
    t.file("/proc/self/cgroup", "4:cpu,cpuacct:/slurm/uid_1000/job_42\n0::/\n")
    t.file("/sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_42/cpu.cfs_quota_us", "800000")
    t.file("/sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_42/cpu.cfs_period_us", "100000")
    facts = cpu.probe(ctx_for(tmp_path))
    assert facts["online"] == 64 and len(facts["affinity"]) == 16
    assert facts["cgroup"] == {"version": 1, "path": "/slurm/uid_1000/job_42",
                               "quota_us": 800000, "period_us": 100000, "cpus": 8.0}
    assert facts["cpufreq_present"] is False


def test_environment_keeps_only_relevant_and_no_secrets() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO", "HOME": "/root",
           "AWS_SECRET_ACCESS_KEY": "x", "NCCL_IB_KEY_SECRET": "y", "TORCH_TOKEN": "z",
           "OMP_NUM_THREADS": "4", "PYTHONPATH": "/x"}
    assert environment.relevant(env) == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO",
                                         "OMP_NUM_THREADS": "4"}


def test_shm_from_proc_mounts_when_no_mountinfo(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    t.file("/proc/meminfo", "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n")
    t.file("/proc/mounts", "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0")
    facts = memory.probe(ctx_for(tmp_path))
    assert facts["shm"]["size_bytes"] == 64 << 20 and facts["shm"]["source"] == "/proc/mounts"


def test_shm_size_as_a_share_of_ram_is_read_by_doctor_and_system(tmp_path: Path) -> None:
    from pitstop.system.settings import Machine, shm_size_bytes

    t = gen.Tree(tmp_path)
    t.file("/proc/meminfo", "MemTotal: 8388608 kB\nMemAvailable: 524288 kB\n")
    t.file("/proc/self/mountinfo",
           "25 24 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=25%\n")
    facts = memory.probe(ctx_for(tmp_path))
    assert facts["shm"]["size_bytes"] == 2 << 30 and facts["shm"]["size_option"] == "25%"
    size, _ = shm_size_bytes(Machine.probe(Sysroot.of(tmp_path), gpus=False))
    assert size == 2 << 30


def test_a_bad_recording_fails_only_its_probe(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    t.file("/pitstop-recorded/python.json", "{not json")
    t.file("/data/.keep", "")
    facts = collect(ctx_for(tmp_path))
    assert "not valid JSON" in facts["python"]["error"]
    assert "error" in facts["torch"]
    assert facts["nvml"]["available"] is False  # the other probes still ran
    assert set(facts["meta"]["probe_ms"]) >= {"cpu", "memory", "storage", "container"}


def test_live_machine_probes_do_not_fail() -> None:
    facts = collect(ProbeContext(sysroot=Sysroot.of("/"), data_path=os.getcwd(),
                                 environ=os.environ))
    for name in ("platform", "pci", "kernel_modules", "nvml", "python", "torch", "cpu",
                 "memory", "storage", "container", "environment"):
        assert "error" not in facts[name], (name, facts[name])
    assert facts["python"]["version"].startswith(f"{sys.version_info[0]}.")
    if not facts["nvml"]["available"]:
        assert facts["nvml"]["reason"]


def test_io_reads_existing_files_without_changing_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "a").mkdir(parents=True)
    blobs = {}
    for i in range(3):
        p = data / "a" / f"part{i}.bin"
        p.write_bytes(os.urandom(24 << 20))
        blobs[p] = (p.stat().st_mtime_ns, p.read_bytes()[:4096])
    out = iotest.run_io_test(str(data), seconds=0.4)
    assert out["measured"] and "temp_file" not in out
    assert out["files_sampled"] == 3
    for res in out["results"]:
        assert res["reads"] > 0 and res["iops"] > 0
    for p, (mtime, head) in blobs.items():
        assert p.stat().st_mtime_ns == mtime and p.read_bytes()[:4096] == head
    assert sorted(x.name for x in (data / "a").iterdir()) == ["part0.bin", "part1.bin",
                                                             "part2.bin"]


def test_torch_runtime_subprocess_on_this_machine() -> None:
    pytest.importorskip("torch")
    rt = torch_runtime(sys.executable)
    assert "error" not in rt and "import_error" not in rt, rt
    assert isinstance(rt["num_threads"], int) and rt["num_threads"] >= 1
    assert isinstance(rt["cuda_available"], bool)


def test_cgroup_v2_limit_on_an_ancestor(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    t.file("/sys/devices/system/cpu/online", "0-31")
    t.file("/proc/self/cgroup", "0::/batch.slice/job-7.scope")
    t.file("/sys/fs/cgroup/batch.slice/cpu.max", "200000 100000")
    t.file("/sys/fs/cgroup/batch.slice/job-7.scope/cpu.max", "max 100000")
    t.file("/sys/fs/cgroup/batch.slice/memory.max", str(8 << 30))
    t.file("/sys/fs/cgroup/batch.slice/job-7.scope/memory.max", "max")
    t.file("/sys/fs/cgroup/batch.slice/job-7.scope/memory.current", str(1 << 30))
    t.file("/proc/meminfo", "MemTotal: 67108864 kB\nMemAvailable: 60000000 kB\n")
    q = cpu.probe(ctx_for(tmp_path))["cgroup"]
    assert q["cpus"] == 2.0 and q["limited_at"] == "/batch.slice"
    m = memory.probe(ctx_for(tmp_path))["cgroup"]
    assert m == {"version": 2, "limit_bytes": 8 << 30, "usage_bytes": 1 << 30}


def test_ebs_volume_is_a_network_block_device(tmp_path: Path) -> None:
    t = gen.Tree(tmp_path)
    gen.nvme_disk(t, model="Amazon Elastic Block Store")
    gen.mountinfo(t, ["259:1 / / rw - xfs /dev/nvme0n1p1 rw"])
    facts = storage.probe(ctx_for(tmp_path, "/data"))
    assert facts["disks"][0]["transport"] == "nvme"
    m = disk_medium(facts["disks"][0])
    assert (m.kind, m.label) == ("network-volume", "AWS EBS volume")


# How each kind of disk shows itself in sysfs (path below /sys/devices, vendor, model,
# queue/rotational), and what it is. Sources: the kernel's sysfs layout (iscsiadm(8) for
# the iSCSI session path, drivers/block/rbd.c for rbdN), AWS / GCP / Azure documentation
# of the NVMe and SCSI model strings their volumes report.
@pytest.mark.parametrize(("path", "name", "vendor", "model", "rot", "kind", "label"), [
    ("/sys/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda", "sda",
     "ATA", "ST8000DM004-2U91", 1, "hdd", "spinning disk"),
    ("/sys/devices/pci0000:00/0000:00:1f.0/nvme/nvme1/nvme1n1", "nvme1n1", None,
     "Amazon Elastic Block Store", 0, "network-volume", "AWS EBS volume"),
    ("/sys/devices/pci0000:00/0000:00:1f.0/nvme/nvme2/nvme2n1", "nvme2n1", None,
     "Amazon EC2 NVMe Instance Storage", 0, "ssd", "instance-local NVMe SSD"),
    ("/sys/devices/pci0000:00/0000:00:03.0/virtio0/host0/target0:0:1/0:0:1:0/block/sda", "sda",
     "Google", "PersistentDisk", 1, "network-volume", "GCP Persistent Disk"),
    ("/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1", "nvme0n1", None, "nvme_card-pd",
     0, "network-volume", "GCP Persistent Disk"),
    ("/sys/devices/pci0000:00/0000:00:05.0/nvme/nvme1/nvme1n1", "nvme1n1", None, "nvme_card0",
     0, "ssd", "instance-local NVMe SSD"),
    ("/sys/devices/virtual/block/rbd0", "rbd0", None, None, 0, "network-volume",
     "Ceph RBD volume"),
    ("/sys/devices/virtual/block/nbd0", "nbd0", None, None, 0, "network-volume",
     "network block device (NBD)"),
    ("/sys/devices/platform/host3/session1/target3:0:0/3:0:0:0/block/sdb", "sdb", "LIO-ORG",
     "datastore", 1, "network-volume", "iSCSI LUN"),
    ("/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda", "vda", None, None, 1, "virtual",
     "virtual disk"),
    ("/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/f8b3781b-1e82-4818-a1c3-"
     "63d806ec15bb/host0/target0:0:0/0:0:0:0/block/sda", "sda", "Msft", "Virtual Disk", 1,
     "virtual", "virtual disk"),
    ("/sys/devices/pci0000:00/0000:00:10.0/host2/target2:0:0/2:0:0:0/block/sda", "sda",
     "VMware", "Virtual disk", 1, "virtual", "virtual disk"),
    ("/sys/devices/vbd-51712/block/xvda", "xvda", None, None, 1, "virtual", "virtual disk"),
    ("/sys/devices/pci0000:00/0000:00:02.4/0000:02:00.0/nvme/nvme0/nvme0n1", "nvme0n1", None,
     "Samsung SSD 990 PRO 2TB", 0, "ssd", "SSD"),
    ("/sys/devices/virtual/nvme-fabrics/ctl/nvme1/nvme1n1", "nvme1n1", None, "Linux", 0,
     "network-volume", "NVMe over Fabrics volume"),
])
def test_disk_medium(path: str, name: str, vendor: str | None, model: str | None, rot: int,
                     kind: str, label: str) -> None:
    disk = {"name": name, "transport": transport(path, name), "vendor": vendor, "model": model,
            "rotational": rot}
    m = disk_medium(disk)
    assert (m.kind, m.label) == (kind, label), m


def test_container_detection_is_shared_and_lists_every_signal(tmp_path: Path) -> None:
    from pitstop.hostinfo.container import detect_container

    def tree(name: str, files: dict[str, str]) -> Sysroot:
        root = tmp_path / name
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        root.mkdir(exist_ok=True)
        return Sysroot.of(root)

    host = detect_container(tree("host", {"proc/1/cgroup": "0::/init.scope\n"}), {})
    assert host.runtime is None and not host.in_container and host.signals == []
    docker = detect_container(tree("docker", {".dockerenv": ""}), {})
    assert docker.runtime == "docker" and docker.signals == ["/.dockerenv exists"]
    k8s = detect_container(tree("k8s", {
        ".dockerenv": "", "var/run/secrets/kubernetes.io/serviceaccount/token": "x",
        "proc/self/cgroup": "0::/kubepods/burstable/pod1/abc\n"}), {})
    assert k8s.runtime == "kubernetes" and k8s.kubernetes and len(k8s.signals) == 3
    nspawn = detect_container(tree("nspawn", {"run/systemd/container": "systemd-nspawn\n"}), {})
    assert nspawn.runtime == "systemd-nspawn"
    podman = detect_container(tree("podman", {}), {"container": "podman"})
    assert podman.runtime == "podman" and podman.in_container


def test_recorded_torch_runtime_stands_in_for_the_import(tmp_path: Path) -> None:
    from pitstop.doctor.probes import python as pyprobe

    t = gen.Tree(tmp_path)
    gen.python_env(t, py="3.11.2", glibc="2.36", wheel=gen.TORCH_251)
    ctx = ProbeContext(sysroot=Sysroot.of(tmp_path), data_path="/", environ={},
                       import_torch=True)
    out = pyprobe.probe_torch(ctx)
    # --torch under a sysroot never imports this machine's torch
    assert "runtime" not in out and "torch_runtime.json" in out["runtime_missing"]
    t.json("/pitstop-recorded/torch_runtime.json", {"num_threads": 3, "cuda_available": False})
    ctx = ProbeContext(sysroot=Sysroot.of(tmp_path), data_path="/", environ={})
    out = pyprobe.probe_torch(ctx)
    assert out["runtime"] == {"num_threads": 3, "cuda_available": False}
    assert out["runtime_recorded"] is True


def test_the_architecture_for_markers(tmp_path: Path) -> None:
    from pitstop.doctor.probes import python as pyprobe

    t = gen.Tree(tmp_path)
    gen.python_env(t, py="3.12.3", glibc="2.39", wheel=gen.TORCH_280)
    ctx = ctx_for(tmp_path)
    out = pyprobe.probe_torch(ctx)
    env = out["marker_environment"]
    assert env["platform_machine"] == "x86_64"
    assert env["machine_source"] == "the WHEEL tag of torch-2.8.0.dist-info"
    assert env["python_version"] == "3.12" and len(out["pins"]) == 14
    assert len(out["requires_dist"]) == len(gen.TORCH_280.requires)
    gen.python_env(t, py="3.12.3", glibc="2.39", wheel=gen.TORCH_280, machine="aarch64")
    out = pyprobe.probe_torch(ctx_for(tmp_path))
    assert out["marker_environment"]["platform_machine"] == "aarch64" and out["pins"] == {}


def test_nvme_over_tcp_behind_a_multipath_head_is_a_network_volume(tmp_path: Path) -> None:
    # With native NVMe multipath (the Debian and Ubuntu kernels' default) a fabrics
    # namespace is a head below nvme-subsystem, not below nvme-fabrics: its controllers'
    # transport file says how it is reached (drivers/nvme/host/core.c, "transport").
    t = gen.Tree(tmp_path)
    head = "/sys/devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1"
    subsys = "/sys/devices/virtual/nvme-subsystem/nvme-subsys1"
    ctrl = "/sys/devices/virtual/nvme-fabrics/ctl/nvme1"
    t.file(f"{head}/queue/rotational", "0")
    t.file(f"{head}/queue/read_ahead_kb", "128")
    t.file(f"{head}/size", str(2 << 31))
    t.link(f"{head}/device", subsys)
    t.file(f"{subsys}/model", "Linux")
    t.link(f"{subsys}/nvme1", ctrl)
    t.file(f"{ctrl}/transport", "tcp")
    t.link("/sys/dev/block/259:8", head)
    gen.mountinfo(t, ["259:8 / /data rw - xfs /dev/nvme1n1 rw"])
    disk = storage.probe(ctx_for(tmp_path, "/data"))["disks"][0]
    assert disk["transport"] == "nvme-of" and disk["nvme_transport"] == "tcp"
    m = disk_medium(disk)
    assert (m.kind, m.label) == ("network-volume", "NVMe over Fabrics volume (tcp)")
    # A local PCIe drive keeps its kind, and says so.
    t.file(f"{ctrl}/transport", "pcie")
    disk = storage.probe(ctx_for(tmp_path, "/data"))["disks"][0]
    assert disk["transport"] == "nvme" and disk_medium(disk).kind == "ssd"
