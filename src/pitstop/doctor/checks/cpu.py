"""CPU layer: frequency policy, and how many CPUs this process really has."""

from __future__ import annotations

from typing import Any

from pitstop.doctor import remedies
from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    check,
    env_vars,
    ok,
    problem,
    section,
    warning,
)
from pitstop.findings import Remedy
from pitstop.hostinfo import targets


def _no_cpufreq(facts: Facts, cpu: dict[str, Any]) -> None:
    if cpu.get("cpufreq_present"):
        return
    plat = facts.get("platform") or {}
    if plat.get("virtual_machine"):
        raise CannotCheck("cpufreq is not exposed: this is a virtual machine, the host sets "
                          "the CPU frequency")
    raise CannotCheck("cpufreq is not exposed under /sys/devices/system/cpu (no cpufreq "
                      "driver loaded, or frequency controlled by the firmware)")


@check("DR040", "cpu", 50)
def governor(facts: Facts) -> Outcome:
    cpu = section(facts, "cpu")
    _no_cpufreq(facts, cpu)
    counts: dict[str, int] = cpu.get("governor_counts") or {}
    total = sum(counts.values())
    slow = {g: n for g, n in counts.items() if g != targets.GOVERNOR}
    ev = {"governors": counts, "cores_with_cpufreq": total, "driver": cpu.get("scaling_drivers")}
    if not slow:
        return ok(f"governor performance on all {total} cores", **ev)
    desc = ", ".join(f"{g} on {n} of {total} cores" for g, n in sorted(slow.items()))
    return warning(f"CPU governor {desc}: data loading and the Python loop run at lower clocks",
                   Remedy.shell("sudo apt install linux-cpupower   # Ubuntu: linux-tools-common "
                                "linux-tools-$(uname -r)\nsudo cpupower frequency-set -g "
                                "performance\n" + remedies.system_apply("governor"),
                                "resets at reboot; more power drawn at idle"), **ev)


@check("DR041", "cpu", 35)
def energy_preference(facts: Facts) -> Outcome:
    cpu = section(facts, "cpu")
    _no_cpufreq(facts, cpu)
    prefs: dict[str, int] = cpu.get("energy_preferences") or {}
    if not prefs:
        raise NotApplicable(f"the cpufreq driver ({', '.join(cpu.get('scaling_drivers') or {})}) "
                            "has no energy_performance_preference (only intel_pstate and "
                            "amd-pstate in active mode do)")
    slow = {p: n for p, n in prefs.items() if p != targets.EPP}
    ev = {"energy_performance_preference": prefs}
    if not slow:
        return ok("energy_performance_preference = performance on every core", **ev)
    return warning("energy_performance_preference " + ", ".join(
        f"{p} on {n} cores" for p, n in sorted(slow.items())) + ": the CPU favours saving energy",
                   Remedy.shell("echo performance | sudo tee "
                                "/sys/devices/system/cpu/cpu*/cpufreq/"
                                "energy_performance_preference\n"
                                + remedies.system_apply("energy-preference"),
                                "resets at reboot"), **ev)


@check("DR042", "cpu", 40)
def boost(facts: Facts) -> Outcome:
    cpu = section(facts, "cpu")
    b: dict[str, int] = cpu.get("boost") or {}
    if not b:
        _no_cpufreq(facts, cpu)
        raise CannotCheck("no boost/turbo switch exposed (cpufreq/boost, intel_pstate/no_turbo)")
    off = b.get("cpufreq_boost") == 0 or b.get("intel_no_turbo") == 1 or b.get(
        "per_policy_boost") == 0
    ev = {"boost": b}
    if not off:
        return ok("turbo/boost enabled", **ev)
    cmds = []
    if b.get("intel_no_turbo") == 1:
        cmds.append("echo 0 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo")
    if b.get("cpufreq_boost") == 0:
        cmds.append("echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/boost")
    if b.get("per_policy_boost") == 0:  # amd-pstate: one switch per cpufreq policy
        cmds.append("echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/policy*/boost")
    cmd = "\n".join(cmds)
    return warning("CPU turbo/boost is disabled: single-thread speed (the Python training loop, "
                   "JPEG decode) drops by 20-40 %",
                   Remedy.shell(cmd + "\n" + remedies.system_apply("boost"),
                                "resets at reboot; check the firmware setting too"), **ev)


def usable_cpus(cpu: dict[str, Any]) -> tuple[float, str]:
    """CPUs this process may use: min(affinity, cgroup quota), and what limits it."""
    online = cpu.get("online") or 0
    allowed = len(cpu.get("affinity") or []) or online
    quota = (cpu.get("cgroup") or {}).get("cpus")
    if quota is not None and quota < allowed:
        return float(quota), f"cgroup v{cpu['cgroup'].get('version')} CPU quota"
    if allowed < online:
        return float(allowed), "CPU affinity"
    return float(online), "all online CPUs"


