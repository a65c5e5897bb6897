"""Write the fake machines used by the doctor tests (``python make_machines.py [OUTDIR]``).

Each machine is a small tree of the files the doctor's probes read (``/sys``, ``/proc``,
``/etc``, ``/dev``, ``/lib/modules``, ``/var/lib/dkms``) plus recordings of what does not
live in files (``pitstop-recorded/nvml.json``, ``python.json``, ``statvfs.json``,
``torch_runtime.json``). The trees are hand-made from the kernel's documented formats of
these files (Documentation/ABI for sysfs, proc(5) for /proc); torch's metadata is that of
real wheels (``torch_wheels.py``); the rest is described in each machine's ORIGIN.txt.
The committed trees next to this script are its output; a test checks they match.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from machine_parts import (  # noqa: E402
    A10G,
    A100,
    DKMS_KEY_DER,
    OTHER_CERT_DER,
    RTX4090,
    Tree,
    cpus,
    dkms_module,
    efi,
    gpu,
    kernel_tree,
    memory,
    modules,
    mountinfo,
    nvme_disk,
    nvml,
    os_release,
    pci_gpu,
    process,
    python_env,
    sata_hdd_lvm,
)
from torch_wheels import TORCH_251, TORCH_270_CPU, TORCH_280, TorchWheel  # noqa: E402

__all__ = ["MACHINES", "Tree", "build", "mountinfo", "nvme_disk"]

DEBIAN13_ROOT = ["259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw,errors=remount-ro",
                 "0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
                 "0:23 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw",
                 "0:24 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64"]
NVIDIA_LOADED = ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]
# The kernels of the Debian workstation: Debian 13's 6.12 (modules compressed with xz,
# as its kernel packages ship them) and Debian 12's 6.1 (uncompressed .ko).
DEBIAN13_KERNELS = ("6.12.33+deb13-amd64", "6.12.38+deb13-amd64")
DEBIAN12_KERNELS = ("6.1.0-35-amd64", "6.1.0-37-amd64")


def debian_driver_on_disk(t: Tree, *, debian: str, driver: str, built_for: tuple[str, ...],
                          kernels: tuple[str, ...], headers: tuple[str, ...]) -> None:
    """Debian's nvidia-kernel-dkms as installed: DKMS module ``nvidia-current`` built for
    ``built_for`` and installed as ``updates/dkms/nvidia-current.ko(.xz)`` there; every
    kernel of ``kernels`` has a module tree, with headers for those in ``headers``; the
    DKMS signing key Debian's dkms creates."""
    xz = debian == "13"
    for k in kernels:
        kernel_tree(t, k, headers=k in headers, compressed=xz,
                    nvidia=f"updates/dkms/nvidia-current.ko{'.xz' if xz else ''}"
                    if k in built_for else None)
    dkms_module(t, "nvidia-current", driver, list(built_for), compressed=xz)
    t.bytes("/var/lib/dkms/mok.pub", DKMS_KEY_DER)
    t.file("/var/lib/dkms/mok.key", "(private key not recorded)")
    t.file("/etc/modprobe.d/nvidia.conf", "alias nvidia nvidia-current\n")


