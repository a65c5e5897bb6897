"""CPUs in sysfs: which are online, and per-CPU attribute values."""

from __future__ import annotations

import re

from pitstop.sysroot import Sysroot

__all__ = [
    "CPUFREQ_BOOST",
    "CPU_DIR",
    "INTEL_NO_TURBO",
    "cpu_values",
    "online_cpus",
    "parse_cpu_list",
]

CPU_DIR = "/sys/devices/system/cpu"
# The two machine-wide turbo switches: intel_pstate's (1 = off), cpufreq's (0 = off).
INTEL_NO_TURBO = f"{CPU_DIR}/intel_pstate/no_turbo"
CPUFREQ_BOOST = f"{CPU_DIR}/cpufreq/boost"


def parse_cpu_list(text: str | None) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: list[int] = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def online_cpus(sr: Sysroot) -> list[int]:
    """The online CPUs (``cpu/online``), or every ``cpuN`` directory if that is missing."""
    online = parse_cpu_list(sr.read_text(f"{CPU_DIR}/online"))
    if online:
        return online
    return sorted(int(m.group(1)) for n in sr.listdir(CPU_DIR)
                  if (m := re.fullmatch(r"cpu(\d+)", n)))


def cpu_values(sr: Sysroot, cpus: list[int], rel: str) -> dict[int, str]:
    """``cpuN/<rel>`` of each CPU that has it, non-empty (``rel`` e.g.
    ``cpufreq/scaling_governor``)."""
    out: dict[int, str] = {}
    for cpu in cpus:
        value = sr.read_text(f"{CPU_DIR}/cpu{cpu}/{rel}")
        if value:
            out[cpu] = value
    return out
