"""CPU frequency policy, CPUs usable by this process (affinity, cgroup quota), NUMA."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pitstop.doctor.probes import ProbeContext, cgroup

CPU_DIR = "/sys/devices/system/cpu"


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


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    online = parse_cpu_list(sr.read_text(f"{CPU_DIR}/online"))
    if not online:
        online = sorted(int(m.group(1)) for n in sr.listdir(CPU_DIR)
                        if (m := re.fullmatch(r"cpu(\d+)", n)))
    governors: dict[int, str] = {}
    epp: dict[int, str] = {}
    drivers: Counter[str] = Counter()
    cores: set[tuple[int | None, int | None]] = set()
    max_khz: list[int] = []
    for cpu in online:
        base = f"{CPU_DIR}/cpu{cpu}"
        gov = sr.read_text(f"{base}/cpufreq/scaling_governor")
        if gov:
            governors[cpu] = gov
        pref = sr.read_text(f"{base}/cpufreq/energy_performance_preference")
        if pref:
            epp[cpu] = pref
        drv = sr.read_text(f"{base}/cpufreq/scaling_driver")
        if drv:
            drivers[drv] += 1
        mk = sr.read_int(f"{base}/cpufreq/cpuinfo_max_freq", 10)
        if mk:
            max_khz.append(mk)
        cores.add((sr.read_int(f"{base}/topology/physical_package_id", 10),
                   sr.read_int(f"{base}/topology/core_id", 10)))
    boost: dict[str, Any] = {}
    generic = sr.read_int(f"{CPU_DIR}/cpufreq/boost", 10)
    if generic is not None:
        boost["cpufreq_boost"] = generic
    no_turbo = sr.read_int(f"{CPU_DIR}/intel_pstate/no_turbo", 10)
    if no_turbo is not None:
        boost["intel_no_turbo"] = no_turbo
    amd_boost = [sr.read_int(f"{CPU_DIR}/cpu{c}/cpufreq/boost", 10) for c in online[:1]]
    if amd_boost and amd_boost[0] is not None:
        boost["per_policy_boost"] = amd_boost[0]
    status_text = sr.read_text("/proc/self/status") or ""
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", status_text, re.MULTILINE)
    allowed = parse_cpu_list(m.group(1)) if m else []
    nodes: dict[str, list[int]] = {}
    for name in sr.listdir("/sys/devices/system/node"):
        if re.fullmatch(r"node\d+", name):
            nodes[name[4:]] = parse_cpu_list(sr.read_text(f"/sys/devices/system/node/{name}/cpulist"))
    physical = len(cores) if cores and (None, None) not in cores else None
    return {
        "online": len(online),
        "physical_cores": physical,
        "cpufreq_present": bool(governors),
        "governors": {str(k): v for k, v in governors.items()},
        "governor_counts": dict(Counter(governors.values())),
        "energy_preferences": dict(Counter(epp.values())),
        "scaling_drivers": dict(drivers),
        "max_freq_mhz": round(max(max_khz) / 1000) if max_khz else None,
        "boost": boost,
        "affinity": allowed,
        "cgroup": cgroup.cpu_quota(sr),
        "numa_nodes": nodes,
    }
