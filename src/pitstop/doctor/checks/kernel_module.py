"""The NVIDIA kernel module for the running kernel (DR009), and why it is not loaded.

The most common way a working Debian/Ubuntu GPU machine stops working: a kernel
upgrade whose headers were not installed, so DKMS could not build the NVIDIA module
for the new kernel, and after the reboot ``nvidia`` is not there. DR001 sees only the
effect ("no working driver"); :func:`module_cause` is the cause with its fix, and DR001
quotes it so that the report shows one cause and one fix rather than two findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pitstop.doctor import remedies
from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    check,
    ok,
    problem,
    section,
)
from pitstop.doctor.checks.gpuinfo import driver_version, pci_gpus
from pitstop.findings import Remedy


@dataclass(frozen=True)
class Cause:
    """Why the NVIDIA module is not loaded: ``kind`` (``no-module-for-kernel``,
    ``nouveau-holds-gpu``, ``secure-boot``, ``not-loaded``), a clause for DR001, the
    whole summary, the fix, and the evidence."""

    kind: str
    clause: str
    summary: str
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)


def kernel_flavour(release: str) -> str | None:
    """``6.1.0-37-cloud-amd64`` -> ``cloud-amd64``; ``6.12.38+deb13-amd64`` -> ``amd64``;
    ``6.8.0-60-generic`` -> ``generic`` (what the headers metapackage is named after)."""
    parts = release.split("-")
    tail = [p for p in parts[1:] if not p[:1].isdigit()]
    return "-".join(tail) or None


# Ubuntu LTS releases and the kernel series they ship at release (GA); a newer series on
# the same release is the hardware-enablement (HWE) kernel, whose metapackages carry
# the suffix -hwe-<release> (linux-headers-generic-hwe-22.04).
UBUNTU_GA_KERNEL = {"20.04": "5.4", "22.04": "5.15", "24.04": "6.8"}


def metapackage_flavour(facts: Facts, release: str) -> str | None:
    """The flavour that kernel metapackages are named after: ``generic``, ``aws``,
    ``cloud-amd64``; ``generic-hwe-22.04`` for Ubuntu's HWE kernels, whose plain
    ``generic`` metapackages would follow the release's older GA kernel instead."""
    flavour = kernel_flavour(release)
    plat = facts.get("platform") or {}
    ubuntu = str(plat.get("os_version_id") or "")
    ga = UBUNTU_GA_KERNEL.get(ubuntu)
    if flavour in ("generic", "lowlatency") and remedies.family(facts) == "ubuntu" and ga \
            and not release.startswith(ga + "."):
        return f"{flavour}-hwe-{ubuntu}"
    return flavour


def _branch(version: str | None) -> str | None:
    m = re.match(r"(\d+)\.", version or "")
    return m.group(1) if m else None


# Where NVIDIA's own .run installer puts the module (without --dkms it builds for the
# kernel it ran on only, and apt knows nothing of it).
RUN_INSTALLER_DIR = "kernel/drivers/video/"
# Ubuntu's linux-modules-nvidia-* packages: modules built and signed by Canonical.
PREBUILT_DIR = "kernel/nvidia-"


def _module_dirs(nm: dict[str, Any]) -> list[str]:
    return [p for k in (nm.get("kernels") or {}).values() for p in k.get("nvidia_modules", [])]


def failed_build(nm: dict[str, Any], kernel: str) -> str | None:
    """The make.log of a DKMS build of an NVIDIA module for ``kernel`` that made no module."""
    for d in nm.get("dkms") or []:
        log = (d.get("failed_for") or {}).get(kernel)
        if log:
            return str(log)
    return None


def dkms_package(facts: Facts, nm: dict[str, Any]) -> str:
    """The package whose DKMS module this is: Debian's ``nvidia-kernel-dkms`` (or
    ``nvidia-open-kernel-dkms``), Ubuntu's ``nvidia-dkms-<branch>[-open]``."""
    dkms = nm.get("dkms") or []
    mod = dkms[0]["module"] if dkms else "nvidia"
    if remedies.family(facts) == "ubuntu":
        version = dkms[0]["version"] if dkms else driver_version(facts)
        return f"nvidia-dkms-{_branch(version) or '550'}" + ("-open" if "open" in mod else "")
    return "nvidia-open-kernel-dkms" if "open" in mod else "nvidia-kernel-dkms"