def workstation(t: Tree, *, debian: str = "13", driver: str | None = "550.163.01",
                cuda_driver: str = "12.4", modules_loaded: list[str] | None = None,
                gpu_driver: str | None = "nvidia", nvml_doc: dict | None = None,
                wheel: TorchWheel | None = TORCH_251,
                installed: dict[str, str | None] | None = None,
                environ: dict[str, str] | None = None,
                governor: str = "performance", epp: str = "performance",
                link_cur: tuple[str, int] = ("2.5 GT/s PCIe", 16),
                port_max: tuple[str, int] = ("16.0 GT/s PCIe", 16),
                running_kernel: str | None = None, on_disk: bool = True) -> None:
    """A Ryzen 9 7950X desktop with one RTX 4090, data on NVMe (Debian 12 or 13), its
    driver installed the Debian way (DKMS) for the running kernel and the one before."""
    if debian == "13":
        os_release(t, "Debian GNU/Linux 13 (trixie)", "debian", "13", "trixie")
        kernels = DEBIAN13_KERNELS
        py, glibc = "3.13.5", "2.41"
    else:
        os_release(t, "Debian GNU/Linux 12 (bookworm)", "debian", "12", "bookworm")
        kernels = DEBIAN12_KERNELS
        py, glibc = "3.11.2", "2.36"
    running = running_kernel or kernels[-1]
    t.file("/proc/sys/kernel/osrelease", running)
    t.file("/sys/class/dmi/id/sys_vendor", "ASUS")
    t.file("/sys/class/dmi/id/product_name", "System Product Name")
    cpus(t, 16, governor=governor, epp=epp, driver="amd-pstate-epp",
         boost=("cpufreq/boost", 1), model="AMD Ryzen 9 7950X 16-Core Processor")
    process(t, allowed="0-15", environ=environ)
    memory(t, 64, 58.2, swap_gib=8, swappiness=10)
    mods = modules_loaded if modules_loaded is not None else NVIDIA_LOADED
    modules(t, mods, driver if "nvidia" in mods else None)
    if driver and on_disk:
        # nvidia-kernel-support ships this file; it blacklists nouveau.
        t.file("/etc/modprobe.d/nvidia-blacklists-nouveau.conf", "blacklist nouveau")
        debian_driver_on_disk(t, debian=debian, driver=driver, built_for=kernels,
                              kernels=kernels, headers=kernels)
    else:
        for k in kernels:
            kernel_tree(t, k, headers=False, compressed=debian == "13")
    efi(t, secure_boot=False, enrolled=[OTHER_CERT_DER])
    pci_gpu(t, "0000:01:00.0", "0000:00:01.1", driver=gpu_driver, cur=link_cur,
            port_max=port_max)
    nvme_disk(t)
    mountinfo(t, DEBIAN13_ROOT)
    t.file("/data/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/": {"total_bytes": 1967317549056,
                                                    "free_bytes": 1211180777472}})
    python_env(t, py=py, glibc=glibc, wheel=wheel, installed=installed,
               extra_dists={"nvidia-ml-py": "12.575.51"})
    if nvml_doc is None and driver:
        # A desktop: Xorg and the compositor hold graphics contexts on the display GPU.
        desktop = [{"pid": 1412, "used_memory_bytes": 283115520, "type": "graphics",
                    "name": "/usr/lib/xorg/Xorg"},
                   {"pid": 1933, "used_memory_bytes": 91226112, "type": "graphics",
                    "name": "/usr/bin/gnome-shell"}]
        nvml_doc = nvml(driver, cuda_driver, [gpu(RTX4090, 0, ":01:00.0", processes=desktop)],
                        "RTX 4090 board values (see machine_parts.py), idle; the desktop's "
                        "Xorg and gnome-shell on it")
    if nvml_doc is not None:
        t.json("/pitstop-recorded/nvml.json", nvml_doc)


def origin(t: Tree, text: str) -> None:
    notes = "".join(f"\n\n{n}" for n in t.notes)
    t.file("/ORIGIN.txt", text.strip() + notes + "\n\nGenerated by tests/doctor/machines/make_machines.py; "
           "sysfs/procfs files hand-made from the kernel's documented formats "
           "(Documentation/ABI/testing/sysfs-*, proc(5)); torch's METADATA from real wheels "
           "(tests/doctor/machines/torch_wheels.py names the wheels and how they were read).")


# --- the machines -------------------------------------------------------------------
def m_healthy(t: Tree) -> None:
    workstation(t)
    origin(t, "rtx4090-workstation (healthy control): a Debian 13 desktop, Ryzen 9 7950X, one "
              "RTX 4090 on driver 550.163.01 (Debian trixie's nvidia-kernel-dkms: DKMS module "
              "nvidia-current built for the running kernel 6.12.38+deb13-amd64 and the one "
              "before, headers installed; UEFI with Secure Boot off), torch 2.5.1 (CUDA 12.4), "
              "governor performance, data on a Samsung "
              "990 PRO NVMe. The GPU is idle: its link sits at Gen1 (as real idle GPUs do), "
              "and the desktop's Xorg and gnome-shell hold graphics contexts on it; neither "
              "must be reported.")


