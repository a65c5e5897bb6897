"""The exact commands that fix things, per distribution (Debian 12/13, Ubuntu).

Checks call these with the platform facts, so a remedy names the commands for the
distribution the facts came from, and both families when it is unknown.
"""

from __future__ import annotations

from typing import Any

from pitstop.doctor.data import (
    CUDA_REPO_PATH,
    DISTRO_DRIVER_CEILING,
    best_variant_for_driver,
    distro_key,
    parse_version,
    torch_release,
    variant_tag,
)

CODENAMES = {"12": "bookworm", "13": "trixie"}
# nouveau out of the way for good: it is also in the initramfs, which must be rebuilt.
BLACKLIST_NOUVEAU = ("printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee "
                     "/etc/modprobe.d/blacklist-nouveau.conf\n"
                     "sudo update-initramfs -u && sudo reboot   # nouveau is in the initramfs")


def distro(facts: Any) -> str:
    plat = facts.get("platform") or {}
    return distro_key(plat.get("os_id"), plat.get("os_version_id"))


def family(facts: Any) -> str:
    """``"debian"``, ``"ubuntu"`` or ``""`` (unknown: show both)."""
    d = distro(facts)
    return d.split()[0] if d.split() and d.split()[0] in ("debian", "ubuntu") else ""


def system_apply(name: str) -> str:
    """The ``pitstop system apply`` line for a setting it manages (names in contracts.md)."""
    return f"# or let pitstop do it (dry run first, then --yes):\npitstop system apply --only {name}"


def debian_driver_install(facts: Any) -> str:
    plat = facts.get("platform") or {}
    codename = plat.get("os_codename") or CODENAMES.get(str(plat.get("os_version_id")), "bookworm")
    return "\n".join([
        "# Debian 12 (bookworm) / 13 (trixie): enable contrib, non-free, non-free-firmware",
        f"echo 'deb http://deb.debian.org/debian {codename} contrib non-free non-free-firmware' "
        "| sudo tee /etc/apt/sources.list.d/nvidia-nonfree.list",
        "sudo apt update",
        "sudo apt install nvidia-driver firmware-misc-nonfree linux-headers-$(uname -r)",
        "#   (open kernel modules, Turing and newer: nvidia-open-kernel-dkms instead)",
        BLACKLIST_NOUVEAU,
        "# Debian packages drivers up to 535 (bookworm) / 550 (trixie); a newer GPU or a",
        "# CUDA 12.8+/13 wheel needs NVIDIA's CUDA apt repository: `pitstop explain DR001`.",
    ])


def ubuntu_driver_install() -> str:
    return "\n".join([
        "# Ubuntu 22.04 / 24.04:",
        "sudo ubuntu-drivers install        # or: sudo apt install nvidia-driver-570-server",
        "sudo reboot",
    ])


def cuda_repo_driver(facts: Any, min_driver: str | None = None) -> str:
    d = distro(facts)
    repo = CUDA_REPO_PATH.get(d, "debian12")
    want = f" (>= {min_driver})" if min_driver else ""
    return "\n".join([
        f"# a driver newer than {d or 'the distribution'} packages{want}: NVIDIA's CUDA repository",
        f"wget https://developer.download.nvidia.com/compute/cuda/repos/{repo}/x86_64/"
        "cuda-keyring_1.1-1_all.deb",
        "sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt update",
        "sudo apt install cuda-drivers      # or nvidia-open (open kernel modules)",
        "sudo reboot",
    ])


def driver_install(facts: Any) -> str:
    fam = family(facts)
    parts = []
    if fam in ("debian", ""):
        parts.append(debian_driver_install(facts))
    if fam in ("ubuntu", ""):
        parts.append(ubuntu_driver_install())
    return "\n".join(parts)


def distro_ceiling(facts: Any) -> str | None:
    return DISTRO_DRIVER_CEILING.get(distro(facts))


def needs_cuda_repo(facts: Any, min_driver: str) -> bool:
    """True when the distribution's own packages cannot reach ``min_driver``."""
    ceiling = distro_ceiling(facts)
    return ceiling is not None and parse_version(ceiling) < parse_version(min_driver)[:1]


def torch_cuda_install(torch_version: str | None, driver: str | None) -> tuple[str, str]:
    """``(pip command, why)`` installing the CUDA build of this torch release for ``driver``."""
    base = (torch_version or "").split("+", 1)[0]
    if not torch_release(base):  # not a version ("None" in a hand-made facts file)
        base = ""
    pin = f"torch=={base}" if base else "torch"
    if not driver:
        return (f"pip install --force-reinstall {pin} --index-url "
                "https://download.pytorch.org/whl/cu128   # once the NVIDIA driver works",
                "the driver version is unknown, so the variant is the common default")
    cuda, support, known = best_variant_for_driver(base or "2.9", driver)
    if not cuda:
        return ("# no CUDA build of this torch release runs on driver "
                f"{driver}: upgrade the driver first",
                "driver too old for every CUDA variant")
    note = f"cu{variant_tag(cuda)[2:]} is the newest variant driver {driver} runs"
    if support == "minor-compat":
        note += " (under CUDA minor-version compatibility)"
    if not known:
        note += f"; torch {base} is newer than pitstop's variant table, check the index"
    return (f"pip install --force-reinstall {pin} --index-url "
            f"https://download.pytorch.org/whl/{variant_tag(cuda)}"
            "   # add torchvision/torchaudio too if installed", note)
