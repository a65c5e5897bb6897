"""The NVIDIA kernel module on disk: for which kernels it is built, and what may stop it.

After a kernel upgrade the NVIDIA module exists only for the kernels DKMS (or a
prebuilt-module package) built it for; if the new kernel's headers were missing, the
new kernel has none and ``nvidia`` does not load. This probe reads, without running
``dkms`` or ``modinfo``:

* ``/lib/modules/<kernel>/`` for every installed kernel: the main NVIDIA module in
  ``updates/dkms`` (DKMS; Debian names it ``nvidia-current.ko*``), ``updates``,
  ``extra`` (kmod packages), ``kernel/drivers/video`` (NVIDIA's .run installer),
  ``kernel/nvidia-<branch>*/`` (Ubuntu's prebuilt ``linux-modules-nvidia-*``), and any
  path ``modules.dep`` lists; and whether ``build`` (the headers) resolves;
* ``/var/lib/dkms/<module>/<version>/<kernel>/<arch>/module/``: what DKMS built;
* Secure Boot: the ``SecureBoot`` EFI variable, the kernel lockdown mode, whether
  module signatures are enforced, and whether the DKMS signing key (Debian
  ``/var/lib/dkms/mok.pub``, Ubuntu ``/var/lib/shim-signed/mok/MOK.der``) is among
  the enrolled Machine Owner Keys (``MokListRT``).
"""

from __future__ import annotations

import re
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo.kernel_text import kernel_release
from pitstop.sysroot import Sysroot

MODULE_DIRS = ("updates/dkms", "updates", "extra", "kernel/drivers/video")
DKMS_TREE = "/var/lib/dkms"
EFI_GLOBAL = "8be4df61-93ca-11d2-aa0d-e1f7a1d1a1c8"  # EFI_GLOBAL_VARIABLE
SHIM_LOCK = "605dab50-e046-4300-abb6-3dd810dd8b23"  # shim's MOK variables
SECURE_BOOT_VAR = f"/sys/firmware/efi/efivars/SecureBoot-{EFI_GLOBAL}"
SECURE_BOOT_SYSFS = f"/sys/firmware/efi/vars/SecureBoot-{EFI_GLOBAL}/data"
# shim's whole MOK list as one table (shim >= 15.3), and the runtime variables it mirrors
# the list into, split in MokListRT, MokListRT1, MokListRT2... when it is too large for one.
MOK_TABLE = "/sys/firmware/efi/mok-variables/MokListRT"
MOK_VARIABLE = "/sys/firmware/efi/efivars/MokListRT{}-" + SHIM_LOCK
MOK_KEYS = ("/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der")
# nvidia.ko, nvidia-current.ko.xz, nvidia-current-open.ko.zst; not the helper modules.
# (in-tree nvidiafb.ko, the framebuffer driver, and nvidia-wmi-ec-backlight.ko are not it)
_MODULE_FILE = re.compile(r"nvidia(?:[-_][a-z0-9]+)*\.ko(?:\.(?:xz|zst|gz))?")
_DEP_NVIDIA = re.compile(r"^([^:\n]*nvidia[^:\n/]*\.ko[^:\n]*):", re.MULTILINE)
_HELPERS = ("uvm", "modeset", "drm", "peermem", "vgpu", "fs", "wmi", "vfio")


def is_main_module(filename: str) -> bool:
    """``nvidia-current.ko.xz`` yes; ``nvidia-current-uvm.ko.xz`` or ``nvidia_drm.ko`` no."""
    if not _MODULE_FILE.fullmatch(filename):
        return False
    stem = filename.split(".ko", 1)[0]
    words = re.split(r"[-_]", stem)[1:]
    return not any(w in _HELPERS for w in words)


def _modules_root(sr: Sysroot) -> str | None:
    for root in ("/lib/modules", "/usr/lib/modules"):
        if sr.exists(root):
            return root
    return None


def modules_of_kernel(sr: Sysroot, root: str, kernel: str) -> list[str]:
    """Paths (relative to ``/lib/modules/<kernel>``) of the main NVIDIA module."""
    base = f"{root}/{kernel}"
    found: list[str] = []
    dirs = list(MODULE_DIRS) + [f"kernel/{d}" for d in sr.listdir(f"{base}/kernel")
                                if d.startswith("nvidia")]
    for d in dirs:
        found += [f"{d}/{n}" for n in sr.listdir(f"{base}/{d}") if is_main_module(n)]
    if found:
        return sorted(set(found))
    # Anywhere else depmod saw it. modules.dep has a line per module (about 1 MB per
    # kernel): one regex pass finds the few that mention nvidia.
    dep = sr.read_text(f"{base}/modules.dep") or ""
    for path in _DEP_NVIDIA.findall(dep) if "nvidia" in dep else []:
        path = path.strip()
        if path.startswith("/"):  # older depmod wrote absolute paths
            path = path.split(f"/{kernel}/", 1)[-1]
        if is_main_module(path.rsplit("/", 1)[-1]):
            found.append(path)
    return sorted(set(found))