def m_nouveau(t: Tree) -> None:
    workstation(t, debian="12", driver=None, modules_loaded=["nouveau", "drm_kms_helper"],
                gpu_driver="nouveau",
                nvml_doc={"_origin": "what NVML answers without the NVIDIA driver "
                          "(pitstop.telemetry.nvml.open_nvml's message)",
                          "available": False,
                          "reason": "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"})
    origin(t, "nouveau: a fresh Debian 12 install on the same desktop: nouveau drives the RTX "
              "4090, no NVIDIA driver anywhere (no module for any kernel, no DKMS tree), no "
              "NVML; torch 2.5.1 with its CUDA library wheels already installed.")


def m_cpu_wheel(t: Tree) -> None:
    workstation(t, debian="12", driver="535.247.01", cuda_driver="12.2", wheel=TORCH_270_CPU)
    origin(t, "cpu-wheel: Debian 12 with the distribution's driver 535.247.01 working (DKMS "
              "module nvidia-current for the running 6.1.0-37-amd64), but torch 2.7.0+cpu "
              "installed from the CPU index (no nvidia-* wheels).")


def m_driver535(t: Tree) -> None:
    workstation(t, debian="12", driver="535.247.01", cuda_driver="12.2", wheel=TORCH_280)
    origin(t, "driver535-cu128: Debian 12's driver 535.247.01 (supports CUDA 12.2) with "
              "torch 2.8.0 built for CUDA 12.8, whose toolkit ships with driver 570.26.")


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
    python_env(t, py="3.12.3", glibc="2.39", wheel=TORCH_270_CPU)
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
    python_env(t, py="3.10.12", glibc="2.35", wheel=TORCH_280)
    t.json("/pitstop-recorded/nvml.json", nvml(
        "570.172.08", "12.8", [gpu(A100, 0, ":41:00.0", temperature_c=34, power_draw_w=52.3,
                                   clock_sm_mhz=1410, pcie_link_gen=4, clocks_event_reasons=1)],
        "A100-SXM4-40GB board values from public nvidia-smi -q outputs (see machine_parts.py)"))
    # torch's default intra-op pool is one thread per physical core it sees (16 here),
    # whatever the cgroup quota says.
    t.json("/pitstop-recorded/torch_runtime.json", {
        "_origin": "the result `pitstop doctor --torch` records (pitstop's torch runtime "
                   "script), values hand-set for this container",
        "import_s": 1.42, "version": "2.8.0+cu128", "cuda": "12.8", "num_threads": 16,
        "num_interop_threads": 16, "cuda_available": True, "device_count": 1,
        "cudnn_available": True, "cudnn_version": 91002, "nccl_version": "2.27.3",
        "cudnn_conv_ok": True})
    origin(t, "docker-shm64: a Docker container (Ubuntu 22.04 image) started with `--gpus all` "
              "but without --shm-size, so /dev/shm is Docker's default 64 MB (size=65536k), and "
              "with --cpus=4 (cgroup v2 cpu.max 400000 100000) and --memory=32g on a "
              "32-CPU, 256 GiB host; one A100, data bind-mounted from the host's NVMe at "
              "/workspace/data. Recorded --torch result: "
              "torch starts 16 intra-op threads (one per physical core) under the 4-CPU quota.")


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