def _thread_setting(facts: Facts) -> tuple[int | None, str]:
    """The intra-op thread count training will use, if the facts say: OMP_NUM_THREADS
    (torch follows it), else torch's own count recorded with --torch."""
    env = env_vars(facts)
    try:
        n = int(str(env.get("OMP_NUM_THREADS", "")).split(",")[0])
        return n, f"OMP_NUM_THREADS={n}"
    except ValueError:
        pass
    rt = (facts.get("torch") or {}).get("runtime") or {}
    if isinstance(rt.get("num_threads"), int):
        return rt["num_threads"], f"torch.get_num_threads()={rt['num_threads']}"
    return None, ""


def _scheduler(facts: Facts) -> str | None:
    """Who handed this process its CPUs: a Slurm job or a container runtime."""
    env = env_vars(facts)
    if env.get("SLURM_JOB_ID"):
        return f"Slurm job {env['SLURM_JOB_ID']}"
    container = facts.get("container") or {}
    if container.get("in_container"):
        return f"the {container.get('runtime') or 'container'} runtime"
    return None


@check("DR043", "cpu", 45)
def cpu_quota(facts: Facts) -> Outcome:
    cpu = section(facts, "cpu")
    online = cpu.get("online")
    if not online:
        raise CannotCheck("the number of online CPUs is unknown")
    usable, why = usable_cpus(cpu)
    ev: dict[str, Any] = {"os_cpu_count": online, "usable_cpus": usable, "limited_by": why,
                          "affinity_cpus": len(cpu.get("affinity") or []),
                          "cgroup_quota_cpus": (cpu.get("cgroup") or {}).get("cpus")}
    if usable >= online:
        return ok(f"all {online} CPUs usable", **ev)
    n = max(1, int(usable))
    threads, threads_text = _thread_setting(facts)
    who = _scheduler(facts)
    hint = (f"size DataLoader workers by these {usable:g} CPUs "
            "(len(os.sched_getaffinity(0))), not os.cpu_count()")
    if why == "CPU affinity" and who:
        # A cpuset handed out by a scheduler: libgomp sizes its default pool by the affinity
        # mask (torch 2.13 here: 1 intra-op thread under `taskset -c 0`), so code that reads
        # os.cpu_count() itself is what oversubscribes; DR044 judges the thread counts.
        ev["assigned_by"] = who
        return ok(f"{who} gave this process {usable:g} of the {online} CPUs (CPU affinity, "
                  f"which OpenMP's default thread count follows); {hint}", **ev)
    if why.startswith("cgroup") and threads is not None and threads <= usable:
        ev["threads"] = threads_text
        return ok(f"{usable:g} of the {online} CPUs usable ({why}) and {threads_text} fits "
                  f"it; {hint}", **ev)
    return warning(f"os.cpu_count() says {online} but this process may use {usable:g} CPUs "
                   f"({why}): pools sized by cpu_count oversubscribe",
                   Remedy.code(f"size pools by the usable CPUs: DataLoader(num_workers<={max(1, n - 1)}),"
                               f" torch.set_num_threads({n}); export OMP_NUM_THREADS={n}"), **ev)


@check("DR044", "cpu", 55)
def oversubscription(facts: Facts) -> Outcome:
    cpu = section(facts, "cpu")
    env = env_vars(facts)
    usable, why = usable_cpus(cpu)
    rt = (facts.get("torch") or {}).get("runtime") or {}
    ev: dict[str, Any] = {"usable_cpus": usable, "limited_by": why}
    too_many = []
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if var in env:
            ev[var] = env[var]
            try:
                n = int(env[var].split(",")[0])
            except ValueError:
                continue
            if n > usable:
                too_many.append(f"{var}={n}")
    threads = rt.get("num_threads")
    if isinstance(threads, int):
        ev["torch_num_threads"] = threads
        if threads > usable and "OMP_NUM_THREADS" not in env:
            too_many.append(f"torch.get_num_threads()={threads}")
    n = max(1, int(usable))
    if too_many:
        return problem(f"{', '.join(too_many)} but only {usable:g} CPUs usable ({why}): threads "
                       "time-share cores and spin",
                       Remedy.shell(f"export OMP_NUM_THREADS={n} MKL_NUM_THREADS={n}"), **ev)
    # OpenMP sizes its pool by the CPU affinity, not by a cgroup quota: only a quota
    # leaves torch's default thread count too high.
    if usable < (cpu.get("online") or 0) and why.startswith("cgroup") and \
            "OMP_NUM_THREADS" not in env and not threads:
        return warning(f"OMP_NUM_THREADS is unset and only {usable:g} of {cpu.get('online')} "
                       "CPUs are usable: torch may start more intra-op threads than it can run "
                       "(run with --torch to see its count)",
                       Remedy.shell(f"export OMP_NUM_THREADS={n}"), **ev)
    if usable < (cpu.get("online") or 0) and not threads and "OMP_NUM_THREADS" not in env:
        # Only the affinity limits (a quota warned above): OpenMP's default follows it, but
        # what torch itself starts is known only from its import.
        return ok(f"no thread count set above the {usable:g} usable CPUs ({why}, which OpenMP's "
                  "default follows); torch's own count is not known: run with --torch", **ev)
    return ok("thread counts fit the usable CPUs", **ev)
