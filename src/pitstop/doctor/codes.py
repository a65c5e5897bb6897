"""Documentation of every ``pitstop doctor`` finding code (DR###), registered at import.

``pitstop explain DR004`` prints one; ``docs/findings.md`` is generated from all of
them. Codes are stable: a code keeps its meaning forever, new checks get new codes.
"""

from __future__ import annotations

from pitstop.findings import CodeDoc, Severity, register

P, W, INFO = Severity.PROBLEM, Severity.WARNING, Severity.INFO

_SA = "`pitstop system apply --only {}` makes the same change, records the previous value, and `pitstop system revert` restores it."


def _d(code: str, name: str, title: str, category: str, severity: Severity, what: str,
       why: str, example: str, fix: str, fix_safety: str, *refs: str) -> CodeDoc:
    return CodeDoc(code=code, name=name, title=title, category=category, severity=severity,
                   what=what, why=why, example=example, fix=fix, fix_safety=fix_safety,
                   references=tuple(refs))


DEBIAN_DRIVER = """```sh
# Debian 12 (bookworm) / 13 (trixie)
echo 'deb http://deb.debian.org/debian bookworm contrib non-free non-free-firmware' \\
  | sudo tee /etc/apt/sources.list.d/nvidia-nonfree.list     # trixie on Debian 13
sudo apt update
sudo apt install nvidia-driver firmware-misc-nonfree linux-headers-$(uname -r)
#   (or nvidia-open-kernel-dkms: open kernel modules, Turing and newer)
printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf
sudo update-initramfs -u && sudo reboot

# Ubuntu 22.04 / 24.04
sudo ubuntu-drivers install && sudo reboot
```

Debian's own packages stop at driver 535 (bookworm) and 550 (trixie). A GPU or a
CUDA 12.8+/13 wheel that needs a newer driver needs NVIDIA's CUDA repository:

```sh
wget https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt update
sudo apt install cuda-drivers   # or nvidia-open
```"""

COPY_LOCAL = """```sh
rsync -a --info=progress2 /mnt/dataset/ /local/nvme/dataset/
pitstop doctor --data /local/nvme/dataset --io
```
or pack many small samples into large shards (WebDataset tar files) that are read
sequentially."""