def _rebuild_fix(facts: Facts, nm: dict[str, Any], running: str) -> str:
    """The commands that give the running kernel an NVIDIA module, per distribution."""
    fam = remedies.family(facts)
    headers = (nm.get("kernels") or {}).get(running, {}).get("headers")
    dkms = nm.get("dkms") or []
    flavour = metapackage_flavour(facts, running)
    paths = _module_dirs(nm)
    prebuilt = sorted({p.split("/")[1] for p in paths if p.startswith(PREBUILT_DIR)})
    run_installer = not dkms and not prebuilt and any(
        p.startswith(RUN_INSTALLER_DIR) for p in paths)
    log = failed_build(nm, running)
    lines = [f"# the running kernel {running} has no NVIDIA module: build or install it"]
    meta = f"linux-headers-{flavour}" if flavour else None
    if fam == "ubuntu" and prebuilt and not dkms:
        pkg = prebuilt[-1].replace("srv", "-server")
        lines += [f"sudo apt install linux-modules-{pkg}-$(uname -r)   # Canonical's signed "
                  "prebuilt module for this kernel",
                  "#   or let Ubuntu choose: sudo ubuntu-drivers install"]
        # The metapackage that brings the module with every new kernel of this flavour.
        meta = f"linux-modules-{pkg}-{flavour}" if flavour else None
    elif run_installer:
        version = driver_version(facts) or "<version>"
        lines += ["# NVIDIA's .run installer built it for another kernel only (apt does not "
                  "know it):",
                  "sudo apt install linux-headers-$(uname -r) build-essential",
                  f"sudo sh NVIDIA-Linux-$(uname -m)-{version}.run --dkms   # --dkms: "
                  "rebuilt for every later kernel"]
    else:
        if log:
            lines.append(f"less {log}   # DKMS tried and failed for this kernel: the reason "
                         "(a driver older than the kernel may need a newer branch)")
        if not headers:
            lines.append("sudo apt install linux-headers-$(uname -r)   # DKMS builds against "
                         "the running kernel's headers")
        lines.append("sudo dkms autoinstall   # builds every DKMS module for the running kernel")
        pkg = dkms_package(facts, nm)
        if fam == "ubuntu":
            lines.append(f"#   or: sudo apt install --reinstall {pkg}")
        elif fam == "debian" or not fam:
            lines.append(f"#   or: sudo apt install --reinstall {pkg}   # Debian; rebuilds "
                         "for every installed kernel that has headers")
    lines.append("sudo modprobe nvidia && nvidia-smi   # or reboot")
    if meta and fam in ("debian", "ubuntu", ""):
        what = "its NVIDIA module" if meta.startswith("linux-modules-") else "its headers"
        lines.append(f"# so the next kernel upgrade brings {what}: sudo apt install {meta}")
    return "\n".join(lines)


# The DKMS signing key each family's dkms creates and signs modules with.
DKMS_KEYS = {"debian": "/var/lib/dkms/mok.pub", "ubuntu": "/var/lib/shim-signed/mok/MOK.der"}


def _secure_boot_fix(facts: Facts, nm: dict[str, Any], sb: dict[str, Any]) -> str:
    keys = [k["path"] for k in sb.get("signing_keys") or [] if k.get("enrolled") is not True]
    key = keys[0] if keys else DKMS_KEYS.get(remedies.family(facts), DKMS_KEYS["debian"])
    make_key = [] if sb.get("signing_keys") else [
        f"sudo apt install --reinstall {dkms_package(facts, nm)}   # rebuilds and signs the "
        "module; dkms creates its signing key if there is none"]
    return "\n".join([
        "# Secure Boot is on: the kernel loads only modules signed by an enrolled key.",
        *make_key,
        f"sudo mokutil --import {key}   # the DKMS signing key (Debian: {DKMS_KEYS['debian']}, "
        f"Ubuntu: {DKMS_KEYS['ubuntu']}); choose a one-time password",
        "sudo reboot   # the blue MOK manager appears: Enroll MOK -> Continue -> the password",
        f"mokutil --test-key {key} && sudo modprobe nvidia && nvidia-smi",
        "# (or turn Secure Boot off in the firmware setup)",
    ])


