"""Finding codes of ``pitstop system`` (SY###), registered at import.

One code per setting of :data:`pitstop.system.settings.SETTINGS` (reported by
``pitstop system show --json`` when the setting differs from its training value), plus
SY012 for a machine whose sysfs pitstop cannot write.
"""

from __future__ import annotations

from pitstop.findings import CodeDoc, Severity, register
from pitstop.system.settings import SETTINGS

TUNED = "tuned profiles throughput-performance / accelerator-performance: https://github.com/redhat-performance/tuned"

# name -> (kebab name, what it looks like, how it is read, safety, references)
_DETAILS: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = {
    "governor": (
        "cpu-governor-not-performance",
        "$ cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor\npowersave",
        "`scaling_governor` of every CPU (one write per cpufreq policy)",
        "Costs power: cores stay at high clocks while idle.",
        ("https://docs.kernel.org/admin-guide/pm/cpufreq.html", TUNED)),
    "energy-preference": (
        "cpu-energy-preference-not-performance",
        "$ cat /sys/devices/system/cpu/cpu0/cpufreq/energy_performance_preference\n"
        "balance_power",
        "`energy_performance_preference` (HWP/CPPC) and `power/energy_perf_bias` of every CPU",
        "Costs power. With intel_pstate under the performance governor the kernel already "
        "pins EPP to performance.",
        ("https://docs.kernel.org/admin-guide/pm/intel_pstate.html", TUNED)),
    "boost": (
        "cpu-boost-off",
        "$ cat /sys/devices/system/cpu/intel_pstate/no_turbo\n1",
        "`intel_pstate/no_turbo` or `cpufreq/boost`, and the per-policy `cpufreq/boost` "
        "(amd-pstate)",
        "Costs power and heat; a machine with poor cooling may have turbo off on purpose.",
        ("https://docs.kernel.org/admin-guide/pm/cpufreq.html#frequency-boost-support",)),
    "min-perf-pct": (
        "intel-min-perf-pct-low",
        "$ cat /sys/devices/system/cpu/intel_pstate/min_perf_pct\n8",
        "`intel_pstate/min_perf_pct`",
        "Costs idle power.",
        ("https://docs.kernel.org/admin-guide/pm/intel_pstate.html", TUNED)),
    "cstate-latency": (
        "deep-cstates-enabled",
        "$ grep . /sys/devices/system/cpu/cpu0/cpuidle/state*/{name,latency}\n"
        ".../state3/name:C6\n.../state3/latency:170",
        "`cpuidle/stateN/latency` and `disable` of every CPU",
        "Costs idle power and can lower the turbo headroom of busy cores.",
        ("https://docs.kernel.org/admin-guide/pm/cpuidle.html",
         "https://docs.kernel.org/power/pm_qos_interface.html", TUNED)),
    "gpu-persistence": (
        "gpu-persistence-off",
        "$ nvidia-smi --query-gpu=persistence_mode --format=csv\npersistence_mode\nDisabled",
        "NVML persistence mode of every GPU; changed with `nvidia-smi -i N -pm 1`",
        "Safe: keeps the driver loaded (a few watts when idle). NVIDIA recommends the "
        "nvidia-persistenced daemon for a permanent setting.",
        ("https://docs.nvidia.com/deploy/driver-persistence/index.html",)),
    "gpu-power-limit": (
        "gpu-power-limit-below-default",
        "$ nvidia-smi -q -d POWER | grep -E 'Current Power Limit|Default Power Limit'\n"
        "    Current Power Limit : 250.00 W\n    Default Power Limit : 450.00 W",
        "NVML power management limit vs its default; changed with `nvidia-smi -i N -pl W`",
        "Draws up to the board's rated power; check the power supply and cooling if "
        "someone lowered it on purpose. The limit resets at reboot unless --persist.",
        ("https://docs.nvidia.com/deploy/nvidia-smi/index.html",)),
    "swappiness": (
        "swappiness-high",
        "$ sysctl vm.swappiness\nvm.swappiness = 60",
        "`/proc/sys/vm/swappiness` (only when swap is active)",
        "Safe: the page cache gives way to anonymous memory a little sooner.",
        ("https://docs.kernel.org/admin-guide/sysctl/vm.html#swappiness", TUNED)),
    "thp": (
        "transparent-hugepages-never",
        "$ cat /sys/kernel/mm/transparent_hugepage/enabled\nalways madvise [never]",
        "`/sys/kernel/mm/transparent_hugepage/enabled`",
        "Safe: with `madvise` only programs that ask get huge pages.",
        ("https://docs.kernel.org/admin-guide/mm/transhuge.html",)),
    "readahead": (
        "dataset-readahead-small",
        "$ cat /sys/block/sda/queue/read_ahead_kb\n128",
        "`read_ahead_kb` of the disk holding `--data PATH` (found through "
        "/proc/self/mountinfo; a partition uses its whole disk's queue)",
        "Safe; may waste disk bandwidth on purely random small reads.",
        ("https://docs.kernel.org/block/queue-sysfs.html", TUNED)),
    "shm": (
        "shm-small",
        "$ df -h /dev/shm\nFilesystem Size Used Avail Use% Mounted on\nshm 64M 0 64M 0% /dev/shm",
        "the size of the /dev/shm tmpfs (mountinfo's size= option)",
        "Safe when growing: tmpfs uses memory only for what is stored. Lasts until "
        "reboot; make it permanent in /etc/fstab.",
        ("https://pytorch.org/docs/stable/data.html#multi-process-data-loading",)),
}