def m_kernel_upgrade(t: Tree) -> None:
    old, new = DEBIAN12_KERNELS
    workstation(t, debian="12", driver=None, modules_loaded=[], gpu_driver=None,
                running_kernel=new,
                nvml_doc={"_origin": "what NVML answers with the user-space driver installed "
                          "but no kernel module (NVML_ERROR_DRIVER_NOT_LOADED, "
                          "pitstop.telemetry.nvml's message)",
                          "available": False, "reason": "the NVIDIA kernel driver is not loaded"})
    # The driver as it was before the upgrade: DKMS built it for the old kernel only; the
    # new kernel's headers never came (linux-headers-amd64 was not installed).
    t.file("/etc/modprobe.d/nvidia-blacklists-nouveau.conf", "blacklist nouveau")
    debian_driver_on_disk(t, debian="12", driver="535.247.01", built_for=(old,),
                          kernels=(old, new), headers=(old,))
    t.json("/pitstop-recorded/torch_runtime.json", {
        "_origin": "the result `pitstop doctor --torch` records; CUDA's message when no "
                   "NVIDIA kernel driver is loaded (torch/cuda/__init__.py _lazy_init)",
        "import_s": 1.61, "version": "2.5.1", "cuda": "12.4", "num_threads": 16,
        "num_interop_threads": 16, "cuda_available": False, "device_count": 0,
        "cuda_error": "RuntimeError: Found no NVIDIA driver on your system. Please check that "
                      "you have an NVIDIA GPU and installed a driver from "
                      "http://www.nvidia.com/Download/index.aspx",
        "cudnn_available": True, "cudnn_version": 90100})
    origin(t, f"kernel-upgrade-dkms: the Debian 12 desktop after `apt upgrade` brought kernel "
              f"{new} without its headers: DKMS (nvidia-current 535.247.01, nvidia-kernel-dkms) "
              f"built the module for {old} only (/lib/modules/{old}/updates/dkms/"
              f"nvidia-current.ko; /var/lib/dkms/nvidia-current/535.247.01/{old}); "
              f"/lib/modules/{new}/build dangles (no /usr/src/linux-headers-{new}). After the "
              "reboot nvidia is not loaded, nouveau is blacklisted, the GPU has no driver, NVML "
              "says the kernel driver is not loaded, and the recorded --torch result is "
              "CUDA's 'Found no NVIDIA driver'.")


def m_secure_boot(t: Tree) -> None:
    workstation(t, driver=None, modules_loaded=[], gpu_driver=None, on_disk=False,
                nvml_doc={"_origin": "NVML without a loaded kernel module",
                          "available": False, "reason": "the NVIDIA kernel driver is not loaded"})
    t.file("/etc/modprobe.d/nvidia-blacklists-nouveau.conf", "blacklist nouveau")
    debian_driver_on_disk(t, debian="13", driver="550.163.01", built_for=DEBIAN13_KERNELS,
                          kernels=DEBIAN13_KERNELS, headers=DEBIAN13_KERNELS)
    # Secure Boot on; MokListRT holds only the distribution's certificate, not DKMS's key.
    efi(t, secure_boot=True, enrolled=[OTHER_CERT_DER], lockdown="integrity")
    origin(t, "secure-boot-mok: the Debian 13 desktop with Secure Boot turned on in the "
              "firmware: DKMS built and signed nvidia-current 550.163.01 for the running "
              "kernel, but its key (/var/lib/dkms/mok.pub) was never enrolled as a Machine "
              "Owner Key, so the kernel (lockdown=integrity, sig_enforce=Y) refuses the "
              "module and nvidia is not loaded. efivarfs files: 4 attribute bytes, then the "
              "value (SecureBoot = 1; MokListRT = EFI_SIGNATURE_LISTs with stand-in DER bytes).")


