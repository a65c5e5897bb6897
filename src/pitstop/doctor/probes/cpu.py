"""CPU frequency policy, CPUs usable by this process (affinity, cgroup quota), NUMA."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.hostinfo import cgroup
from pitstop.hostinfo.cpu import (
    CPU_DIR,
    CPUFREQ_BOOST,
    INTEL_NO_TURBO,
    cpu_values,
    online_cpus,
    parse_cpu_list,
)


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    online = online_cpus(sr)
    governors = cpu_values(sr, online, "cpufreq/scaling_governor")
    epp = cpu_values(sr, online, "cpufreq/energy_performance_preference")
    drivers = Counter(cpu_values(sr, online, "cpufreq/scaling_driver").values())
    max_khz = [int(v) for v in cpu_values(sr, online, "cpufreq/cpuinfo_max_freq").values()
               if v.isdigit() and int(v)]
    cores = {(sr.read_int(f"{CPU_DIR}/cpu{cpu}/topology/physical_package_id", 10),
              sr.read_int(f"{CPU_DIR}/cpu{cpu}/topology/core_id", 10)) for cpu in online}
    boost: dict[str, Any] = {}
    generic = sr.read_int(CPUFREQ_BOOST, 10)
    if generic is not None:
        boost["cpufreq_boost"] = generic
    no_turbo = sr.read_int(INTEL_NO_TURBO, 10)
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