# How pitstop changes a setting, where that is not a plain sysfs/procfs write.
_HOW_CHANGED = {
    "cstate-latency":
        "pitstop disables the idle states slower than 99 µs to wake through their sysfs "
        "`disable` switches (as `cpupower idle-set -D 100` does, except that pitstop does "
        "not re-enable lighter states someone disabled). The PM QoS way that tuned uses, "
        "writing to /dev/cpu_dma_latency, lasts only while a process keeps the file open; "
        "pitstop exits, so it uses the switches, which last until reboot; `--persist` "
        "re-applies them at boot.",
    "gpu-persistence": "pitstop runs `nvidia-smi -i N -pm 1` (NVML has no other interface "
                       "for it) and reads the mode back.",
    "gpu-power-limit": "pitstop runs `nvidia-smi -i N -pl DEFAULT` and reads the limit back "
                       "(nvidia-smi can report success on a board whose limit is locked).",
    "shm": "pitstop grows it (never shrinks it) to half of RAM with "
           "`mount -o remount,size=...k /dev/shm`; in a container the runtime sets it, so "
           "pitstop only prints the `docker run --shm-size=...` to use instead.",
}


def _docs() -> list[CodeDoc]:
    docs = []
    for s in SETTINGS:
        name, example, how, safety, refs = _DETAILS[s.name]
        docs.append(CodeDoc(
            code=s.code, name=name, title=s.title, category="os",
            severity=Severity.WARNING,
            what=(f"Reads {how} and compares it with the value training wants."
                  + (f" {_HOW_CHANGED[s.name]}" if s.name in _HOW_CHANGED else "")),
            why=s.why,
            example=f"```console\n{example}\n```",
            fix=(f"```console\n$ pitstop system apply --only {s.name}          # the exact writes\n"
                 f"$ sudo pitstop system apply --yes --only {s.name}\n"
                 "$ sudo pitstop system revert --yes                 # undo\n```"),
            fix_safety=f"pitstop saves the previous value first and `revert` restores it. "
                       f"{safety}",
            references=refs,
        ))
    docs.append(CodeDoc(
        code="SY012", name="sysfs-read-only", title="sysfs is read-only here (container)",
        category="os", severity=Severity.INFO,
        what="Finds /sys mounted read-only, as in an unprivileged Docker or Kubernetes "
             "container, so no kernel setting can be changed from inside.",
        why="The CPU, memory and disk settings that training wants belong to the host "
            "kernel; a container can only read them.",
        example="```console\n$ grep ' /sys ' /proc/self/mountinfo\n"
                "... /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n```",
        fix="Run `sudo pitstop system apply --yes` on the host, or the host commands "
            "`pitstop system show` prints (e.g. `cpupower frequency-set -g performance`; "
            "cpupower: `apt install linux-cpupower`).",
        fix_safety="manual: pitstop does not try to escape the container.",
    ))
    return docs


register(*_docs())