def m_k8s_pod(t: Tree) -> None:
    os_release(t, "Ubuntu 22.04.5 LTS", "ubuntu", "22.04", "jammy")
    t.file("/proc/sys/kernel/osrelease", "5.15.0-139-generic")
    t.file("/var/run/secrets/kubernetes.io/serviceaccount/token", "(token not recorded)")
    cpus(t, 128, governor="performance", epp=None, driver="acpi-cpufreq",
         boost=("cpufreq/boost", 1), model="AMD EPYC 7763 64-Core Processor", cores=64,
         numa={0: "0-31,64-95", 1: "32-63,96-127"})
    uuid = "GPU-5a8d4c1e-7b36-2f90-8e41-0c9d3b6f2a17"
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
           "NVIDIA_VISIBLE_DEVICES": uuid, "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
           "OMP_NUM_THREADS": "8"}
    # cgroup v2 with a private cgroup namespace: the pod's limits sit at the root.
    process(t, allowed="0-127", cgroup="0::/", cpu_max="800000 100000", pid1_cgroup="0::/",
            environ=env, memlock="8388608")
    t.file("/sys/fs/cgroup/memory.max", str(64 << 30))
    t.file("/sys/fs/cgroup/memory.current", str(11 << 30))
    memory(t, 1007, 930.0)
    # /proc/modules is the host's; the runtime gave the pod the device node of its GPU
    # only (it keeps the host's minor number: the second GPU is /dev/nvidia1).
    modules(t, ["nvidia_uvm", "nvidia_peermem", "nvidia_modeset", "nvidia"], "550.90.07",
            dev_nodes=("nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"))
    for addr, port, node in (("0000:07:00.0", "0000:00:01.1", 0),
                             ("0000:0f:00.0", "0000:00:03.1", 0),
                             ("0000:87:00.0", "0000:80:01.1", 1),
                             ("0000:90:00.0", "0000:80:03.1", 1)):
        pci_gpu(t, addr, port, device="0x20b0", driver="nvidia", numa=node,
                cur=("16.0 GT/s PCIe", 16), audio=False)
    for ib in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"):
        t.file(f"/sys/class/infiniband/{ib}/node_type", "1: CA")
    nvme_disk(t, parts=1, model="SAMSUNG MZWLR3T8HBLS-00007", sectors=7501476528)
    mountinfo(t, [
        "0:412 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/a/fs,"
        "upperdir=/var/lib/containerd/b/fs,workdir=/var/lib/containerd/b/work",
        "0:413 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
        "0:415 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=16777216k,inode64",
        "259:1 /mnt/local-ssd/pv-0042 /data rw,relatime - ext4 /dev/nvme0n1p1 rw",
    ])
    t.file("/data/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/data": {"total_bytes": 3840755982336,
                                                        "free_bytes": 2240755982336}})
    python_env(t, py="3.10.12", glibc="2.35", wheel=TORCH_251)
    t.json("/pitstop-recorded/nvml.json", nvml(
        "550.90.07", "12.4", [gpu(A100, 0, ":0F:00.0", uuid=uuid, temperature_c=31,
                                  power_draw_w=58.1, pcie_link_gen=4, clocks_event_reasons=1)],
        "NVML inside the pod: only the GPU the device plugin gave it (A100-SXM4-40GB board "
        "values, see machine_parts.py), idle"))
    t.json("/pitstop-recorded/torch_runtime.json", {
        "_origin": "the result `pitstop doctor --torch` records, values hand-set for this pod",
        "import_s": 1.38, "version": "2.5.1", "cuda": "12.4", "num_threads": 8,
        "num_interop_threads": 64, "cuda_available": True, "device_count": 1,
        "cudnn_available": True, "cudnn_version": 90100, "nccl_version": "2.21.5",
        "cudnn_conv_ok": True})
    origin(t, "k8s-pod-1of4 (healthy control): a Kubernetes pod (containerd, NVIDIA device "
              "plugin, envvar strategy) on an HGX node with four A100-SXM4-40GB, two per "
              "socket of a 2 x EPYC 7763 (128 CPUs), that requested nvidia.com/gpu: 1 and got "
              "the second one: NVIDIA_VISIBLE_DEVICES is its UUID, /dev/nvidia1 its only GPU "
              "node, NVML lists one GPU, while sysfs shows all four on the PCI bus (sysfs is "
              "not namespaced). Limits cpu: 8 (cgroup v2 cpu.max 800000 100000) with "
              "OMP_NUM_THREADS=8 in the pod spec, memory: 64Gi; /dev/shm is a 16Gi "
              "memory-backed emptyDir; data on a local NVMe PersistentVolume; the host's "
              "InfiniBand HCAs show in sysfs but are not passed in (no /dev/infiniband). "
              "Driver 550.90.07. Nothing is wrong.")


