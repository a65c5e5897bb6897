"""Regenerate the fake machine trees in this directory (run from the repo root:
``.venv/bin/python tests/system/machines/make_machines.py``).

The trees are hand-made: every file follows the format the kernel documents for it
(Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, cpuidle.rst,
admin-guide/mm/transhuge.rst, block/queue-sysfs.rst, proc(5) for mountinfo/meminfo/swaps),
with values typical of the machine each one imitates. ``pitstop-recorded/nvml.json``
(the doctor's recording format) holds the NVML
fields pitstop reads (names of pitstop.telemetry.nvml.GPU_FIELDS), and ``usr/bin`` holds
fake ``nvidia-smi``/``mount`` that change those files the way the real tools change the
machine (see fake_tools/). Each tree's ORIGIN.txt says what it stands for.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS = HERE / "fake_tools"


def put(root: Path, rel: str, text: str) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def link(root: Path, rel: str, target: str) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def tool(root: Path, name: str) -> None:
    dst = root / "usr/bin" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TOOLS / name, dst)
    dst.chmod(0o755)


def intel_cpus(root: Path, n: int, governor: str, epp: str, epb: str) -> None:
    cpu = "/sys/devices/system/cpu"
    for i in range(n):
        pol = f"{cpu}/cpufreq/policy{i}"
        put(root, f"{pol}/scaling_governor", governor + "\n")
        put(root, f"{pol}/scaling_driver", "intel_pstate\n")
        put(root, f"{pol}/scaling_available_governors", "performance powersave\n")
        put(root, f"{pol}/energy_performance_preference", epp + "\n")
        put(root, f"{pol}/energy_performance_available_preferences",
            "default performance balance_performance balance_power power \n")
        link(root, f"{cpu}/cpu{i}/cpufreq", f"../cpufreq/policy{i}")
        put(root, f"{cpu}/cpu{i}/power/energy_perf_bias", epb + "\n")
        for s, (name, lat) in enumerate([("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 170)]):
            base = f"{cpu}/cpu{i}/cpuidle/state{s}"
            put(root, f"{base}/name", name + "\n")
            put(root, f"{base}/latency", f"{lat}\n")
            put(root, f"{base}/disable", "0\n")
    put(root, f"{cpu}/online", f"0-{n - 1}\n")
    put(root, f"{cpu}/intel_pstate/status", "active\n")
    put(root, f"{cpu}/intel_pstate/no_turbo", "1\n")
    put(root, f"{cpu}/intel_pstate/min_perf_pct", "8\n")
    put(root, f"{cpu}/intel_pstate/max_perf_pct", "100\n")


def gpus(root: Path, entries: list[dict]) -> None:
    doc = {"source": "hand-made: NVML field values of the GPU named, as pitstop reads them",
           "available": True, "gpus": entries}
    (root / "pitstop-recorded").mkdir(parents=True, exist_ok=True)
    (root / "pitstop-recorded/nvml.json").write_text(json.dumps(doc, indent=2) + "\n")


def workstation(root: Path) -> None:
    put(root, "ORIGIN.txt",
        "A desktop training workstation (Intel Core i9, 4 CPUs shown, RTX 4090) as\n"
        "Debian 12 sets it up out of the box, plus a power-saving GPU limit.\n"
        "Hand-made from the kernel's documented formats by make_machines.py.\n"
        "Everything pitstop system changes is off its training value here.\n")
    intel_cpus(root, 4, "powersave", "balance_performance", "6")
    put(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    put(root, "/proc/sys/vm/swappiness", "60\n")
    put(root, "/proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/nvme0n1p3                          partition\t8388604\t\t0\t\t-2\n")
    put(root, "/proc/meminfo", "MemTotal:       65536000 kB\nMemFree:        60000000 kB\n"
        "MemAvailable:   61000000 kB\nSwapTotal:       8388604 kB\nSwapFree:        8388604 kB\n")
    put(root, "/proc/self/mountinfo",
        "21 28 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw\n"
        "28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"
        "26 23 0:25 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=1048576k,inode64\n"
        "70 28 8:1 / /data\\040sets rw,relatime shared:40 - ext4 /dev/sda1 rw\n")
    # nvme0n1p2 (root) and sda1 (the dataset disk, a partition of a spinning disk)
    pci = "/sys/devices/pci0000:00"
    nvme = f"{pci}/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1"
    sda = f"{pci}/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
    put(root, f"{nvme}/queue/read_ahead_kb", "128\n")
    put(root, f"{nvme}/nvme0n1p2/partition", "2\n")
    put(root, f"{sda}/queue/read_ahead_kb", "128\n")
    put(root, f"{sda}/queue/rotational", "1\n")
    put(root, f"{sda}/sda1/partition", "1\n")
    link(root, "/sys/dev/block/259:2",
         "../../devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1/nvme0n1p2")
    link(root, "/sys/dev/block/8:1",
         "../../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda1")
    link(root, "/sys/block/sda", "../devices/pci0000:00/0000:00:17.0/ata1/host0/"
         "target0:0:0/0:0:0:0/block/sda")
    gpus(root, [{"index": 0, "name": "NVIDIA GeForce RTX 4090",
                 "pci_bus_id": "00000000:01:00.0", "persistence_mode": False,
                 "power_limit_w": 350.0, "power_default_limit_w": 450.0,
                 "power_max_limit_w": 600.0}])
    tool(root, "nvidia-smi")
    tool(root, "mount")


def container(root: Path) -> None:
    put(root, "ORIGIN.txt",
        "An unprivileged Docker container (docker run --gpus all without --privileged)\n"
        "on an Intel host: /sys is mounted read-only, /dev/shm is Docker's 64 MiB.\n"
        "Hand-made from the kernel's documented formats and Docker's defaults by\n"
        "make_machines.py.\n")
    put(root, "/.dockerenv", "")
    intel_cpus(root, 2, "powersave", "balance_performance", "6")
    put(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    put(root, "/proc/sys/vm/swappiness", "60\n")
    put(root, "/proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/swap.img                               file\t\t2097148\t\t0\t\t-2\n")
    put(root, "/proc/meminfo", "MemTotal:       32768000 kB\nMemAvailable:   30000000 kB\n"
        "SwapTotal:       2097148 kB\nSwapFree:        2097148 kB\n")
    put(root, "/proc/1/cgroup", "0::/\n")
    put(root, "/proc/self/mountinfo",
        "612 540 0:52 / / rw,relatime master:313 - overlay overlay rw,lowerdir=/var/lib/"
        "docker/overlay2/l/ABC,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/"
        "docker/overlay2/x/work\n"
        "613 612 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "614 613 0:55 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "617 612 0:59 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
        "623 616 0:54 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,"
        "inode64\n")
    tool(root, "mount")


def cloud_vm(root: Path) -> None:
    put(root, "ORIGIN.txt",
        "A cloud VM (KVM guest) with its dataset on NFS: no cpufreq, only the\n"
        "haltpoll idle state, no GPU. Hand-made from the kernel's documented formats\n"
        "by make_machines.py.\n")
    cpu = "/sys/devices/system/cpu"
    for i in range(2):
        for s, (name, lat) in enumerate([("POLL", 0), ("haltpoll idle", 1)]):
            put(root, f"{cpu}/cpu{i}/cpuidle/state{s}/name", name + "\n")
            put(root, f"{cpu}/cpu{i}/cpuidle/state{s}/latency", f"{lat}\n")
            put(root, f"{cpu}/cpu{i}/cpuidle/state{s}/disable", "0\n")
    put(root, "/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    put(root, "/proc/sys/vm/swappiness", "60\n")
    put(root, "/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
    put(root, "/proc/meminfo", "MemTotal:       16384000 kB\nMemAvailable:   15000000 kB\n"
        "SwapTotal:             0 kB\nSwapFree:              0 kB\n")
    put(root, "/proc/self/mountinfo",
        "28 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n"
        "25 24 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64\n"
        "90 28 0:48 / /mnt/datasets rw,relatime - nfs4 10.0.0.5:/export/datasets "
        "rw,vers=4.2,rsize=1048576,wsize=1048576\n")
    put(root, "/sys/class/bdi/0:48/read_ahead_kb", "128\n")


MACHINES = {"workstation-4090": workstation, "docker-container": container,
            "cloud-vm-nfs": cloud_vm}

if __name__ == "__main__":
    for name, make in MACHINES.items():
        root = HERE / name
        if root.exists():
            shutil.rmtree(root)
        root.mkdir()
        make(root)
        print(f"wrote {root}")
