"""The parts the fake machines are built from: a tree writer and one writer per kind of
file the doctor's probes read (CPUs, processes, memory, kernel modules, PCI devices,
disks, mounts, the Python environment, the NVIDIA kernel module on disk, EFI variables).

The formats follow the kernel's documentation (Documentation/ABI/testing/sysfs-*,
proc(5), efivarfs), DKMS's tree layout (dkms(8)) and the wheel format (PEP 427/566).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from torch_wheels import TorchWheel

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


# A10G (AWS g5): 23028 MiB usable as nvidia-smi prints it on g5 instances (public logs),
# 300 W board power limit, 1710 MHz boost clock, PCIe Gen4 x16, compute capability 8.6;
# thresholds illustrative, as for the RTX 4090.
A10G = {
    "name": "NVIDIA A10G",
    "memory_total_bytes": 23028 << 20,
    "temperature_slowdown_c": 92,
    "temperature_shutdown_c": 97,
    "power_default_limit_w": 300.0,
    "power_max_limit_w": 300.0,
    "clock_sm_max_mhz": 1710,
    "clock_mem_max_mhz": 6251,
    "pcie_link_gen_device_max": 4,
    "compute_capability": [8, 6],
    "ecc_mode_current": False,
    "retired_pages_pending": False,
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
        self.notes: list[str] = []  # where values came from, for ORIGIN.txt

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

    def bytes(self, path: str, data: bytes) -> None:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def os_release(t: Tree, pretty: str, os_id: str, version: str, codename: str) -> None:
    t.file("/etc/os-release", f'PRETTY_NAME="{pretty}"\nNAME="{pretty.split(" ")[0]}"\n'
           f'VERSION_ID="{version}"\nVERSION_CODENAME={codename}\nID={os_id}\n')


def cpus(t: Tree, n: int, *, governor: str | None, epp: str | None, driver: str,
         boost: tuple[str, int] | None, model: str, hypervisor: bool = False,
         numa: dict[int, str] | None = None, cores: int | None = None) -> None:
    base = "/sys/devices/system/cpu"
    t.file(f"{base}/online", f"0-{n - 1}")
    t.file(f"{base}/possible", f"0-{n - 1}")
    for c in range(n):
        d = f"{base}/cpu{c}"
        t.file(f"{d}/topology/physical_package_id", "0")
        t.file(f"{d}/topology/core_id", str(c % (cores or max(1, n // 2))))
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


def modules(t: Tree, names: list[str], driver_version: str | None = None,
            dev_nodes: tuple[str, ...] = ("nvidia0", "nvidiactl", "nvidia-uvm")) -> None:
    t.file("/proc/modules", "\n".join(
        f"{n} 1234 0 - Live 0x0000000000000000" for n in [*names, "ext4", "snd_hda_intel"]))
    if driver_version:
        t.file("/proc/driver/nvidia/version",
               f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver_version}  "
               "Sat Jun  7 00:00:00 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)")
        for node in dev_nodes:
            t.file(f"/dev/{node}", "")


def pci_gpu(t: Tree, addr: str, port: str | None, *, device: str = "0x2684", driver: str | None,
            numa: int = -1, cur: tuple[str, int] = ("2.5 GT/s PCIe", 16),
            mx: tuple[str, int] = ("16.0 GT/s PCIe", 16),
            port_max: tuple[str, int] = ("16.0 GT/s PCIe", 16), audio: bool = True) -> None:
    """An NVIDIA GPU below a root/switch port (``port``), or on the root bus itself
    (``port=None``: a cloud VM's passed-through GPU), with its HDMI audio function."""
    root_bus = f"/sys/devices/pci{addr[:4]}:{addr[5:7]}" if port is None else None
    real = f"{root_bus}/{addr}" if root_bus else f"/sys/devices/pci0000:00/{port}/{addr}"
    t.link(f"/sys/bus/pci/devices/{addr}", real)
    t.file(f"{real}/vendor", "0x10de")
    t.file(f"{real}/device", device)
    t.file(f"{real}/class", "0x030000")
    t.file(f"{real}/numa_node", str(numa))
    t.file(f"{real}/current_link_speed", cur[0])
    t.file(f"{real}/current_link_width", str(cur[1]))
    t.file(f"{real}/max_link_speed", mx[0])
    t.file(f"{real}/max_link_width", str(mx[1]))
    if port is not None:
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
    if audio:
        # The GPU's HDMI audio function: same vendor, class 0x0403, must not count as a GPU.
        fn = real[:-1] + "1"
        t.link(f"/sys/bus/pci/devices/{addr[:-1]}1", fn)
        t.file(f"{fn}/vendor", "0x10de")
        t.file(f"{fn}/class", "0x040300")


def nvme_disk(t: Tree, parts: int = 2, model: str = "Samsung SSD 990 PRO 2TB", *,
              index: int = 0, pci: str = "0000:00:02.4/0000:02:00.0", sectors: int = 3907029168,
              read_ahead_kb: int = 128) -> None:
    """``nvme<index>n1`` with ``parts`` partitions; block numbers 259:<index*8 + n>."""
    name = f"nvme{index}n1"
    disk = f"/sys/devices/pci0000:00/{pci}/nvme/nvme{index}/{name}"
    t.file(f"{disk}/queue/rotational", "0")
    t.file(f"{disk}/queue/scheduler", "[none] mq-deadline")
    t.file(f"{disk}/queue/read_ahead_kb", str(read_ahead_kb))
    t.file(f"{disk}/size", str(sectors))
    t.file(f"{disk}/removable", "0")
    t.file(f"{disk}/device/model", model)
    t.link(f"/sys/block/{name}", disk)
    t.link(f"/sys/class/block/{name}", disk)
    t.link(f"/sys/dev/block/259:{index * 8}", disk)
    for i in range(1, parts + 1):
        t.file(f"{disk}/{name}p{i}/partition", str(i))
        t.file(f"{disk}/{name}p{i}/size", str(sectors // parts))
        t.link(f"/sys/class/block/{name}p{i}", f"{disk}/{name}p{i}")
        t.link(f"/sys/dev/block/259:{index * 8 + i}", f"{disk}/{name}p{i}")


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


DEBIAN13_ROOT = ["259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw,errors=remount-ro",
                 "0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
                 "0:23 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw",
                 "0:24 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64"]




# --- the Python environment -----------------------------------------------------------
def python_env(t: Tree, *, py: str, glibc: str, wheel: TorchWheel | None,
               installed: dict[str, str | None] | None = None,
               extra_dists: dict[str, str] | None = None, machine: str | None = None) -> None:
    """``python.json`` and a site-packages holding ``wheel`` as pip installs it: torch's
    dist-info (METADATA with the release's real Requires-Dist, WHEEL with its tag),
    ``torch/version.py``, and one dist-info per nvidia-* pin that applies on Linux x86_64.
    ``installed`` overrides versions (``None`` removes one); ``extra_dists`` adds others."""
    site = f"/home/user/venv/lib/python{py.rsplit('.', 1)[0]}/site-packages"
    rec = {"_origin": "hand-made: the interpreter that would run training on this machine",
           "version": py, "implementation": "cpython", "executable": "/home/user/venv/bin/python",
           "glibc": glibc, "sys_path": [site], "cwd": "/home/user", "os_cpu_count": None}
    if machine:
        rec["machine"] = machine
    t.json("/pitstop-recorded/python.json", rec)
    dists = {"numpy": "2.2.6", **(extra_dists or {})}
    pinned: list[str] = []
    if wheel is not None:
        pyver = py.rsplit(".", 1)[0].replace(".", "")
        t.file(f"{site}/torch-{wheel.version}.dist-info/METADATA",
               f"Metadata-Version: {wheel.metadata_version}\nName: torch\nVersion: {wheel.version}\n"
               "Summary: Tensors and Dynamic neural networks in Python with strong GPU "
               "acceleration\nRequires-Python: >=3.9.0\n"
               + "".join(f"Requires-Dist: {r}\n" for r in wheel.requires)
               + "\nlong description starts here\nRequires-Dist: not-a-header==1\n")
        t.file(f"{site}/torch-{wheel.version}.dist-info/WHEEL",
               "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.43.0)\nRoot-Is-Purelib: false\n"
               f"Tag: cp{pyver}-cp{pyver}-{wheel.platform_tag}\n")
        t.file(f"{site}/torch/version.py",
               "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', "
               "'git_version', 'hip']\n"
               f"__version__ = '{wheel.version}'\ndebug = False\n"
               f"cuda: Optional[str] = {wheel.cuda!r}\n"
               "git_version = '0000000000000000000000000000000000000000'\n"
               "hip: Optional[str] = None\nxpu: Optional[str] = None\n")
        t.file(f"{site}/torch/lib/libtorch_cuda.so" if wheel.cuda else
               f"{site}/torch/lib/libtorch_cpu.so", "")
        for req in wheel.requires:
            # "nvidia-x==1.2; marker" or "nvidia-x (==1.2) ; marker": pip installs those
            # whose marker holds on Linux x86_64, at the pinned version.
            m = re.match(r"(nvidia-[a-z0-9-]+)\s*\(?==([0-9.]+)\)?\s*;(.*)$", req)
            if m and "x86_64" in m.group(3):
                dists[m.group(1)] = m.group(2)
                pinned.append(m.group(1))
    if wheel is not None:
        t.notes.append(f"torch wheel: {wheel.origin}; its Requires-Dist written verbatim, and "
                       f"the {len(pinned)} nvidia-* wheels it pins for Linux x86_64 installed at "
                       "the pinned versions" + (f", except: {installed}" if installed else ""))
    for name, version in (installed or {}).items():
        if version is None:
            dists.pop(name, None)
        else:
            dists[name] = version
    for name, version in dists.items():
        t.file(f"{site}/{name.replace('-', '_')}-{version}.dist-info/METADATA",
               f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


# --- the NVIDIA kernel module on disk, and EFI ----------------------------------------
def kernel_tree(t: Tree, kernel: str, *, headers: bool, nvidia: str | None = None,
                compressed: bool = True) -> None:
    """``/lib/modules/<kernel>``: a few in-tree modules, ``modules.dep``, the ``build``
    link (dangling without headers, as on Debian), and ``nvidia`` (a path relative to
    the kernel's module directory: ``updates/dkms/nvidia-current.ko.xz``) with its
    helper modules beside it."""
    base = f"/lib/modules/{kernel}"
    ext = ".ko.xz" if compressed else ".ko"
    # in-tree modules every distribution kernel has, nvidiafb and nouveau among them
    intree = [f"kernel/fs/ext4/ext4{ext}", f"kernel/drivers/gpu/drm/nouveau/nouveau{ext}",
              f"kernel/drivers/video/fbdev/nvidia/nvidiafb{ext}"]
    for path in intree:
        t.file(f"{base}/{path}", "")
    dep = [f"{p}:" for p in intree]
    if nvidia:
        d, f = nvidia.rsplit("/", 1)
        stem, suffix = f.split(".ko", 1)
        for extra in ("", "-modeset", "-drm", "-uvm", "-peermem"):
            t.file(f"{base}/{d}/{stem}{extra}.ko{suffix}", "")
            dep.append(f"{d}/{stem}{extra}.ko{suffix}:")
    t.file(f"{base}/modules.dep", "\n".join(dep))
    t.link(f"{base}/build", f"/usr/src/linux-headers-{kernel}")
    if headers:
        t.file(f"/usr/src/linux-headers-{kernel}/Makefile", "# kernel build tree\n")


def dkms_module(t: Tree, module: str, version: str, kernels: list[str],
                compressed: bool = True, arch: str = "x86_64") -> None:
    """``/var/lib/dkms/<module>/<version>``: the source link, and the module built and
    installed for each of ``kernels`` (``kernel-<kernel>-<arch>`` links, as dkms(8) keeps)."""
    base = f"/var/lib/dkms/{module}/{version}"
    t.link(f"{base}/source", f"/usr/src/{module}-{version}")
    t.file(f"/usr/src/{module}-{version}/dkms.conf", f'PACKAGE_NAME="{module}"\n'
           f'PACKAGE_VERSION="{version}"\n')
    ext = ".ko.xz" if compressed else ".ko"
    for kernel in kernels:
        t.file(f"{base}/{kernel}/{arch}/module/{module}{ext}", "")
        t.file(f"{base}/{kernel}/{arch}/log/make.log", "DKMS make.log\n")
        t.link(f"/var/lib/dkms/{module}/kernel-{kernel}-{arch}", f"{base}/{kernel}/{arch}")


# A stand-in for a DER certificate: what matters is that MokListRT holds it, or not.
DKMS_KEY_DER = bytes.fromhex("308201") + b"DKMS module signing key (fixture)" + bytes(16)
OTHER_CERT_DER = bytes.fromhex("308201") + b"Debian Secure Boot CA (fixture)" + bytes(16)
# EFI_CERT_X509_GUID, in the byte order EFI_SIGNATURE_LIST stores it.
X509_GUID = bytes.fromhex("a159c0a5e494a74a87b5ab155c2bf072")


def efi(t: Tree, *, secure_boot: bool, enrolled: list[bytes] | None = None,
        lockdown: str = "none") -> None:
    """UEFI firmware variables under efivarfs (4 bytes of attributes, then the value):
    ``SecureBoot`` and shim's ``MokListRT`` (an EFI_SIGNATURE_LIST per certificate), the
    kernel's lockdown mode and module-signature enforcement."""
    attrs = (0x6).to_bytes(4, "little")  # BOOTSERVICE_ACCESS | RUNTIME_ACCESS
    t.bytes("/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e1f7a1d1a1c8",
            attrs + bytes([1 if secure_boot else 0]))
    if enrolled is not None:
        lists = b""
        for cert in enrolled:
            size = 16 + 4 + 4 + 4 + 16 + len(cert)
            lists += (X509_GUID + size.to_bytes(4, "little") + (0).to_bytes(4, "little")
                      + (16 + len(cert)).to_bytes(4, "little") + bytes(16) + cert)
        t.bytes("/sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23",
                attrs + lists)
    modes = " ".join(f"[{m}]" if m == lockdown else m
                     for m in ("none", "integrity", "confidentiality"))
    t.file("/sys/kernel/security/lockdown", modes)
    t.file("/sys/module/module/parameters/sig_enforce", "Y" if secure_boot else "N")