def m_cloud_ebs(t: Tree) -> None:
    os_release(t, "Ubuntu 22.04.5 LTS", "ubuntu", "22.04", "jammy")
    t.file("/proc/sys/kernel/osrelease", "6.8.0-1029-aws")
    t.file("/sys/class/dmi/id/sys_vendor", "Amazon EC2")
    t.file("/sys/class/dmi/id/product_name", "g5.2xlarge")
    cpus(t, 8, governor=None, epp=None, driver="", boost=None,
         model="AMD EPYC 7R32", hypervisor=True, cores=4)
    process(t, allowed="0-7", memlock="8388608")
    memory(t, 31, 28.5, swappiness=60)
    modules(t, NVIDIA_LOADED, "550.127.05")
    kernel_tree(t, "6.8.0-1029-aws", headers=True,
                nvidia="kernel/nvidia-550srv/nvidia.ko", compressed=False)
    # Nitro passes the GPU through on the root bus, with no bridge above it.
    pci_gpu(t, "0000:00:1e.0", None, device="0x2237", driver="nvidia",
            cur=("16.0 GT/s PCIe", 16), audio=False)
    # EBS volumes are NVMe namespaces whose model names the service; the instance store
    # is local NVMe.
    nvme_disk(t, parts=1, model="Amazon Elastic Block Store", index=0,
              pci="0000:00:04.0", sectors=419430400)
    nvme_disk(t, parts=0, model="Amazon Elastic Block Store", index=1,
              pci="0000:00:1f.0", sectors=4294967296)
    nvme_disk(t, parts=0, model="Amazon EC2 NVMe Instance Storage", index=2,
              pci="0000:00:1d.0", sectors=878906250)
    mountinfo(t, ["259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw,discard,errors=remount-ro",
                  "0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
                  "0:24 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64",
                  "259:8 / /data rw,noatime - xfs /dev/nvme1n1 rw,attr2,inode64"])
    t.file("/data/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {
        "/": {"total_bytes": 208111882240, "free_bytes": 151111882240},
        "/data": {"total_bytes": 2198754115584, "free_bytes": 1098754115584}})
    python_env(t, py="3.10.12", glibc="2.35", wheel=TORCH_251)
    t.json("/pitstop-recorded/nvml.json", nvml(
        "550.127.05", "12.4", [gpu(A10G, 0, ":00:1E.0", temperature_c=27, power_draw_w=25.9,
                                   pcie_link_gen=1)],
        "A10G board values (see machine_parts.py), idle"))
    origin(t, "cloud-vm-ebs: an AWS g5.2xlarge (Nitro, 8 vCPU AMD EPYC 7R32, 32 GiB, one A10G "
              "passed through at 0000:00:1e.0 with no bridge above it) running Ubuntu 22.04 "
              "with the 6.8 AWS kernel and Canonical's prebuilt nvidia 550-server module; no "
              "cpufreq in the guest. The dataset is on a 2 TiB EBS gp3 volume (nvme1n1: "
              "NVMe model 'Amazon Elastic Block Store', as AWS documents for Nitro; "
              "rotational=0, read_ahead_kb=128) mounted at /data; the instance store "
              "(nvme2n1, 'Amazon EC2 NVMe Instance Storage') is unused. Planted: the data "
              "on a network volume, with the default readahead.")


