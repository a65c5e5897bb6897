"""Kernel, distribution and virtualisation facts."""

from __future__ import annotations

import os
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo.kernel_text import kernel_release

# /sys/class/dmi/id/sys_vendor or product_name values that mean "a virtual machine".
VM_VENDORS = ("qemu", "kvm", "vmware", "xen", "microsoft corporation", "amazon ec2",
              "google", "innotek", "bochs", "openstack", "parallels", "digitalocean",
              "hetzner", "alibaba cloud", "oracle corporation")


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as a dict (quotes removed)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    osr = parse_os_release(sr.read_text("/etc/os-release") or sr.read_text("/usr/lib/os-release")
                           or "")
    cpuinfo = sr.read_text("/proc/cpuinfo") or ""
    hypervisor_flag = any(
        line.startswith("flags") and " hypervisor" in line for line in cpuinfo.splitlines()
    )
    vendor = sr.read_text("/sys/class/dmi/id/sys_vendor")
    product = sr.read_text("/sys/class/dmi/id/product_name")
    dmi = f"{vendor or ''} {product or ''}".lower()
    vm_by_dmi = any(v in dmi for v in VM_VENDORS)
    return {
        "kernel": kernel_release(sr),
        "os_id": osr.get("ID"),
        "os_version_id": osr.get("VERSION_ID"),
        "os_codename": osr.get("VERSION_CODENAME"),
        "os_pretty_name": osr.get("PRETTY_NAME"),
        "arch": os.uname().machine if ctx.live else None,
        "virtual_machine": hypervisor_flag or vm_by_dmi,
        "hypervisor_cpu_flag": hypervisor_flag,
        "dmi_vendor": vendor,
        "dmi_product": product,
    }