def module_cause(facts: Facts) -> Cause | None:
    """Why the NVIDIA module is not loaded on this machine, when the facts tell;
    ``None`` when it is loaded, when nothing of the driver is installed, in a container
    (the module is the host's), or when the facts cannot say."""
    mods = facts.get("kernel_modules") or {}
    nm = facts.get("nvidia_module") or {}
    if mods.get("nvidia_loaded") or "kernels" not in nm or not nm.get("modules_dir"):
        return None
    if (facts.get("container") or {}).get("in_container"):
        return None
    running = str(nm.get("running_kernel") or "")
    kernels: dict[str, Any] = nm.get("kernels") or {}
    here = kernels.get(running, {}).get("nvidia_modules") or []
    elsewhere = sorted(k for k, v in kernels.items() if k != running and v.get("nvidia_modules"))
    dkms = nm.get("dkms") or []
    if not here and not elsewhere and not dkms:
        return None
    sb = nm.get("secure_boot") or {}
    ev: dict[str, Any] = {"running_kernel": running, "modules_for_running_kernel": here,
                          "kernels_with_nvidia_module": elsewhere,
                          "headers_for_running_kernel": kernels.get(running, {}).get("headers"),
                          "dkms": [f"{d['module']}/{d['version']} built for "
                                   f"{', '.join(d['built_for']) or 'no kernel'}" for d in dkms],
                          "secure_boot": sb.get("enabled")}
    if not here:
        built = ", ".join(elsewhere) or "no kernel"
        log = failed_build(nm, running)
        if log:
            ev["dkms_build_log"] = log
        hdr = (f"; DKMS's build for {running} failed ({log})" if log and
               ev["headers_for_running_kernel"] else "" if ev["headers_for_running_kernel"]
               else f"; the headers of {running} are not installed, so DKMS could not build it")
        clause = f"the nvidia module is not built for the running kernel {running}"
        return Cause("no-module-for-kernel", clause,
                     f"no NVIDIA kernel module for the running kernel {running} (built for "
                     f"{built}){hdr}: the driver cannot load after the kernel upgrade",
                     _rebuild_fix(facts, nm, running), ev)
    if mods.get("nouveau_loaded"):
        return Cause("nouveau-holds-gpu", "nouveau holds the GPU",
                     f"the NVIDIA module exists for {running} ({here[0]}) but nouveau was "
                     "loaded first and holds the GPU",
                     remedies.BLACKLIST_NOUVEAU,
                     ev)
    # Canonical signs its prebuilt modules with a key the kernel trusts: Secure Boot does
    # not refuse them, whatever the MOK list holds.
    signed_by_vendor = all(p.startswith(PREBUILT_DIR) for p in here)
    if sb.get("enabled") and not signed_by_vendor:
        keys = sb.get("signing_keys") or []
        ev["signing_keys"] = [f"{k['path']}: " + {True: "enrolled", False: "NOT enrolled",
                                                   None: "enrolment unknown"}[k.get("enrolled")]
                              for k in keys] or ["no DKMS signing key found"]
        if not any(k.get("enrolled") is True for k in keys):
            if keys and all(k.get("enrolled") is False for k in keys):
                why = ("its signing key is not enrolled as a Machine Owner Key (MOK), so the "
                       "kernel refuses it")
            elif keys:
                why = ("the kernel loads it only if its signing key is an enrolled Machine "
                       "Owner Key (MOK), and the MOK list could not be read to tell")
            else:
                why = (f"no DKMS signing key was found ({', '.join(DKMS_KEYS.values())}), "
                       "so the module may be unsigned, and the kernel refuses unsigned modules")
            return Cause("secure-boot", "Secure Boot refuses the module",
                         f"the NVIDIA module exists for {running} ({here[0]}) but is not "
                         f"loaded, and Secure Boot is on: {why}",
                         _secure_boot_fix(facts, nm, sb), ev)
    return Cause("not-loaded", "the nvidia module is not loaded",
                 f"the NVIDIA module exists for {running} ({here[0]}) but is not loaded",
                 "sudo modprobe nvidia && nvidia-smi\n"
                 "sudo dmesg | grep -iE 'nvidia|NVRM'   # if it fails: the kernel's reason\n"
                 "# installed just now? a reboot loads it with the display stack", ev)


@check("DR009", "driver", 99)
def nvidia_module_for_kernel(facts: Facts) -> Outcome:
    gpus = pci_gpus(facts)
    if gpus is None:
        raise CannotCheck(f"PCI bus: {(facts.get('pci') or {}).get('error', 'not probed')}")
    if not gpus:
        raise NotApplicable("no NVIDIA GPU on the PCI bus")
    mods = section(facts, "kernel_modules")
    nm = facts.get("nvidia_module") or {}
    running = nm.get("running_kernel") or (facts.get("platform") or {}).get("kernel")
    if mods.get("nvidia_loaded"):
        mine = ((nm.get("kernels") or {}).get(str(running)) or {}).get("nvidia_modules") or []
        where = f" ({mine[0]})" if mine else ""
        return ok(f"the nvidia module is loaded in the running kernel {running}{where}",
                  running_kernel=running, modules_for_running_kernel=mine,
                  driver=driver_version(facts))
    if (facts.get("container") or {}).get("in_container"):
        raise NotApplicable("in a container the kernel module is the host's: run the doctor "
                            "on the host")
    if "error" in nm and len(nm) == 1:
        raise CannotCheck(f"nvidia_module probe failed: {nm['error']}")
    if not nm.get("modules_dir"):
        raise CannotCheck("/lib/modules is not readable")
    cause = module_cause(facts)
    if cause is None:
        raise NotApplicable("no NVIDIA kernel module is installed for any kernel and DKMS "
                            "has none: the driver is not installed (DR001 says how)")
    return problem(cause.summary, Remedy.shell(cause.fix, "needs root; the module loads "
                                               "without a reboot unless noted"),
                   **cause.evidence)