def m_slurm(t: Tree) -> None:
    os_release(t, "Ubuntu 22.04.5 LTS", "ubuntu", "22.04", "jammy")
    t.file("/proc/sys/kernel/osrelease", "5.15.0-139-generic")
    t.file("/sys/class/dmi/id/sys_vendor", "NVIDIA")
    t.file("/sys/class/dmi/id/product_name", "DGXA100 920-23687-2530-000")
    cpus(t, 128, governor="performance", epp=None, driver="acpi-cpufreq",
         boost=("cpufreq/boost", 1), model="AMD EPYC 7742 64-Core Processor", cores=64,
         numa={0: "0-31,64-95", 1: "32-63,96-127"})
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "2,3", "SLURM_STEP_GPUS": "2,3",
           "SLURM_CPUS_PER_TASK": "16", "CUDA_VISIBLE_DEVICES": "0,1",
           "SLURM_GPUS_ON_NODE": "2"}
    process(t, allowed="0-7,64-71", environ=env, memlock="unlimited",
            cgroup="0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0")
    t.file("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242/memory.max", str(256 << 30))
    t.file("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0/"
           "memory.current", str(9 << 30))
    memory(t, 1007, 980.0)
    modules(t, [*NVIDIA_LOADED, "nvidia_peermem"], "570.172.08",
            dev_nodes=(*(f"nvidia{i}" for i in range(8)), "nvidiactl", "nvidia-uvm"))
    kernel_tree(t, "5.15.0-139-generic", headers=True,
                nvidia="kernel/nvidia-570srv/nvidia.ko", compressed=False)
    buses = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")
    for i, bus in enumerate(buses):
        pci_gpu(t, f"0000:{bus}:00.0", f"0000:{'00' if i < 4 else '80'}:0{i % 4 + 1}.1",
                device="0x20b0", driver="nvidia", numa=0 if i < 4 else 1,
                cur=("16.0 GT/s PCIe", 16), audio=False)
    for ib in range(8):
        t.file(f"/sys/class/infiniband/mlx5_{ib}/node_type", "1: CA")
        t.file(f"/dev/infiniband/uverbs{ib}", "")
    nvme_disk(t, parts=1, model="SAMSUNG MZWLJ3T8HBLS-00007", sectors=7501476528)
    mountinfo(t, ["259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw,errors=remount-ro",
                  "0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
                  "0:24 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,inode64"])
    t.file("/raid/datasets/imagenet/.keep", "")
    t.json("/pitstop-recorded/statvfs.json", {"/": {"total_bytes": 3840755982336,
                                                    "free_bytes": 2840755982336}})
    python_env(t, py="3.10.12", glibc="2.35", wheel=TORCH_280)
    # With ConstrainDevices the job's cgroup lets it open only its GPUs: NVML lists two.
    t.json("/pitstop-recorded/nvml.json", nvml(
        "570.172.08", "12.8", [gpu(A100, 0, ":47:00.0", pcie_link_gen=4),
                               gpu(A100, 1, ":4E:00.0", pcie_link_gen=4)],
        "NVML in a Slurm job constrained to GPUs 2 and 3 (A100-SXM4-40GB board values)"))
    origin(t, "slurm-node-2of8 (healthy control): a DGX A100 (8 x A100-SXM4-40GB, four per "
              "socket of 2 x EPYC 7742, 8 InfiniBand HCAs) running a Slurm job that got GPUs "
              "2 and 3 (SLURM_JOB_GPUS=2,3; Slurm renumbers them CUDA_VISIBLE_DEVICES=0,1) "
              "and 16 CPUs on socket 0 (cpuset: Cpus_allowed_list 0-7,64-71), under cgroup "
              "v2 with ConstrainDevices (its eBPF device filter is not readable, so NVML "
              "listing two GPUs is the evidence). memlock unlimited (PropagateResourceLimits); "
              "data on the node's local NVMe at /raid/datasets. Driver 570.172.08, torch 2.8.0. "
              "Nothing is wrong.")


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
    "kernel-upgrade-dkms": m_kernel_upgrade,
    "secure-boot-mok": m_secure_boot,
    "k8s-pod-1of4": m_k8s_pod,
    "cloud-vm-ebs": m_cloud_ebs,
    "slurm-node-2of8": m_slurm,
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
