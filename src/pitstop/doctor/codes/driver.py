"""Documentation of the driver / CUDA codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import DEBIAN_DRIVER, P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR001", "nvidia-gpu-without-driver", "NVIDIA GPU present but no working NVIDIA driver",
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
    doc("DR002", "nouveau-driver-loaded", "The open-source nouveau driver holds the GPU",
        "driver", P,
        "Reports the `nouveau` module in `/proc/modules` on a machine with an NVIDIA GPU, and "
        "whether a `blacklist nouveau` line exists in `/etc/modprobe.d`.",
        "nouveau drives the display but has no CUDA: while it holds the GPU, the NVIDIA driver "
        "cannot bind to it and training runs on the CPU.",
        "```\n$ grep nouveau /proc/modules\nnouveau 2760704 3 - Live 0x0000000000000000\n```",
        DEBIAN_DRIVER,
        "manual: needs root and a reboot; the graphical session restarts."),
    doc("DR003", "torch-not-installed", "torch is not installed in this Python", "driver", W,
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
    doc("DR004", "cpu-only-torch-on-gpu-machine", "CPU-only torch wheel on a machine with an NVIDIA GPU",
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
    doc("DR005", "driver-too-old-for-torch-cuda", "NVIDIA driver older than the torch wheel's CUDA needs",
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
    doc("DR006", "cudnn-missing-or-unusable", "cuDNN missing, mismatched or not usable", "driver", P,
        "Reads the `nvidia-cudnn-*` wheel torch pins and the one installed (or `libcudnn*` bundled "
        "in `torch/lib`); with `--torch` it imports torch in a subprocess, reads "
        "`torch.backends.cudnn.version()` and runs a small convolution on the GPU.",
        "Convolutions, RNNs and attention kernels come from cuDNN; a missing or mismatched "
        "cuDNN makes them fail (`CUDNN_STATUS_NOT_INITIALIZED`) or fall back to slow paths.",
        "```\nDR006 warning  installed cuDNN differs from the version torch was built against: "
        "nvidia-cudnn-cu12 8.9.2.26 (torch wants 9.1.0.70)\n```",
        "Install exactly the pinned version:\n```sh\npip install nvidia-cudnn-cu12==9.1.0.70\n```",
        "manual: changes packages in your environment."),
    doc("DR007", "cuda-init-fails", "torch cannot initialise CUDA", "driver", P,
        "With `--torch`: imports torch in a subprocess and calls `torch.cuda.is_available()` and "
        "a first allocation, reporting the CUDA error. Without `--torch` it reports 'could not "
        "check' (importing torch takes 1-2 s, more than the whole doctor).",
        "A CUDA build that cannot initialise trains on the CPU or crashes at the first `.cuda()`.",
        "```\nDR007 problem  torch cannot initialise CUDA: RuntimeError: Found no NVIDIA driver "
        "on your system\n```",
        "Read the error: a missing driver (DR001), a driver too old (DR005), a container without "
        "`--gpus` (DR061), or `CUDA_VISIBLE_DEVICES` hiding all GPUs (DR074).",
        "manual: the fix depends on the error; pitstop only reports it."),
    doc("DR008", "cuda-libraries-mismatch", "CUDA library wheels differ from torch's pins", "driver", W,
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
    doc("DR009", "nvidia-module-missing-for-kernel",
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
        "no module for this kernel (and whether its headers are missing, or DKMS tried and left "
        "only its `make.log`), nouveau loaded first, Secure Boot refusing an unsigned or "
        "unenrolled module (not for Ubuntu's prebuilt modules, which Canonical signs; "
        "\"could not be read\" when the MOK list is unreadable), or a module that is simply "
        "not loaded. The fix follows how the module was installed: DKMS, Ubuntu's prebuilt "
        "packages, or NVIDIA's `.run` installer. DR001 quotes the same cause and fix.",
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
        "sudo apt install linux-modules-nvidia-550-generic   # the module follows every "
        "future kernel\n```\nUbuntu with DKMS: the Debian commands, or "
        "`sudo apt install --reinstall nvidia-dkms-550`. NVIDIA's `.run` installer: install "
        "the headers and `build-essential`, and run it again with `--dkms`. A DKMS build that "
        "failed with the headers there: read its `make.log` first (a driver older than the "
        "kernel may need a newer branch).\n\n"
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
]