def headers_installed(sr: Sysroot, root: str, kernel: str) -> bool:
    """The kernel's build tree: ``/lib/modules/<kernel>/build`` resolves (Debian ships it
    as a link into ``/usr/src/linux-headers-<kernel>``), or that directory exists."""
    build = sr.realpath(f"{root}/{kernel}/build")
    if build is not None and sr.path(build).is_dir():
        return True
    return sr.exists(f"/usr/src/linux-headers-{kernel}")


def dkms_modules(sr: Sysroot) -> list[dict[str, Any]]:
    """``[{module, version, built_for, installed_for, source}]`` for NVIDIA modules in DKMS's
    tree, with ``failed_for`` (``{kernel: make.log}``) where a build left a log but no module."""
    out = []
    for module in sr.listdir(DKMS_TREE):
        if not module.startswith("nvidia") or not sr.path(f"{DKMS_TREE}/{module}").is_dir():
            continue
        installed = sorted(m.group(1) for n in sr.listdir(f"{DKMS_TREE}/{module}")
                           if (m := re.fullmatch(r"kernel-(.+)-[^-]+", n)))
        for version in sr.listdir(f"{DKMS_TREE}/{module}"):
            vdir = f"{DKMS_TREE}/{module}/{version}"
            if version.startswith("kernel-") or not sr.path(vdir).is_dir():
                continue
            built, failed = [], {}
            for kernel in sr.listdir(vdir):
                if kernel in ("source", "build", "tarball"):
                    continue
                for arch in sr.listdir(f"{vdir}/{kernel}"):
                    if any(is_main_module(n) for n in
                           sr.listdir(f"{vdir}/{kernel}/{arch}/module")):
                        built.append(kernel)
                    elif sr.exists(f"{vdir}/{kernel}/{arch}/log/make.log"):
                        # dkms keeps the log of a build that made no module: it failed.
                        failed[kernel] = f"{vdir}/{kernel}/{arch}/log/make.log"
            entry = {"module": module, "version": version, "built_for": sorted(set(built)),
                     "installed_for": installed, "source": sr.exists(f"{vdir}/source")}
            if failed:
                entry["failed_for"] = failed
            out.append(entry)
    return out


def secure_boot(sr: Sysroot) -> dict[str, Any]:
    """Secure Boot state as the firmware and kernel expose it (``None``: not readable)."""
    efi = sr.exists("/sys/firmware/efi")
    raw = sr.read_bytes(SECURE_BOOT_VAR)
    enabled: bool | None = None
    if raw is not None and len(raw) >= 5:
        enabled = raw[4] == 1  # efivarfs: 4 bytes of attributes, then the 1-byte value
    else:
        # The older sysfs interface: the value alone in .../vars/SecureBoot-GUID/data.
        data = sr.read_bytes(SECURE_BOOT_SYSFS) or b""
        if len(data) == 1:
            enabled = data[0] == 1
    if not efi:
        enabled = False  # legacy BIOS boot: there is no Secure Boot
    lockdown = sr.read_text("/sys/kernel/security/lockdown")
    m = re.search(r"\[(\w+)\]", lockdown or "")
    sig = sr.read_text("/sys/module/module/parameters/sig_enforce")
    mok = sr.read_bytes(MOK_TABLE)
    if mok is None:
        parts = []
        for n in ["", *map(str, range(1, 16))]:
            part = sr.read_bytes(MOK_VARIABLE.format(n))
            if part is None:
                break
            parts.append(part[4:])  # each variable starts with its 4 attribute bytes
        mok = b"".join(parts) if parts else None
    keys = []
    for key in MOK_KEYS:
        der = sr.read_bytes(key)
        if der is None:
            continue
        # MokListRT holds EFI signature lists whose entries carry the DER certificates.
        keys.append({"path": key, "enrolled": None if mok is None else der in mok})
    return {"efi": efi, "enabled": enabled, "lockdown": m.group(1) if m else None,
            "sig_enforce": {"Y": True, "N": False}.get(sig or ""),
            "mok_list_readable": mok is not None, "signing_keys": keys}


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    running = kernel_release(sr)
    root = _modules_root(sr)
    kernels: dict[str, Any] = {}
    if root is not None:
        for kernel in sr.listdir(root):
            if not sr.path(f"{root}/{kernel}").is_dir():
                continue
            kernels[kernel] = {"nvidia_modules": modules_of_kernel(sr, root, kernel),
                               "headers": headers_installed(sr, root, kernel)}
        if running and running not in kernels:
            kernels[running] = {"nvidia_modules": [], "no_modules_dir": True,
                                "headers": headers_installed(sr, root, running)}
    return {
        "running_kernel": running,
        "modules_dir": root,
        "kernels": kernels,
        "dkms": dkms_modules(sr),
        "secure_boot": secure_boot(sr),
    }
