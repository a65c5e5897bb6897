"""Documentation of the CPU codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import SYSTEM_APPLY, P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR040", "cpu-governor-slow", "CPU frequency governor is not `performance`",
        "cpu", W,
        "Reads `scaling_governor` of every core. Where cpufreq is not exposed (most virtual "
        "machines) it says so instead of guessing.",
        "`powersave`, `ondemand`, `conservative` and `schedutil` ramp clocks up late for bursty "
        "work such as data loading, JPEG decoding and the Python side of the training loop.",
        "```\n$ cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort | uniq -c\n"
        "     16 powersave\n```",
        "```sh\nsudo apt install linux-cpupower   # Ubuntu: linux-tools-common linux-tools-$(uname -r)\n"
        "sudo cpupower frequency-set -g performance\n```\n" + SYSTEM_APPLY.format("governor"),
        "safe: more power at idle; resets at reboot."),
    doc("DR041", "cpu-energy-preference-saving", "CPU energy/performance preference favours saving energy",
        "cpu", W,
        "Reads `energy_performance_preference` (intel_pstate/amd-pstate active mode).",
        "With `balance_power` or `power` the CPU's own frequency controller favours efficiency "
        "even under the `powersave` governor.",
        "```\nenergy_performance_preference balance_power on 16 cores\n```",
        "```sh\necho performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference\n```\n"
        + SYSTEM_APPLY.format("energy-preference"),
        "safe: resets at reboot."),
    doc("DR042", "cpu-boost-disabled", "CPU turbo/boost disabled", "cpu", W,
        "Reads `/sys/devices/system/cpu/cpufreq/boost` and `intel_pstate/no_turbo`.",
        "Without boost the cores stay at base clock: single-thread work (the Python loop, "
        "decoding in workers) runs 20-40 % slower.",
        "```\n$ cat /sys/devices/system/cpu/intel_pstate/no_turbo\n1\n```",
        "```sh\necho 0 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo   # Intel\n"
        "echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/boost             # AMD/acpi-cpufreq\n```\n"
        + SYSTEM_APPLY.format("boost"),
        "safe: resets at reboot; it may also be disabled in the firmware setup."),
    doc("DR043", "cpu-quota-below-cpu-count", "Fewer usable CPUs than os.cpu_count() reports", "cpu", W,
        "Compares the online CPUs (what `os.cpu_count()` returns) with the CPUs this process may "
        "use: its affinity mask (`Cpus_allowed_list`) and its cgroup CPU quota (v2 `cpu.max`, "
        "v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`), as containers and Slurm set them.",
        "Code that sizes pools by `os.cpu_count()` (DataLoader workers, OpenMP threads) starts "
        "far more threads than it may run: they time-share and get throttled by the quota. "
        "Not reported when a scheduler (a Slurm job, a container runtime) handed out a CPU "
        "affinity mask, which OpenMP's default thread count follows (DR044 judges torch's own "
        "count), nor under a quota that "
        "`OMP_NUM_THREADS` (or torch's recorded thread count) already fits: the finding is "
        "then `ok` with the hint for DataLoader workers.",
        "```\nos.cpu_count() says 64 but this process may use 8 CPUs (cgroup v2 CPU quota)\n```",
        "Size pools by the usable CPUs: `DataLoader(num_workers=7)`, `torch.set_num_threads(8)`, "
        "`export OMP_NUM_THREADS=8`; in Python, `len(os.sched_getaffinity(0))` respects "
        "affinity but not the quota.",
        "manual: sizing pools is a change to your training code or job script."),
    doc("DR044", "cpu-thread-oversubscription", "Thread counts exceed the usable CPUs", "cpu", P,
        "Compares `OMP_NUM_THREADS`/`MKL_NUM_THREADS`/`OPENBLAS_NUM_THREADS` and (with `--torch`, "
        "or recorded in a sysroot's `torch_runtime.json`) `torch.get_num_threads()` with the "
        "CPUs this process may use. With none of them known, a cgroup CPU quota below the CPU "
        "count is a warning (OpenMP sizes its pool by the affinity mask, never by the quota); "
        "under an affinity mask alone the finding is `ok` and says torch's own count is "
        "unknown without `--torch` (its inter-op pool, and per pytorch/pytorch#193859 the "
        "intra-op default of some builds, are sized by the host's cores).",
        "More compute threads than cores make OpenMP threads spin and wait on each other: CPU "
        "ops and data preprocessing get slower, not faster.",
        "```\nOMP_NUM_THREADS=64 but only 8 CPUs usable (cgroup v2 CPU quota)\n```",
        "```sh\nexport OMP_NUM_THREADS=8 MKL_NUM_THREADS=8\n```",
        "safe: fewer threads than cores never changes results, only scheduling."),
]
