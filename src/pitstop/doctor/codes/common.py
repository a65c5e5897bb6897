"""What the DR### documentation modules share: severities, the builder, common fixes."""

from __future__ import annotations

from pitstop.findings import CodeDoc, Severity

P, W, INFO = Severity.PROBLEM, Severity.WARNING, Severity.INFO

# The sentence every fix that `pitstop system` can also make ends with.
SYSTEM_APPLY = ("`pitstop system apply --only {}` makes the same change, records the previous "
                "value, and `pitstop system revert` restores it.")


def doc(code: str, name: str, title: str, category: str, severity: Severity, what: str,
        why: str, example: str, fix: str, fix_safety: str, *refs: str) -> CodeDoc:
    """One code's documentation, in the order ``pitstop explain`` prints it."""
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

