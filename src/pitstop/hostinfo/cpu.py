"""CPUs: which are online and their sysfs attributes, and how many a process may use."""

from __future__ import annotations

import math
import os
import re

from pitstop.hostinfo import cgroup
from pitstop.sysroot import Sysroot

__all__ = [
    "CPUFREQ_BOOST",
    "CPU_DIR",
    "INTEL_NO_TURBO",
    "cpu_values",
    "online_cpus",
    "parse_cpu_list",
    "usable_cpus",
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


def usable_cpus(sysroot: Sysroot | None = None, pid: int | None = None) -> tuple[int, str]:
    """How many CPUs a process may run on (this one, or ``pid``), and how that was found
    out: its affinity mask, capped by its cgroup's CPU quota (a container's, a Slurm
    job's), which ``os.cpu_count()`` does not show."""
    sysroot = sysroot or Sysroot()
    proc = "self" if pid is None else str(pid)
    affinity: int | None = None
    if sysroot.is_live:
        try:
            affinity = len(os.sched_getaffinity(pid or 0))
        except (AttributeError, OSError):
            affinity = None
    if affinity is None:
        text = sysroot.read_text(f"/proc/{proc}/status") or ""
        for line in text.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                try:
                    affinity = len(parse_cpu_list(line.split(":", 1)[1])) or None
                except ValueError:
                    affinity = None
    if affinity is None:
        affinity = os.cpu_count() or 1
    quota, where = cgroup.cpu_limit(sysroot, proc)
    if quota is not None and math.ceil(quota) < affinity:
        return max(1, math.ceil(quota)), f"cgroup quota {quota:g} CPUs ({where})"
    whose = "this process's" if pid is None else f"PID {pid}'s"
    return affinity, f"{affinity} CPUs in {whose} affinity mask"