DOCS = [
    # ---------------------------------------------------------------- driver / CUDA
    _d("DR001", "nvidia-gpu-without-driver", "NVIDIA GPU present but no working NVIDIA driver",
       "driver", P,
       "Finds NVIDIA display devices on the PCI bus (sysfs vendor `0x10de`, class `0x03xxxx`) "
       "and checks that the `nvidia` kernel module is loaded (`/proc/modules`), bound to them, "
       "and that NVML answers. NVML's 'Driver/library version mismatch' (packages upgraded "
       "without a reboot) is reported with its own fix: reboot.",
       "Without the NVIDIA driver CUDA cannot start: torch reports `cuda.is_available() == "
       "False` and every training run silently uses the CPU, 10-100x slower.",
       "```\nDR001 problem  1 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver\n"
       "  nvidia_gpus_on_pci=1; drivers=None; nvidia_module_loaded=False; "
       "nvml=libnvidia-ml.so.1 not found\n```",
       DEBIAN_DRIVER,
       "manual: installing a kernel driver needs root and a reboot; pitstop never does it.",
       "https://wiki.debian.org/NvidiaGraphicsDrivers",
       "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"),
    _d("DR002", "nouveau-driver-loaded", "The open-source nouveau driver holds the GPU",
       "driver", P,
       "Reports the `nouveau` module in `/proc/modules` on a machine with an NVIDIA GPU, and "
       "whether a `blacklist nouveau` line exists in `/etc/modprobe.d`.",
       "nouveau drives the display but has no CUDA: while it holds the GPU, the NVIDIA driver "
       "cannot bind to it and training runs on the CPU.",
       "```\n$ grep nouveau /proc/modules\nnouveau 2760704 3 - Live 0x0000000000000000\n```",
       DEBIAN_DRIVER,
       "manual: needs root and a reboot; the graphical session restarts."),
    _d("DR003", "torch-not-installed", "torch is not installed in this Python", "driver", W,
       "Looks for a `torch-*.dist-info` and `torch/version.py` on the Python path of the "
       "interpreter pitstop runs in (or the one given with `--python`), without importing "
       "torch.",
       "pitstop's runtime parts (bench, profile, tune) and your training need torch; the doctor "
       "also reads the wheel's CUDA version from it.",
       "```\nDR003 warning  torch is not installed in the Python pitstop runs in\n```",
       "Install the CUDA build that matches the driver (the doctor prints the exact index), "
       "e.g.\n```sh\npip install torch --index-url https://download.pytorch.org/whl/cu128\n```\n"
       "If pitstop lives in another environment than your training, point it there: "
       "`pitstop doctor --python ~/venv/bin/python`.",
       "manual: pitstop never installs packages; the command changes only the chosen environment."),
    _d("DR004", "cpu-only-torch-on-gpu-machine", "CPU-only torch wheel on a machine with an NVIDIA GPU",
       "driver", P,
       "Reads the torch wheel's `torch/version.py`: `cuda = None` (a `+cpu` build) while the "
       "PCI bus shows an NVIDIA GPU.",
       "A CPU build cannot use the GPU at all: `torch.cuda.is_available()` is False and the "
       "model trains on the CPU. This happens when `pip install torch` picked the CPU index or "
       "a requirements file pinned `+cpu`.",
       "```\n$ python -c 'import torch; print(torch.__version__, torch.version.cuda)'\n"
       "2.7.0+cpu None\n```",
       "Reinstall the same release from the CUDA index that the driver supports; the finding "
       "names the variant for your driver:\n```sh\npip install --force-reinstall torch==2.7.0 "
       "--index-url https://download.pytorch.org/whl/cu126\n```",
       "manual: replaces packages in your environment (add torchvision/torchaudio to the same "
       "command so their builds match).",
       "https://pytorch.org/get-started/locally/"),
    _d("DR005", "driver-too-old-for-torch-cuda", "NVIDIA driver older than the torch wheel's CUDA needs",
       "driver", P,
       "Compares the driver version (NVML, or `/proc/driver/nvidia/version`) with the CUDA "
       "version the torch wheel was built for, using one table (`pitstop/doctor/data.py`): "
       "minor-version compatibility needs >= 450.80.02 for CUDA 11.x, >= 525.60.13 for 12.x, "
       ">= 580 for 13.x; full support needs the driver the toolkit shipped with (12.8: 570.26).",
       "Below the minor-version floor CUDA initialisation fails (\"The NVIDIA driver on your "
       "system is too old\"). Between the floor and the toolkit's driver the wheel runs, but "
       "without PTX JIT: torch.compile/Triton kernels and libraries that JIT newer PTX fail or "
       "fall back.",
       "```\nDR005 warning  driver 535.183.01 is older than CUDA 12.8 wants (570.26): it runs "
       "under minor-version compatibility\n```",
       "Either upgrade the driver (Debian 12 packages 535, Debian 13 550; newer ones come from "
       "NVIDIA's CUDA repository, `sudo apt install cuda-drivers` after installing "
       "`cuda-keyring`), or install the torch variant the driver runs:\n```sh\n"
       "pip install --force-reinstall torch==2.7.0 --index-url https://download.pytorch.org/whl/cu126\n```",
       "manual: a driver upgrade needs root and a reboot.",
       "https://docs.nvidia.com/deploy/cuda-compatibility/",
       "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/"),
    _d("DR006", "cudnn-missing-or-unusable", "cuDNN missing, mismatched or not usable", "driver", P,
       "Reads the `nvidia-cudnn-*` wheel torch pins and the one installed (or `libcudnn*` bundled "
       "in `torch/lib`); with `--torch` it imports torch in a subprocess, reads "
       "`torch.backends.cudnn.version()` and runs a small convolution on the GPU.",
       "Convolutions, RNNs and attention kernels come from cuDNN; a missing or mismatched "
       "cuDNN makes them fail (`CUDNN_STATUS_NOT_INITIALIZED`) or fall back to slow paths.",
       "```\nDR006 warning  installed cuDNN differs from the version torch was built against: "
       "nvidia-cudnn-cu12 8.9.2.26 (torch wants 9.1.0.70)\n```",
       "Install exactly the pinned version:\n```sh\npip install nvidia-cudnn-cu12==9.1.0.70\n```",
       "manual: changes packages in your environment."),
    _d("DR007", "cuda-init-fails", "torch cannot initialise CUDA", "driver", P,
       "With `--torch`: imports torch in a subprocess and calls `torch.cuda.is_available()` and "
       "a first allocation, reporting the CUDA error. Without `--torch` it reports 'could not "
       "check' (importing torch takes 1-2 s, more than the whole doctor).",
       "A CUDA build that cannot initialise trains on the CPU or crashes at the first `.cuda()`.",
       "```\nDR007 problem  torch cannot initialise CUDA: RuntimeError: Found no NVIDIA driver "
       "on your system\n```",
       "Read the error: a missing driver (DR001), a driver too old (DR005), a container without "
       "`--gpus` (DR061), or `CUDA_VISIBLE_DEVICES` hiding all GPUs (DR074).",
       "manual: the fix depends on the error; pitstop only reports it."),
    _d("DR008", "cuda-libraries-mismatch", "CUDA library wheels differ from torch's pins", "driver", W,
       "Reads every `nvidia-*` requirement in torch's own wheel metadata (`Requires-Dist` in "
       "`torch-*.dist-info/METADATA`: 12 to 15 of them, cuBLAS, cuDNN, NCCL, cuFFT, cuSPARSELt, "
       "cuFile, ...), evaluates its environment marker for the inspected interpreter "
       "(`platform_machine == \"x86_64\"`, `python_version`, ...; the architecture from the "
       "interpreter, torch's `WHEEL` tag or `/proc/cpuinfo`), and compares each that applies "
       "with the installed `nvidia-*` distributions. 'Missing' is only a requirement that "
       "applies and is not installed; one whose marker cannot be evaluated is listed as "
       "undecided, never as missing.",
       "Another package (TensorFlow, JAX, an old requirements file) may have replaced a CUDA "
       "library with another version; torch then loads a library it was not tested with: "
       "crashes, missing symbols or slower kernels.",
       "```\nDR008 warning  1 CUDA library wheel(s) differ from torch's pins\n"
       "  mismatched={'nvidia-nccl-cu12': {'torch_wants': '2.21.5', 'installed': '2.18.1'}}\n```",
       "```sh\npip install nvidia-nccl-cu12==2.21.5   # the pinned versions, as printed\n```",
       "safe to run; it restores what the torch wheel declares."),
    _d("DR009", "nvidia-module-missing-for-kernel",
       "No loadable NVIDIA kernel module for the running kernel", "driver", P,
       "When an NVIDIA GPU is on the PCI bus and the `nvidia` module is not loaded, looks for "
       "the module on disk for the running kernel (`uname -r`) and for every other installed "
       "kernel: `/lib/modules/<kernel>/updates/dkms` (DKMS; Debian names it "
       "`nvidia-current.ko*`), `updates`, `extra`, `kernel/drivers/video` (NVIDIA's installer), "
       "`kernel/nvidia-<branch>*` (Ubuntu's prebuilt `linux-modules-nvidia-*`) and "
       "`modules.dep`; what DKMS built (`/var/lib/dkms/<module>/<version>/<kernel>/`); whether "
       "the running kernel's headers are installed (`/lib/modules/<kernel>/build`, "
       "`/usr/src/linux-headers-<kernel>`); and Secure Boot (the `SecureBoot` EFI variable, "
       "kernel lockdown, whether the DKMS signing key is in `MokListRT`). It names the cause: "
       "no module for this kernel (and whether its headers are missing), nouveau loaded first, "
       "Secure Boot refusing an unsigned or unenrolled module, or a module that is simply not "
       "loaded. DR001 quotes the same cause and fix.",
       "DKMS builds the NVIDIA module for each kernel when that kernel is installed, and only "
       "if its headers are there. After `apt upgrade` brings a new kernel without its headers "
       "(or the build failed), the machine boots the new kernel, `nvidia` is missing, and every "
       "training run silently falls back to the CPU, until the module is built for it.",
       "```\nDR009 problem  no NVIDIA kernel module for the running kernel 6.1.0-37-amd64 (built "
       "for 6.1.0-35-amd64); the headers of 6.1.0-37-amd64 are not installed, so DKMS could not "
       "build it\n  running_kernel=6.1.0-37-amd64; dkms=['nvidia-current/535.247.01 built for "
       "6.1.0-35-amd64']\n```",
       "Debian 12/13 (DKMS):\n```sh\nsudo apt install linux-headers-$(uname -r)\n"
       "sudo dkms autoinstall      # or: sudo apt install --reinstall nvidia-kernel-dkms\n"
       "sudo modprobe nvidia && nvidia-smi\n"
       "sudo apt install linux-headers-amd64   # headers follow every future kernel\n```\n"
       "Ubuntu with Canonical's prebuilt modules:\n```sh\n"
       "sudo apt install linux-modules-nvidia-550-$(uname -r)   # or: sudo ubuntu-drivers install\n"
       "```\nUbuntu with DKMS: the Debian commands, or "
       "`sudo apt install --reinstall nvidia-dkms-550`.\n\n"
       "Module built but not loaded with Secure Boot on: enrol the DKMS signing key as a "
       "Machine Owner Key and reboot:\n```sh\nsudo mokutil --import /var/lib/dkms/mok.pub   "
       "# Ubuntu: /var/lib/shim-signed/mok/MOK.der\nsudo reboot   # MOK manager: Enroll MOK -> "
       "Continue -> password\n```\nModule built but nouveau holds the GPU: blacklist nouveau "
       "and `sudo update-initramfs -u`, then reboot.",
       "manual: needs root; building a module takes a minute, enrolling a MOK needs a reboot "
       "and someone at the console.",
       "https://wiki.debian.org/NvidiaGraphicsDrivers",
       "https://wiki.debian.org/SecureBoot#MOK_-_Machine_Owner_Key",
       "https://ubuntu.com/server/docs/nvidia-drivers-installation"),
    # ---------------------------------------------------------------- GPU hardware
    _d("DR010", "pcie-link-degraded", "GPU PCIe link below its maximum under load", "gpu", P,
       "Compares each GPU's current PCIe generation and width (NVML) with the maximum the GPU "
       "and slot support. The generation is judged only while the GPU is busy (>= 20 % "
       "utilisation), because idle links drop to Gen1 to save power; fewer lanes than the "
       "maximum is reported at any load.",
       "Host-to-device copies (every batch) and multi-GPU traffic without NVLink go over PCIe: "
       "a Gen3 x4 link moves ~3.9 GB/s instead of ~31.5 GB/s for Gen4 x16.",
       "```\nGPU 0: PCIe link at Gen3 x4 under load, maximum Gen4 x16\n```",
       "Put the GPU in a CPU-attached x16 slot (slots sharing lanes with M.2 drop to x8/x4), "
       "remove riser cables, set the slot to Auto/Gen4 in the firmware; verify with\n"
       "```sh\nsudo lspci -vv -s 01:00.0 | grep -E 'LnkCap|LnkSta'\n```",
       "manual: hardware; nothing to run, pitstop only measures the link."),
    _d("DR011", "pcie-slot-below-gpu", "Slot supports a lower PCIe generation or width than the GPU",
       "gpu", W,
       "Compares maximums only (valid at idle): the GPU's own maximum generation "
       "(`nvmlDeviceGetGpuMaxPcieLinkGeneration`, sysfs `max_link_speed`) against the link "
       "maximum and the upstream port's `max_link_speed`/`max_link_width`. In a virtual "
       "machine the port is the hypervisor's emulation and says nothing about the physical "
       "slot, so there only DR010 (the link under load) judges.",
       "The slot caps the link even at full load: a Gen4 GPU in a Gen3 slot has half the copy "
       "bandwidth.",
       "```\nGPU 0: slot limits the link to Gen3; the GPU supports Gen4\n```",
       "Use a slot that supports the GPU's generation and width, or check the slot's PCIe "
       "setting in the firmware setup.",
       "manual: hardware; nothing to run, pitstop only compares the maximums."),
    _d("DR012", "pcie-replay-errors", "PCIe replays: the GPU link retransmits packets", "gpu", W,
       "Reads NVML's PCIe replay counter (since boot).",
       "Every replay is a retransmission after a corrupted packet; a marginal link (riser, dust, "
       "bad seating) loses bandwidth and can end in the GPU falling off the bus.",
       "```\nGPU 0: 4312 PCIe replays since boot\n```",
       "Reseat the GPU and any riser, check power connectors, and watch whether the count "
       "grows during training: `nvidia-smi -q -d PCIE`.",
       "manual: hardware; a growing count is worth a maintenance window."),
    _d("DR013", "gpu-thermal-slowdown", "GPU clocks reduced by thermal slowdown", "gpu", P,
       "Decodes NVML's clock event reasons and reports the software and hardware thermal "
       "slowdown bits (the GPU-idle bit is ignored).",
       "Thermal slowdown lowers the SM clock, often by hundreds of MHz, for as long as the GPU "
       "is hot: every step takes longer.",
       "```\nGPU 0: clocks reduced by sw_thermal_slowdown at 87 °C\n```",
       "Improve cooling (clean heatsinks, fan curve, inlet air, spacing between cards); a "
       "slightly lower power limit (`sudo nvidia-smi -pl W`) avoids throttling at a small cost "
       "in peak speed.",
       "manual: hardware/cooling."),
    _d("DR014", "gpu-hardware-slowdown", "GPU hardware slowdown or power brake active", "gpu", P,
       "Reports NVML's HW slowdown and HW power brake clock event reasons.",
       "These are asserted by the board or an external power signal and cut clocks to about "
       "half: the PSU or power cabling cannot deliver, or the board overheats.",
       "```\nGPU 0: hardware slowdown active (hw_power_brake_slowdown)\n```",
       "Use separate PCIe power cables per connector, a PSU rated for the GPUs' peak draw, and "
       "check the board temperature.",
       "manual: hardware (cabling, power supply, cooling)."),
    _d("DR015", "gpu-clocks-limited-by-setting", "GPU clocks held down by an application/locked clock setting",
       "gpu", W,
       "Reports the NVML 'applications clocks setting' and 'display clock setting' clock event "
       "reasons: someone ran `nvidia-smi -ac` or `-lgc` and the setting stayed.",
       "Locked or application clocks below the maximum slow every kernel.",
       "```\nGPU 0: clocks held down by a setting (applications_clocks_setting)\n```",
       "```sh\nsudo nvidia-smi -i 0 -rgc   # reset locked GPU clocks\n"
       "sudo nvidia-smi -i 0 -rac   # reset application clocks\n```",
       "safe: restores the driver's default clock policy."),
    _d("DR016", "gpu-temperature-near-slowdown", "GPU temperature at or near its slowdown threshold",
       "gpu", W,
       "Compares the GPU temperature with NVML's slowdown threshold: within 5 °C is a warning, "
       "at or above it a problem.",
       "At the threshold the GPU starts lowering its clocks (DR013); near it, a long run will "
       "get there.",
       "```\nGPU 0: 83 °C, within 4 °C of the slowdown threshold 87 °C\n```",
       "Improve airflow and fan speed before long runs.",
       "manual: hardware/cooling."),
    _d("DR017", "gpu-power-limit-lowered", "GPU power limit set below its default", "gpu", W,
       "Compares NVML's current power management limit with the default limit.",
       "A lowered power limit caps clocks under load (the 'sw power cap' clock event): "
       "compute-bound training runs slower in proportion.",
       "```\nGPU 0: power limit 300 W is below the default 450 W and the GPU is capped by it "
       "right now\n```",
       "```sh\nsudo nvidia-smi -i 0 -pl 450\n```\n" + _SA.format("gpu-power-limit"),
       "safe: the default limit is the vendor's rating; it resets at reboot unless persisted."),
    _d("DR018", "gpu-persistence-mode-off", "GPU persistence mode off", "gpu", W,
       "Reads NVML's persistence mode per GPU.",
       "Without persistence the driver tears the GPU down when the last process exits: every "
       "`python train.py` pays a re-initialisation (up to seconds per GPU) and settings such as "
       "clocks reset between jobs.",
       "```\nGPU 0: persistence mode off\n```",
       "```sh\nsudo systemctl enable --now nvidia-persistenced\n# or until reboot:\n"
       "sudo nvidia-smi -pm 1\n```\n" + _SA.format("gpu-persistence"),
       "safe: a few watts more at idle."),
    _d("DR019", "gpu-used-by-other-processes", "Other processes are using the GPU", "gpu", W,
       "Lists the compute and graphics processes NVML reports on each GPU (PID, name, memory), "
       "other than pitstop itself. Graphics-only processes under 2 GiB (the desktop: Xorg, "
       "the compositor) are listed as display processes, not as competitors. With "
       "`CUDA_VISIBLE_DEVICES` set, only the GPUs it selects are judged (on a shared node "
       "another job's GPU is not yours). In a container, processes of other PID namespaces "
       "show without a name.",
       "Another job shares the SMs and memory bandwidth (both runs slow down) and its memory "
       "shrinks what your batch can use.",
       "```\nGPU 0: 1 other process(es) use this GPU: pid 4242 python train_old.py 10.2 GiB\n```",
       "```sh\nnvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n"
       "export CUDA_VISIBLE_DEVICES=1   # or stop the other job\n```",
       "manual: stopping a process may lose someone's work."),
    _d("DR020", "gpu-memory-errors-pending", "GPU memory page retirement or row remapping pending",
       "gpu", W,
       "Reads NVML's retired-pages-pending status (older data-centre GPUs) and remapped rows "
       "(A100/H100 and newer): pending remaps and failed remaps.",
       "A pending retirement/remap takes effect only after a GPU reset; until then the faulty "
       "memory is still in use and ECC errors can kill the run. A failed remap means the GPU "
       "needs replacing.",
       "```\nGPU 0: row remapping pending: takes effect only after a GPU reset\n```",
       "```sh\nsudo nvidia-smi -i 0 -r   # with no process on the GPU, or reboot\n```",
       "manual: resetting a GPU stops every process on it."),
    _d("DR021", "gpu-numa-mismatch", "Process may not run on the NUMA node its GPU hangs on", "gpu", W,
       "On multi-socket machines, reads the `numa_node` (sysfs) of each GPU this process will "
       "use (those NVML sees, narrowed by `CUDA_VISIBLE_DEVICES`) and the node CPU lists, and "
       "compares them with the CPUs this process may run on.",
       "Pinned host buffers and DataLoader workers on the far socket make every host-device "
       "copy cross the inter-socket link: lower copy bandwidth and higher latency.",
       "```\nGPU at 0000:c1:00.0: this process may not run on NUMA node 1, where the GPU hangs\n```",
       "```sh\nsudo apt install numactl\nnumactl --cpunodebind=1 --membind=1 python train.py\n```\n"
       "With torchrun, bind each local rank to its GPU's node.",
       "safe: binding only changes where the process runs, not what it computes."),
    _d("DR022", "gpu-not-visible-to-driver", "GPU on the PCI bus but missing from the driver", "gpu", P,
       "Compares the GPUs NVML reports (and those it lists but cannot read) with the GPUs this "
       "process was given. The PCI bus shows the host's GPUs also inside a container, so each "
       "rule that restricts the device nodes gives a count NVML may show: the cgroup v1 device "
       "rules (`devices.list`, one `c 195:N` per GPU), `NVIDIA_VISIBLE_DEVICES` (a list, "
       "`none`/`void`, or the device plugin's `/var/run/nvidia-container-devices`), in a "
       "container its `/dev/nvidiaN` nodes, and Slurm's `SLURM_STEP_GPUS`/`SLURM_JOB_GPUS`; "
       "without any of them, `CUDA_VISIBLE_DEVICES` (a scheduler that sets only it may filter "
       "the nodes with an unreadable cgroup v2 rule). A rule that is not enforced on the nodes "
       "leaves NVML every GPU (`CUDA_VISIBLE_DEVICES` never hides GPUs from the driver), so "
       "NVML seeing fewer than the tightest rule, or a count between that and all, is a lost "
       "GPU. MIG instances in a variable are not GPUs; GPUs bound to `vfio-pci` (passed to a "
       "VM) are not expected. The finding says which rule decided.",
       "A GPU that fell off the bus (Xid 79) or failed to initialise is not used at all; "
       "multi-GPU jobs start with fewer ranks or fail.",
       "```\n1 of 8 GPUs on the PCI bus are not usable by the driver\n"
       "1 of the 2 GPUs given to this container (NVIDIA_VISIBLE_DEVICES=GPU-1f..,GPU-9c.. "
       "(2 GPU(s))) are not usable by the driver\n"
       "1 of the 8 GPUs on the PCI bus are not usable by the driver (...): NVML sees 7, more "
       "than the 2 that CUDA_VISIBLE_DEVICES=0,1 (2 GPU(s)) gives, ...\n```",
       "```sh\nsudo dmesg | grep -iE 'NVRM|Xid'\nsudo reboot   # a power cycle is usually needed\n```",
       "manual: a reboot or GPU reset interrupts every job on the machine."),
    # ---------------------------------------------------------------- storage
    _d("DR030", "data-on-rotational-disk", "Training data on a spinning disk", "storage", P,
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
    _d("DR031", "data-on-network-filesystem", "Training data on a network or FUSE filesystem",
       "storage", W,
       "Flags the filesystem type under `--data`: nfs, cifs/smb, 9p, ceph, glusterfs, lustre, "
       "virtiofs, and FUSE filesystems (sshfs, s3fs, gcsfuse, rclone, ...); and block devices "
       "that are network volumes, named as such: AWS EBS and GCP Persistent Disk / Azure "
       "managed disks by their sysfs model, Ceph RBD and NBD devices by name, iSCSI LUNs by "
       "their session in the sysfs path. Instance-local NVMe (`Amazon EC2 NVMe Instance "
       "Storage`, GCP `nvme_card`) is local.",
       "Every small file costs network round trips (metadata + data); FUSE adds user-space "
       "copies. Throughput per worker is often 10-50x below a local SSD.",
       "```\ndata on a FUSE filesystem sshfs (user@host:/data)\n```",
       COPY_LOCAL, "manual: copying data needs space on the fast disk; pitstop only reads."),
    _d("DR032", "data-on-usb-disk", "Training data on a USB-attached disk", "storage", W,
       "Reports disks behind the data path whose sysfs device path runs through a USB "
       "controller.",
       "USB bridges limit queue depth and throughput (often < 400 MB/s, fewer IOPS) and can "
       "disconnect under load.",
       "```\ndata on a USB-attached disk (sdb (usb SSD Portable SSD T7, 931.5 GiB))\n```",
       COPY_LOCAL, "manual: copying data needs space on the local disk; pitstop only reads."),
    _d("DR033", "data-disk-low-free-space", "Little free space where the data lives", "storage", W,
       "statvfs of the data path: free below 5 GiB or 5 %.",
       "Checkpoints, caches (torch.compile, datasets) and logs fail to write mid-run; "
       "near-full filesystems also fragment and slow down.",
       "```\nonly 3.2 GiB (1.1 %) free on /data\n```",
       "```sh\ndu -xh --max-depth=2 /data | sort -h | tail -20\n```",
       "manual: deleting files is your decision."),
    _d("DR034", "data-random-read-slow", "Random reads of the data too slow for a DataLoader",
       "storage", W,
       "With `--io`: reads random 4 KiB and 128 KiB blocks of existing files under `--data` "
       "(O_DIRECT where the filesystem allows it, queue depth 1, a few seconds) and reports "
       "IOPS and MB/s. It never writes to your data; if there is too little data it measures a "
       "64 MiB temp file it creates beside it and removes.",
       "A DataLoader reading ImageNet-sized JPEGs (~110 KiB) at 2,000 images/s needs about "
       "220 MB/s of random reads; below half of that the GPU waits for data.",
       "```\nrandom 128 KiB reads at 18 MB/s: a DataLoader at 2,000 images/s needs ~220 MB/s\n```",
       COPY_LOCAL, "manual: copying data needs space on a fast disk; pitstop only reads."),
    _d("DR035", "data-disk-readahead-small",
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
       + _SA.format("readahead"),
       "safe: readahead only changes how much the kernel prefetches; resets at reboot."),
    # ---------------------------------------------------------------- CPU
    _d("DR040", "cpu-governor-slow", "CPU frequency governor is not `performance`",
       "cpu", W,
       "Reads `scaling_governor` of every core. Where cpufreq is not exposed (most virtual "
       "machines) it says so instead of guessing.",
       "`powersave`, `ondemand`, `conservative` and `schedutil` ramp clocks up late for bursty "
       "work such as data loading, JPEG decoding and the Python side of the training loop.",
       "```\n$ cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort | uniq -c\n"
       "     16 powersave\n```",
       "```sh\nsudo apt install linux-cpupower   # Ubuntu: linux-tools-common linux-tools-$(uname -r)\n"
       "sudo cpupower frequency-set -g performance\n```\n" + _SA.format("governor"),
       "safe: more power at idle; resets at reboot."),
    _d("DR041", "cpu-energy-preference-saving", "CPU energy/performance preference favours saving energy",
       "cpu", W,
       "Reads `energy_performance_preference` (intel_pstate/amd-pstate active mode).",
       "With `balance_power` or `power` the CPU's own frequency controller favours efficiency "
       "even under the `powersave` governor.",
       "```\nenergy_performance_preference balance_power on 16 cores\n```",
       "```sh\necho performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference\n```\n"
       + _SA.format("energy-preference"),
       "safe: resets at reboot."),
    _d("DR042", "cpu-boost-disabled", "CPU turbo/boost disabled", "cpu", W,
       "Reads `/sys/devices/system/cpu/cpufreq/boost` and `intel_pstate/no_turbo`.",
       "Without boost the cores stay at base clock: single-thread work (the Python loop, "
       "decoding in workers) runs 20-40 % slower.",
       "```\n$ cat /sys/devices/system/cpu/intel_pstate/no_turbo\n1\n```",
       "```sh\necho 0 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo   # Intel\n"
       "echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/boost             # AMD/acpi-cpufreq\n```\n"
       + _SA.format("boost"),
       "safe: resets at reboot; it may also be disabled in the firmware setup."),
    _d("DR043", "cpu-quota-below-cpu-count", "Fewer usable CPUs than os.cpu_count() reports", "cpu", W,
       "Compares the online CPUs (what `os.cpu_count()` returns) with the CPUs this process may "
       "use: its affinity mask (`Cpus_allowed_list`) and its cgroup CPU quota (v2 `cpu.max`, "
       "v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`), as containers and Slurm set them.",
       "Code that sizes pools by `os.cpu_count()` (DataLoader workers, OpenMP threads) starts "
       "far more threads than it may run: they time-share and get throttled by the quota. "
       "Not reported when a scheduler (a Slurm job, a container runtime) handed out a CPU "
       "affinity mask, which OpenMP and torch follow, nor under a quota that "
       "`OMP_NUM_THREADS` (or torch's recorded thread count) already fits: the finding is "
       "then `ok` with the hint for DataLoader workers.",
       "```\nos.cpu_count() says 64 but this process may use 8 CPUs (cgroup v2 CPU quota)\n```",
       "Size pools by the usable CPUs: `DataLoader(num_workers=7)`, `torch.set_num_threads(8)`, "
       "`export OMP_NUM_THREADS=8`; in Python, `len(os.sched_getaffinity(0))` respects "
       "affinity but not the quota.",
       "manual: sizing pools is a change to your training code or job script."),
    _d("DR044", "cpu-thread-oversubscription", "Thread counts exceed the usable CPUs", "cpu", P,
       "Compares `OMP_NUM_THREADS`/`MKL_NUM_THREADS`/`OPENBLAS_NUM_THREADS` and (with `--torch`, "
       "or recorded in a sysroot's `torch_runtime.json`) `torch.get_num_threads()` with the "
       "CPUs this process may use. With none of them known, a cgroup CPU quota below the CPU "
       "count is a warning (OpenMP sizes its pool by the affinity mask, never by the quota).",
       "More compute threads than cores make OpenMP threads spin and wait on each other: CPU "
       "ops and data preprocessing get slower, not faster.",
       "```\nOMP_NUM_THREADS=64 but only 8 CPUs usable (cgroup v2 CPU quota)\n```",
       "```sh\nexport OMP_NUM_THREADS=8 MKL_NUM_THREADS=8\n```",
       "safe: fewer threads than cores never changes results, only scheduling."),
    # ---------------------------------------------------------------- memory / OS
    _d("DR050", "shm-too-small", "/dev/shm too small for DataLoader workers", "memory", P,
       "Reads the size of `/dev/shm` (statvfs, or the tmpfs `size=` mount option).",
       "DataLoader workers pass every batch to the main process through shared memory. A "
       "typical image batch is ~154 MB; 8 workers x 2 prefetched batches need ~2.5 GB. "
       "Docker's default 64 MB makes workers die with 'bus error' / 'No space left on device', "
       "or forces `num_workers=0`.",
       "```\nERROR: Unexpected bus error encountered in worker. This might be caused by "
       "insufficient shared memory (shm).\n```",
       "```sh\ndocker run --shm-size=16g ...    # or --ipc=host\n"
       "# Kubernetes: emptyDir {medium: Memory} mounted at /dev/shm\n"
       "# host: sudo mount -o remount,size=50% /dev/shm (and /etc/fstab)\n```\n"
       + _SA.format("shm"),
       "safe: tmpfs uses memory only for what is stored."),
    _d("DR051", "swap-in-use", "Swap in use", "memory", W,
       "Reads SwapTotal/SwapFree from `/proc/meminfo`: more than 1 GiB or a quarter of swap "
       "used.",
       "Swapped pages of the training process, workers or page cache are read back from disk "
       "at random times: stalls of milliseconds to seconds.",
       "```\n6.2 GiB of swap in use\n```",
       "Find the memory users (`ps aux --sort=-rss | head`), reduce workers/prefetch or batch "
       "size, and move pages back with `sudo swapoff -a && sudo swapon -a` when RAM allows.",
       "manual: pitstop cannot know which memory users are safe to stop."),
    _d("DR052", "vm-swappiness-high", "vm.swappiness high on a machine with swap", "memory", W,
       "Reads `/proc/sys/vm/swappiness` when swap is configured.",
       "At the default 60 the kernel swaps out idle anonymous memory early to keep page cache: "
       "on a training box that means worker memory and pinned staging buffers.",
       "```\nvm.swappiness=60\n```",
       "```sh\nsudo sysctl -w vm.swappiness=10\necho 'vm.swappiness=10' | sudo tee /etc/sysctl.d/99-pitstop.conf\n```\n"
       + _SA.format("swappiness"),
       "safe: takes effect at once and only changes when the kernel swaps."),
    _d("DR053", "memory-available-low", "Little memory available", "memory", W,
       "Reads MemAvailable/MemTotal: below 2 GiB or 10 %. In a container or a Slurm job "
       "the cgroup memory limit (v2 `memory.max` up the hierarchy, v1 "
       "`memory.limit_in_bytes`) and its usage replace the host's numbers.",
       "DataLoader workers, pinned buffers and the page cache that keeps the dataset in RAM "
       "compete; the OOM killer may end the run.",
       "```\nonly 1.4 GiB (4 %) of 31.2 GiB memory available\n```",
       "Stop what is not needed (`ps aux --sort=-rss | head`), lower `num_workers` or "
       "`prefetch_factor`.",
       "manual: pitstop cannot know which processes are safe to stop."),
    _d("DR054", "transparent-hugepages-setting", "Transparent hugepages disabled or defrag=always",
       "memory", W,
       "Reads `/sys/kernel/mm/transparent_hugepage/enabled` and `defrag`.",
       "`never` forces 4 KiB pages for large host tensors and pinned buffers (more TLB misses) "
       "and makes PyTorch's `THP_MEM_ALLOC_ENABLE=1` useless; `defrag=always` stalls "
       "allocations on direct compaction.",
       "```\ntransparent hugepages disabled (enabled=never)\n```",
       "```sh\necho madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled\n"
       "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/defrag\n```\n"
       + _SA.format("thp") + " It sets `enabled` only; set `defrag` by hand.",
       "safe: madvise only gives hugepages to programs that ask for them."),
    _d("DR055", "memlock-limit-with-rdma", "Locked-memory limit too low for RDMA (NCCL over InfiniBand/RoCE)",
       "memory", W,
       "When `/sys/class/infiniband` lists RDMA devices, reads the soft `Max locked memory` "
       "limit in `/proc/self/limits`. In a container the host's devices show in sysfs too; "
       "there they count only when their verbs nodes (`/dev/infiniband/uverbs*`) were passed "
       "in.",
       "NCCL registers its buffers with the RDMA device, which pins (locks) them; with the "
       "common 64 KiB or 8 MiB limit registration fails and NCCL falls back to TCP sockets or "
       "aborts: multi-node all-reduce runs many times slower.",
       "```\nNET/IB : Unable to register memory ... ibv_reg_mr failed: Cannot allocate memory\n```",
       "```sh\nulimit -l unlimited\necho '* soft memlock unlimited\n* hard memlock unlimited' | "
       "sudo tee /etc/security/limits.d/99-rdma.conf\ndocker run --ulimit memlock=-1:-1 ...   "
       "# containers\n```",
       "safe: allows locking memory; it does not lock any by itself."),
    # ---------------------------------------------------------------- container
    _d("DR060", "running-in-container", "Running inside a container", "container", INFO,
       "Detects Docker (`/.dockerenv`), Podman (`/run/.containerenv`), Kubernetes "
       "(`KUBERNETES_SERVICE_HOST`) and container cgroup paths; always reported as ok, with "
       "what it implies.",
       "In a container `/dev/shm` is the container's own (64 MB by default, see DR050), CPU "
       "quotas apply (DR043), and NVML cannot name processes of other PID namespaces (DR019).",
       "```\nin a docker: /dev/shm is the container's own (64 MB by default)\n```",
       "Nothing to fix by itself; see the related checks.",
       "not applicable: informational."),
    _d("DR061", "container-without-gpu-access", "Container cannot reach the host's GPUs", "container", P,
       "Inside a container: NVIDIA GPUs visible on the PCI bus and the host's `nvidia` module "
       "loaded, but no `/dev/nvidia*` device nodes or no NVML.",
       "The container was started without the NVIDIA runtime: torch sees no GPU and trains "
       "on the CPU.",
       "```\n$ docker run image nvidia-smi\nnvidia-smi: command not found\n```",
       "```sh\nsudo apt install nvidia-container-toolkit\nsudo nvidia-ctk runtime configure --runtime=docker\n"
       "sudo systemctl restart docker\ndocker run --gpus all ...\n```\nKubernetes: the NVIDIA "
       "device plugin and `resources.limits: nvidia.com/gpu: 1`.",
       "manual: needs root on the host (container toolkit) and a container restart."),
    # ---------------------------------------------------------------- environment
    _d("DR070", "cuda-launch-blocking", "CUDA_LAUNCH_BLOCKING=1 left set", "environment", P,
       "Reads `CUDA_LAUNCH_BLOCKING` from the environment.",
       "It makes every kernel launch synchronous: the CPU waits for each kernel before queuing "
       "the next, so the GPU idles between kernels. Training is often several times slower.",
       "```sh\nexport CUDA_LAUNCH_BLOCKING=1   # left over from debugging\n```",
       "```sh\nunset CUDA_LAUNCH_BLOCKING   # and remove it from ~/.bashrc / job scripts / ENV\n```",
       "safe: only debugging output order changes."),
    _d("DR071", "debug-settings-left-on", "Debugging settings left on in the environment",
       "environment", W,
       "Reads debug variables: `TORCH_SHOW_CPP_STACKTRACES`, `NCCL_DEBUG=INFO/TRACE`, "
       "`TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL`, `TORCH_CPP_LOG_LEVEL=INFO`, `TORCH_LOGS`, "
       "`TORCH_COMPILE_DEBUG`, `TORCHDYNAMO_VERBOSE`, `TORCH_USE_CUDA_DSA`, "
       "`TORCH_NCCL_BLOCKING_WAIT`, `PYTHONDEVMODE`, `PYTHONMALLOC=debug`. (Anomaly detection "
       "is set in code and cannot be seen from outside: `pitstop lint` finds it.)",
       "Logging every NCCL call or every compiled graph, checking every collective's shapes "
       "(DETAIL adds synchronisations) and blocking waits all cost time on every step.",
       "```\nTORCH_DISTRIBUTED_DEBUG=DETAIL (DETAIL checks every collective's shapes)\n```",
       "```sh\nunset TORCH_DISTRIBUTED_DEBUG NCCL_DEBUG TORCH_SHOW_CPP_STACKTRACES\n```",
       "safe: removes debugging output and checks only; results are unchanged."),
    _d("DR072", "cuda-caching-allocator-disabled", "CUDA caching allocator disabled", "environment", P,
       "Reads `PYTORCH_NO_CUDA_MEMORY_CACHING`.",
       "With it set every tensor allocation and free calls cudaMalloc/cudaFree, which "
       "synchronise the device: training slows dramatically.",
       "```sh\nexport PYTORCH_NO_CUDA_MEMORY_CACHING=1   # left over from memory debugging\n```",
       "```sh\nunset PYTORCH_NO_CUDA_MEMORY_CACHING\n```",
       "safe: the caching allocator is the default; results are unchanged."),
    _d("DR073", "nccl-transport-disabled", "NCCL transports disabled", "environment", W,
       "Reads `NCCL_P2P_DISABLE`, `NCCL_IB_DISABLE`, `NCCL_SHM_DISABLE`, `NCCL_P2P_LEVEL=LOC`, "
       "`NCCL_NET=Socket`.",
       "These force NCCL off NVLink/PCIe peer-to-peer or InfiniBand onto slower paths (host "
       "memory, TCP): all-reduce bandwidth drops by 2-20x. They are often copied from a "
       "workaround for one broken machine.",
       "```sh\nexport NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1\n```",
       "```sh\nunset NCCL_P2P_DISABLE NCCL_IB_DISABLE\n# measure: nccl-tests all_reduce_perf -b 8 -e 1G -f 2 -g 8\n```",
       "manual: keep a setting only if a measured hang or corruption needs it."),
    _d("DR074", "cuda-visible-devices-hides-gpus", "CUDA_VISIBLE_DEVICES hides GPUs", "environment", P,
       "Parses `CUDA_VISIBLE_DEVICES`: empty, `-1` or `NoDevFiles` hide every GPU; indexes "
       "beyond the GPU count make CUDA stop at the first invalid entry.",
       "torch sees no (or fewer) GPUs and trains on the CPU or on fewer GPUs than the machine "
       "has.",
       "```sh\nexport CUDA_VISIBLE_DEVICES=''   # from a CPU-only test\n```",
       "```sh\nunset CUDA_VISIBLE_DEVICES   # or list valid indexes: export CUDA_VISIBLE_DEVICES=0,1\n```",
       "safe: it only changes which devices torch sees."),
    _d("DR075", "cuda-alloc-conf-invalid", "PYTORCH_CUDA_ALLOC_CONF has entries torch does not know",
       "environment", W,
       "Parses `PYTORCH_CUDA_ALLOC_CONF` (or `PYTORCH_ALLOC_CONF`) as `key:value,...` and "
       "checks every key against the caching allocator's options (`expandable_segments`, "
       "`max_split_size_mb`, `garbage_collection_threshold`, `backend`, ...).",
       "An unknown key or a malformed entry makes the first CUDA allocation raise, after the "
       "whole job has started; a valid one is reported for the record.",
       "```sh\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True   # typo: segments\n```",
       "```sh\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```",
       "safe. A key added by a torch newer than pitstop may be flagged: check the torch docs."),
    # ---------------------------------------------------------------- platform
    _d("DR080", "python-version-unsupported", "Python too old for current torch releases", "platform", W,
       "Reports the Python version (and, as evidence, the torch, CUDA, NCCL, driver, kernel and "
       "OS versions).",
       "Current torch releases ship wheels for Python >= 3.10 only: an older Python is stuck on "
       "old torch without newer kernels and fixes.",
       "```\nPython 3.8.10: current torch releases need Python >= 3.10\n```",
       "```sh\nsudo apt install python3 python3-venv   # Debian 12: 3.11, Ubuntu 24.04: 3.12\n"
       "python3 -m venv ~/venv && ~/venv/bin/pip install torch\n```",
       "manual: a new Python means a new virtual environment for training."),
    _d("DR081", "glibc-too-old", "glibc too old for current torch wheels", "platform", P,
       "Reads the C library version (`confstr(CS_GNU_LIBC_VERSION)`).",
       "torch wheels since 2.6 are built for manylinux_2_28 (glibc >= 2.28): on an older system "
       "pip picks an old release or tries to build from source.",
       "```\nglibc 2.17: torch wheels since 2.6 need glibc >= 2.28\n```",
       "Upgrade the OS (Debian 12: glibc 2.36, Ubuntu 22.04: 2.35) or train in a container "
       "based on one.",
       "manual: an OS upgrade or a container change."),
]

DOCTOR_DOCS: dict[str, CodeDoc] = {d.code: d for d in DOCS}

register(*DOCS)
