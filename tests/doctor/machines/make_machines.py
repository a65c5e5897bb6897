"""Write the fake machines used by the doctor tests (``python make_machines.py [OUTDIR]``).

Each machine is a small tree of the files the doctor's probes read (``/sys``, ``/proc``,
``/etc``, ``/dev``) plus recordings of what does not live in files
(``pitstop-recorded/nvml.json``, ``python.json``, ``statvfs.json``). The trees are
hand-made from the kernel's documented formats of these files (Documentation/ABI for
sysfs, proc(5) for /proc); the NVML values are described in each machine's ORIGIN.txt.
The committed trees next to this script are its output; a test checks they match.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# --- NVML snapshots ------------------------------------------------------------------
# RTX 4090: NVIDIA's published board specifications (AD102, PCI device 0x2684, 24 GB
# GDDR6X = 24564 MiB usable, TGP 450 W default limit, 600 W maximum on the Founders
# Edition, PCIe Gen4 x16, compute capability 8.9). Clock and temperature thresholds are
# illustrative values in the range nvidia-smi -q prints for AD102 boards (boards differ).
RTX4090 = {
    "name": "NVIDIA GeForce RTX 4090",
    "memory_total_bytes": 25757220864,
    "temperature_slowdown_c": 90,
    "temperature_shutdown_c": 95,
    "power_default_limit_w": 450.0,
    "power_max_limit_w": 600.0,
    "clock_sm_max_mhz": 3120,
    "clock_mem_max_mhz": 10501,
    "pcie_link_gen_device_max": 4,
    "compute_capability": [8, 9],
    "ecc_mode_current": {"unavailable": "Not Supported"},
    "retired_pages_pending": {"unavailable": "Not Supported"},
    "remapped_rows": {"unavailable": "Not Supported"},
}
# A100-SXM4-40GB: values as printed by `nvidia-smi -q` in public bug reports
# (github.com/NVIDIA/nvidia-docker/issues/1648: default/max power limit 400 W, max SM
# clock 1410 MHz, memory clock 1215 MHz; NVIDIA/CUDALibrarySamples/issues/104 for the
# A100 field layout) and NVIDIA's A100 datasheet (40 GB HBM2, PCIe Gen4 x16, CC 8.0).
A100 = {
    "name": "NVIDIA A100-SXM4-40GB",
    "memory_total_bytes": 42949672960,
    "temperature_slowdown_c": 92,
    "temperature_shutdown_c": 95,
    "power_default_limit_w": 400.0,
    "power_max_limit_w": 400.0,
    "clock_sm_max_mhz": 1410,
    "clock_mem_max_mhz": 1215,
    "pcie_link_gen_device_max": 4,
    "compute_capability": [8, 0],
    "ecc_mode_current": True,
    "retired_pages_pending": {"unavailable": "Not Supported"},
    "remapped_rows": [0, 0, 0, 0],
}


def gpu(base: dict, index: int, bus: str, **state: object) -> dict:
    snap = {"index": index, "uuid": f"GPU-00000000-0000-0000-0000-00000000000{index}",
            "pci_bus_id": f"0000{bus}", **base}
    snap.update({
        "memory_used_bytes": 0, "utilization_gpu_pct": 0, "utilization_memory_pct": 0,
        "temperature_c": 38, "power_draw_w": 18.5, "power_limit_w": base["power_default_limit_w"],
        "clock_sm_mhz": 210, "clock_mem_mhz": 405, "clocks_event_reasons": 1,
        "pcie_link_gen": 1, "pcie_link_gen_max": 4, "pcie_link_width": 16,
        "pcie_link_width_max": 16, "pcie_tx_kbps": 0, "pcie_rx_kbps": 0,
        "pcie_replay_counter": 0, "persistence_mode": True, "processes": [],
    })
    snap.update(state)
    return snap


def nvml(driver: str, cuda: str, gpus: list[dict], origin: str) -> dict:
    return {"_origin": origin, "available": True, "self_pid": 999999,
            "system": {"driver_version": driver, "cuda_driver_version": cuda,
                       "nvml_version": f"12.{driver}", "device_count": len(gpus)},
            "gpus": gpus}


# --- tree writer ---------------------------------------------------------------------
class Tree:
    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, path: str, text: str = "") -> None:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text if text.endswith("\n") or not text else text + "\n")

    def link(self, path: str, target: str) -> None:
        """A relative symlink at machine path ``path`` pointing to machine path ``target``."""
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(target, os.path.dirname(path))
        if p.is_symlink():
            p.unlink()
        p.symlink_to(rel)

    def json(self, path: str, obj: object) -> None:
        self.file(path, json.dumps(obj, indent=2))


def os_release(t: Tree, pretty: str, os_id: str, version: str, codename: str) -> None:
    t.file("/etc/os-release", f'PRETTY_NAME="{pretty}"\nNAME="{pretty.split(" ")[0]}"\n'
           f'VERSION_ID="{version}"\nVERSION_CODENAME={codename}\nID={os_id}\n')


def cpus(t: Tree, n: int, *, governor: str | None, epp: str | None, driver: str,
         boost: tuple[str, int] | None, model: str, hypervisor: bool = False,
         numa: dict[int, str] | None = None) -> None:
    base = "/sys/devices/system/cpu"
    t.file(f"{base}/online", f"0-{n - 1}")
    t.file(f"{base}/possible", f"0-{n - 1}")
    for c in range(n):
        d = f"{base}/cpu{c}"
        t.file(f"{d}/topology/physical_package_id", "0")
        t.file(f"{d}/topology/core_id", str(c % (n // 2)))
        if governor:
            t.file(f"{d}/cpufreq/scaling_governor", governor)
            t.file(f"{d}/cpufreq/scaling_driver", driver)
            t.file(f"{d}/cpufreq/cpuinfo_max_freq", "5200000")
            if epp:
                t.file(f"{d}/cpufreq/energy_performance_preference", epp)
    if boost:
        t.file(f"{base}/{boost[0]}", str(boost[1]))
    flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 ht syscall nx lm avx2"
    if hypervisor:
        flags += " hypervisor"
    t.file("/proc/cpuinfo", "\n".join(
        f"processor\t: {c}\nmodel name\t: {model}\nflags\t\t: {flags}\n" for c in range(n)))
    for node, cpulist in (numa or {0: f"0-{n - 1}"}).items():
        t.file(f"/sys/devices/system/node/node{node}/cpulist", cpulist)


def process(t: Tree, *, allowed: str, cgroup: str = "0::/user.slice/session-2.scope",
            cpu_max: str = "max 100000", environ: dict[str, str] | None = None,
            pid1_cgroup: str = "0::/init.scope", memlock: str = "8388608") -> None:
    t.file("/proc/self/status", f"Name:\tpython3\nState:\tR (running)\nCpus_allowed_list:\t{allowed}\n")
    t.file("/proc/self/cgroup", cgroup)
    t.file("/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"
           f"Max open files            1048576              1048576              files\n"
           f"Max locked memory         {memlock:<21}{memlock:<21}bytes\n")
    t.file("/proc/1/cgroup", pid1_cgroup)
    path = cgroup.split(":", 2)[2]
    t.file(f"/sys/fs/cgroup{path.rstrip('/')}/cpu.max", cpu_max)
    env = {"HOME": "/home/user", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin",
           **(environ or {})}
    p = t.root / "proc/self/environ"
    p.write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))


def memory(t: Tree, total_gib: int, avail_gib: float, swap_gib: int = 0, swap_used_gib: float = 0,
           swappiness: int = 10, thp: str = "always [madvise] never",
           defrag: str = "always defer defer+madvise [madvise] never") -> None:
    kb = 1 << 20
    t.file("/proc/meminfo", "\n".join([
        f"MemTotal:       {total_gib * kb} kB",
        f"MemFree:        {int(avail_gib * kb * 0.8)} kB",
        f"MemAvailable:   {int(avail_gib * kb)} kB",
        f"SwapTotal:      {swap_gib * kb} kB",
        f"SwapFree:       {int((swap_gib - swap_used_gib) * kb)} kB",
    ]))
    t.file("/proc/sys/vm/swappiness", str(swappiness))
    t.file("/sys/kernel/mm/transparent_hugepage/enabled", thp)
    t.file("/sys/kernel/mm/transparent_hugepage/defrag", defrag)


def modules(t: Tree, names: list[str], driver_version: str | None = None) -> None:
    t.file("/proc/modules", "\n".join(
        f"{n} 1234 0 - Live 0x0000000000000000" for n in [*names, "ext4", "snd_hda_intel"]))
    if driver_version:
        t.file("/proc/driver/nvidia/version",
               f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver_version}  "
               "Sat Jun  7 00:00:00 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)")
        for node in ("nvidia0", "nvidiactl", "nvidia-uvm"):
            t.file(f"/dev/{node}", "")


def pci_gpu(t: Tree, addr: str, port: str, *, device: str = "0x2684", driver: str | None,
            numa: int = -1, cur: tuple[str, int] = ("2.5 GT/s PCIe", 16),
            mx: tuple[str, int] = ("16.0 GT/s PCIe", 16),
            port_max: tuple[str, int] = ("16.0 GT/s PCIe", 16)) -> None:
    real = f"/sys/devices/pci0000:00/{port}/{addr}"
    t.link(f"/sys/bus/pci/devices/{addr}", real)
    t.file(f"{real}/vendor", "0x10de")
    t.file(f"{real}/device", device)
    t.file(f"{real}/class", "0x030000")
    t.file(f"{real}/numa_node", str(numa))
    t.file(f"{real}/current_link_speed", cur[0])
    t.file(f"{real}/current_link_width", str(cur[1]))
    t.file(f"{real}/max_link_speed", mx[0])
    t.file(f"{real}/max_link_width", str(mx[1]))
    port_dir = f"/sys/devices/pci0000:00/{port}"
    t.file(f"{port_dir}/vendor", "0x1022")
    t.file(f"{port_dir}/class", "0x060400")
    t.file(f"{port_dir}/max_link_speed", port_max[0])
    t.file(f"{port_dir}/max_link_width", str(port_max[1]))
    t.file(f"{port_dir}/current_link_speed", cur[0])
    t.file(f"{port_dir}/current_link_width", str(cur[1]))
    t.link(f"/sys/bus/pci/devices/{port}", port_dir)
    if driver:
        t.file(f"/sys/bus/pci/drivers/{driver}/module", "")
        t.link(f"{real}/driver", f"/sys/bus/pci/drivers/{driver}")
    # The GPU's HDMI audio function: same vendor, class 0x0403, must not count as a GPU.
    audio = real[:-1] + "1"
    t.link(f"/sys/bus/pci/devices/{addr[:-1]}1", audio)
    t.file(f"{audio}/vendor", "0x10de")
    t.file(f"{audio}/class", "0x040300")


def nvme_disk(t: Tree, parts: int = 2, model: str = "Samsung SSD 990 PRO 2TB") -> None:
    disk = "/sys/devices/pci0000:00/0000:00:02.4/0000:02:00.0/nvme/nvme0/nvme0n1"
    t.file(f"{disk}/queue/rotational", "0")
    t.file(f"{disk}/queue/scheduler", "[none] mq-deadline")
    t.file(f"{disk}/queue/read_ahead_kb", "128")
    t.file(f"{disk}/size", str(3907029168))
    t.file(f"{disk}/removable", "0")
    t.file(f"{disk}/device/model", model)
    t.link("/sys/block/nvme0n1", disk)
    t.link("/sys/class/block/nvme0n1", disk)
    t.link("/sys/dev/block/259:0", disk)
    for i in range(1, parts + 1):
        t.file(f"{disk}/nvme0n1p{i}/partition", str(i))
        t.file(f"{disk}/nvme0n1p{i}/size", str(3907029168 // parts))
        t.link(f"/sys/class/block/nvme0n1p{i}", f"{disk}/nvme0n1p{i}")
        t.link(f"/sys/dev/block/259:{i}", f"{disk}/nvme0n1p{i}")


def sata_hdd_lvm(t: Tree) -> None:
    disk = "/sys/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda"
    t.file(f"{disk}/queue/rotational", "1")
    t.file(f"{disk}/queue/scheduler", "none [mq-deadline]")
    t.file(f"{disk}/queue/read_ahead_kb", "128")
    t.file(f"{disk}/size", str(15628053168))
    t.file(f"{disk}/removable", "0")
    t.file(f"{disk}/device/model", "ST8000DM004-2U91")
    t.file(f"{disk}/device/vendor", "ATA")
    t.link("/sys/block/sda", disk)
    for i in (1, 2):
        t.file(f"{disk}/sda{i}/partition", str(i))
        t.link(f"/sys/class/block/sda{i}", f"{disk}/sda{i}")
        t.link(f"/sys/dev/block/8:{i}", f"{disk}/sda{i}")
    t.link("/sys/dev/block/8:0", disk)
    dm = "/sys/devices/virtual/block/dm-0"
    t.file(f"{dm}/dm/name", "vg0-datasets")
    t.file(f"{dm}/dm/uuid", "LVM-Wm9vQ2y3Xk1bYt0bZ7u8Zr0nQm1c2d3e4f5g6h7i8j9k0l1m2n3o4p5q6r7s8t9")
    t.file(f"{dm}/queue/rotational", "1")
    t.file(f"{dm}/queue/read_ahead_kb", "128")
    t.link(f"{dm}/slaves/sda2", f"{disk}/sda2")
    t.link("/sys/block/dm-0", dm)
    t.link("/sys/dev/block/254:0", dm)


def mountinfo(t: Tree, lines: list[str]) -> None:
    t.file("/proc/self/mountinfo", "\n".join(
        f"{20 + i} 1 {line}" for i, line in enumerate(lines)))


def python_env(t: Tree, *, py: str, glibc: str, torch: str | None, cuda: str | None,
               pins: dict[str, str] | None = None, installed: dict[str, str] | None = None) -> None:
    site = f"/home/user/venv/lib/python{py.rsplit('.', 1)[0]}/site-packages"
    t.json("/pitstop-recorded/python.json", {
        "_origin": "hand-made: the interpreter that would run training on this machine",
        "version": py, "implementation": "cpython", "executable": "/home/user/venv/bin/python",
        "glibc": glibc, "sys_path": [site], "cwd": "/home/user", "os_cpu_count": None})
    t.file(f"{site}/numpy-2.2.6.dist-info/METADATA", "Metadata-Version: 2.1\nName: numpy\n"
           "Version: 2.2.6\n")
    if torch is None:
        return
    reqs = "".join(f'Requires-Dist: {k}=={v}; platform_system == "Linux" and '
                   'platform_machine == "x86_64"\n' for k, v in (pins or {}).items())
    t.file(f"{site}/torch-{torch}.dist-info/METADATA",
           f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\nRequires-Dist: filelock\n"
           f"{reqs}\nlong description starts here\nRequires-Dist: not-a-header==1\n")
    t.file(f"{site}/torch/version.py",
           "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', "
           "'git_version', 'hip']\n"
           f"__version__ = '{torch}'\ndebug = False\n"
           f"cuda: Optional[str] = {repr(cuda) if cuda else 'None'}\n"
           "git_version = '0000000000000000000000000000000000000000'\n"
           "hip: Optional[str] = None\nxpu: Optional[str] = None\n")
    t.file(f"{site}/torch/lib/libtorch_cuda.so" if cuda else f"{site}/torch/lib/libtorch_cpu.so", "")
    for name, version in (installed if installed is not None else (pins or {})).items():
        t.file(f"{site}/{name.replace('-', '_')}-{version}.dist-info/METADATA",
               f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


# Pins of the torch 2.6.0+cu124 and 2.7.0+cu128 Linux wheels (their METADATA on PyPI /
# download.pytorch.org), trimmed to the libraries the doctor reads.
PINS_26_CU124 = {"nvidia-cuda-runtime-cu12": "12.4.127", "nvidia-cudnn-cu12": "9.1.0.70",
                 "nvidia-cublas-cu12": "12.4.5.8", "nvidia-nccl-cu12": "2.21.5"}
PINS_27_CU128 = {"nvidia-cuda-runtime-cu12": "12.8.57", "nvidia-cudnn-cu12": "9.7.1.26",
                 "nvidia-cublas-cu12": "12.8.3.14", "nvidia-nccl-cu12": "2.26.2"}

DEBIAN13_ROOT = ["259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw,errors=remount-ro",
                 "0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
                 "0:23 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw",
                 "0:24 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64"]


def workstation(t: Tree, *, debian: str = "13", driver: str | None = "550.163.01",
                cuda_driver: str = "12.4", modules_loaded: list[str] | None = None,
                gpu_driver: str | None = "nvidia", nvml_doc: dict | None = None,
                torch: str | None = "2.6.0+cu124", torch_cuda: str | None = "12.4",
                pins: dict[str, str] | None = None, environ: dict[str, str] | None = None,
                governor: str = "performance", epp: str = "performance",
                link_cur: tuple[str, int] = ("2.5 GT/s PCIe", 16),
                port_max: tuple[str, int] = ("16.0 GT/s PCIe", 16)) -> None:
    """A Ryzen 9 7950X desktop with one RTX 4090, data on NVMe (Debian 12 or 13)."""
    if debian == "13":
        os_release(t, "Debian GNU/Linux 13 (trixie)", "debian", "13", "trixie")
        t.file("/proc/sys/kernel/osrelease", "6.12.38+deb13-amd64")
        py, glibc = "3.13.5", "2.41"
    else:
        os_release(t, "Debian GNU/Linux 12 (bookworm)", "debian", "12", "bookworm")
        t.file("/proc/sys/kernel/osrelease", "6.1.0-37-amd64")
        py, glibc = "3.11.2", "2.36"
    t.file("/sys/class/dmi/id/sys_vendor", "ASUS")
    t.file("/sys/class/dmi/id/product_name", "System Product Name")
    cpus(t, 16, governor=governor, epp=epp, driver="amd-pstate-epp",
         boost=("cpufreq/boost", 1), model="AMD Ryzen 9 7950X 16-Core Processor")
    process(t, allowed="0-15", environ=environ)
    memory(t, 64, 58.2, swap_gib=8, swappiness=10)
    mods = modules_loaded if modules_loaded is not None else [
        "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]
    modules(t, mods, driver if "nvidia" in mods else None)
    if "nvidia" in mods:
        t.file("/etc/modprobe.d/nvidia-blacklists-nouveau.conf", "blacklist nouveau")
    pci_gpu(t, "0000:01:00.0", "0000:00:01.1", driver=gpu_driver, cur=link_cur,
            port_max=port_max)
    nvme_disk(t)
    mountinfo(t, DEBIAN13_ROOT)
    t.file("/data/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/": {"total_bytes": 1967317549056,
                                                    "free_bytes": 1211180777472}})
    python_env(t, py=py, glibc=glibc, torch=torch, cuda=torch_cuda,
               pins=PINS_26_CU124 if pins is None else pins)
    if nvml_doc is None and driver:
        nvml_doc = nvml(driver, cuda_driver, [gpu(RTX4090, 0, ":01:00.0")],
                        "RTX 4090 board values (see make_machines.py), idle state")
    if nvml_doc is not None:
        t.json("/pitstop-recorded/nvml.json", nvml_doc)


def origin(t: Tree, text: str) -> None:
    t.file("/ORIGIN.txt", text.strip() + "\n\nGenerated by tests/doctor/machines/make_machines.py; "
           "sysfs/procfs files hand-made from the kernel's documented formats "
           "(Documentation/ABI/testing/sysfs-*, proc(5)).")


# --- the machines -------------------------------------------------------------------
def m_healthy(t: Tree) -> None:
    workstation(t)
    origin(t, "rtx4090-workstation: a healthy Debian 13 desktop, Ryzen 9 7950X, one RTX 4090 "
              "on driver 550.163.01 (Debian trixie's package), torch 2.6.0+cu124, governor "
              "performance, data on a Samsung 990 PRO NVMe. The GPU is idle: its link sits at "
              "Gen1 (as real idle GPUs do), which must not be reported.")


def m_nouveau(t: Tree) -> None:
    workstation(t, debian="12", driver=None, modules_loaded=["nouveau", "drm_kms_helper"],
                gpu_driver="nouveau",
                nvml_doc={"_origin": "what NVML answers without the NVIDIA driver "
                          "(pitstop.telemetry.nvml.open_nvml's message)",
                          "available": False,
                          "reason": "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"})
    origin(t, "nouveau: a fresh Debian 12 install on the same desktop: nouveau drives the RTX "
              "4090, no nvidia module, no NVML; torch 2.6.0+cu124 already installed.")


def m_cpu_wheel(t: Tree) -> None:
    workstation(t, debian="12", driver="535.247.01", cuda_driver="12.2", torch="2.7.0+cpu",
                torch_cuda=None, pins={})
    origin(t, "cpu-wheel: Debian 12 with the distribution's driver 535.247.01 working, but "
              "torch 2.7.0+cpu installed from the CPU index.")


def m_driver535(t: Tree) -> None:
    workstation(t, debian="12", driver="535.247.01", cuda_driver="12.2", torch="2.7.0+cu128",
                torch_cuda="12.8", pins=PINS_27_CU128)
    origin(t, "driver535-cu128: Debian 12's driver 535.247.01 (supports CUDA 12.2) with "
              "torch 2.7.0+cu128, whose toolkit ships with driver 570.26.")


def m_powersave(t: Tree) -> None:
    os_release(t, "Ubuntu 24.04.2 LTS", "ubuntu", "24.04", "noble")
    t.file("/proc/sys/kernel/osrelease", "6.8.0-60-generic")
    t.file("/sys/class/dmi/id/sys_vendor", "LENOVO")
    cpus(t, 8, governor="powersave", epp="balance_power", driver="intel_pstate",
         boost=("intel_pstate/no_turbo", 1), model="Intel(R) Core(TM) i7-1165G7 @ 2.80GHz")
    process(t, allowed="0-7")
    memory(t, 16, 11.0, swap_gib=4, swappiness=60)
    modules(t, ["i915"])
    t.file("/sys/bus/pci/devices/.keep", "")
    nvme_disk(t, model="SAMSUNG MZVL2512HCJQ")
    mountinfo(t, DEBIAN13_ROOT)
    t.file("/data/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/": {"total_bytes": 502468108288,
                                                    "free_bytes": 201234567168}})
    python_env(t, py="3.12.3", glibc="2.39", torch="2.7.0+cpu", cuda=None, pins={})
    origin(t, "powersave: an Ubuntu 24.04 laptop (i7-1165G7, intel_pstate) with governor "
              "powersave, energy_performance_preference balance_power and turbo disabled "
              "(intel_pstate/no_turbo=1); no NVIDIA GPU, so no NVML recording.")


def m_lvm_hdd(t: Tree) -> None:
    workstation(t)
    sata_hdd_lvm(t)
    mountinfo(t, [*DEBIAN13_ROOT,
                  "254:0 / /srv/datasets rw,relatime - ext4 /dev/mapper/vg0-datasets rw"])
    t.file("/srv/datasets/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {
        "/": {"total_bytes": 1967317549056, "free_bytes": 1211180777472},
        "/srv/datasets": {"total_bytes": 7901014433792, "free_bytes": 3105678901248}})
    origin(t, "lvm-hdd: the healthy workstation plus an 8 TB Seagate SATA hard disk (sda, "
              "rotational=1) whose partition sda2 is an LVM physical volume; the logical "
              "volume vg0/datasets (dm-0) is mounted at /srv/datasets, where the dataset "
              "lives.")


def m_docker(t: Tree) -> None:
    os_release(t, "Ubuntu 22.04.5 LTS", "ubuntu", "22.04", "jammy")
    t.file("/proc/sys/kernel/osrelease", "5.15.0-139-generic")
    t.file("/.dockerenv", "")
    cpus(t, 32, governor="performance", epp=None, driver="acpi-cpufreq",
         boost=("cpufreq/boost", 1), model="AMD EPYC 7302 16-Core Processor")
    process(t, allowed="0-31", cgroup="0::/", cpu_max="400000 100000", pid1_cgroup="0::/")
    t.file("/sys/fs/cgroup/memory.max", str(32 << 30))  # docker run --memory=32g
    t.file("/sys/fs/cgroup/memory.current", str(3 << 30))
    memory(t, 256, 230.0)
    modules(t, ["nvidia_uvm", "nvidia"], "570.172.08")
    pci_gpu(t, "0000:41:00.0", "0000:40:01.1", device="0x20b0", driver="nvidia", numa=0,
            cur=("16.0 GT/s PCIe", 16))
    nvme_disk(t, model="SAMSUNG MZQL23T8HCLS-00A07")
    mountinfo(t, [
        "0:300 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:"
        "/var/lib/docker/overlay2/l/B,upperdir=/var/lib/docker/overlay2/c/diff,"
        "workdir=/var/lib/docker/overlay2/c/work",
        "0:301 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
        "0:303 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64",
        "259:1 /srv/data /workspace/data rw,relatime - ext4 /dev/nvme0n1p1 rw",
    ])
    t.file("/workspace/data/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/workspace/data": {
        "total_bytes": 3840755982336, "free_bytes": 2840755982336}})
    python_env(t, py="3.10.12", glibc="2.35", torch="2.7.0+cu128", cuda="12.8",
               pins=PINS_27_CU128)
    t.json("/pitstop-recorded/nvml.json", nvml(
        "570.172.08", "12.8", [gpu(A100, 0, ":41:00.0", temperature_c=34, power_draw_w=52.3,
                                   clock_sm_mhz=1410, pcie_link_gen=4, clocks_event_reasons=1)],
        "A100-SXM4-40GB board values from public nvidia-smi -q outputs (see make_machines.py)"))
    origin(t, "docker-shm64: a Docker container (Ubuntu 22.04 image) started with `--gpus all` "
              "but without --shm-size, so /dev/shm is Docker's default 64 MB (size=65536k), and "
              "with --cpus=4 (cgroup v2 cpu.max 400000 100000) and --memory=32g on a "
              "32-CPU, 256 GiB host; one A100, "
              "data bind-mounted from the host's NVMe at /workspace/data.")


def m_pcie_x4(t: Tree) -> None:
    busy = gpu(RTX4090, 0, ":01:00.0", utilization_gpu_pct=98, utilization_memory_pct=61,
               memory_used_bytes=21474836480, temperature_c=71, power_draw_w=431.2,
               clock_sm_mhz=2730, clock_mem_mhz=10501, clocks_event_reasons=0,
               pcie_link_gen=3, pcie_link_width=4, pcie_link_gen_max=3,
               pcie_link_width_max=4, pcie_tx_kbps=2950000, pcie_rx_kbps=3410000,
               processes=[{"pid": 5123, "used_memory_bytes": 21340618752, "type": "compute",
                           "name": "python train.py --epochs 90"}])
    workstation(t, link_cur=("8.0 GT/s PCIe", 4), port_max=("8.0 GT/s PCIe", 4),
                nvml_doc=nvml("550.163.01", "12.4", [busy],
                              "RTX 4090 board values, busy training, in a chipset slot wired "
                              "Gen3 x4"))
    origin(t, "pcie-gen3-x4: the workstation with the RTX 4090 in the second, chipset-attached "
              "slot (Gen3, 4 lanes), recorded while a training run (pid 5123) keeps it at "
              "98 % utilisation.")


def m_thermal(t: Tree) -> None:
    hot = gpu(RTX4090, 0, ":01:00.0", utilization_gpu_pct=100, utilization_memory_pct=70,
              memory_used_bytes=19327352832, temperature_c=90, power_draw_w=318.0,
              clock_sm_mhz=1830, clock_mem_mhz=10501, clocks_event_reasons=0x20,
              pcie_link_gen=4, persistence_mode=False,
              processes=[{"pid": 6001, "used_memory_bytes": 19193135104, "type": "compute",
                          "name": "python train.py"}])
    workstation(t, link_cur=("16.0 GT/s PCIe", 16),
                nvml_doc=nvml("550.163.01", "12.4", [hot],
                              "RTX 4090 board values, busy, at its slowdown temperature with "
                              "the SW thermal slowdown clock event active"))
    origin(t, "thermal-slowdown: the workstation with blocked airflow: the busy RTX 4090 "
              "sits at 90 °C (its slowdown threshold) and NVML reports the SW thermal "
              "slowdown clock event (0x20); persistence mode is off.")


MACHINES = {
    "rtx4090-workstation": m_healthy,
    "nouveau": m_nouveau,
    "cpu-wheel": m_cpu_wheel,
    "driver535-cu128": m_driver535,
    "powersave": m_powersave,
    "lvm-hdd": m_lvm_hdd,
    "docker-shm64": m_docker,
    "pcie-gen3-x4": m_pcie_x4,
    "thermal-slowdown": m_thermal,
}


def build(outdir: Path) -> None:
    for name, make in MACHINES.items():
        root = outdir / name
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        make(Tree(root))


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
