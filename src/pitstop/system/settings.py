"""The table of OS settings a training machine wants, and how to read and change each.

Every :class:`Setting` has a stable ``name`` (the one ``--only`` takes and the doctor's
remedies name), why training wants it, and an ``inspect`` function that reads the
machine and returns a :class:`Reading`: the current value, the wanted value, and the
exact :class:`Change` list (each with its undo) that would bring it there. Inspection
only reads; :mod:`pitstop.system.apply` performs changes.

The wanted values follow Red Hat's ``tuned`` profiles ``throughput-performance`` and
``accelerator-performance`` (governor performance, EPP performance, boost on,
``min_perf_pct`` 100, ``force_latency`` 99 µs, ``vm.swappiness`` 10, readahead 4 MiB),
restricted to what matters for feeding GPUs from DataLoader workers.

The order of :data:`SETTINGS` is the order of writes *and* of restores: with
``intel_pstate`` the governor must change before the energy preference in both
directions (under the ``performance`` governor the kernel pins EPP to
``performance`` and rejects other values), so restores do not run in reverse.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pitstop.hostinfo import targets
from pitstop.hostinfo.blockdev import readahead_file
from pitstop.hostinfo.container import detect_container, read_environ
from pitstop.hostinfo.cpu import CPU_DIR, CPUFREQ_BOOST, INTEL_NO_TURBO, cpu_values, online_cpus
from pitstop.hostinfo.kernel_text import mem_total_bytes, menu_choice, parse_meminfo
from pitstop.hostinfo.mounts import Mount, mount_for, read_mounts
from pitstop.hostinfo.shm import shm_size
from pitstop.sysroot import Sysroot
from pitstop.system.actions import Action, FileWrite, RunCommand
from pitstop.system.machine import (
    GpuState,
    find_tool,
    read_gpus,
)

__all__ = [
    "SETTINGS",
    "SETTING_NAMES",
    "Change",
    "Machine",
    "Reading",
    "Setting",
    "Status",
    "inspect_all",
]

CSTATE_LATENCY_LIMIT_US = 99  # tuned accelerator-performance: force_latency=99
SWAPPINESS_WANTED = targets.SWAPPINESS_MAX
READAHEAD_WANTED_KB = targets.READAHEAD_KB
SHM_ENOUGH_BYTES = 16 * 2**30
THP = "/sys/kernel/mm/transparent_hugepage/enabled"


class Status(str, Enum):
    OK = "ok"  # at the training value already
    DIFFERS = "differs"  # pitstop can change it (see the changes)
    UNSUPPORTED = "unsupported"  # this machine has no such knob (VM, other driver, no GPU)
    UNKNOWN = "unknown"  # could not be read, or needs an input (--data)


@dataclass(frozen=True)
class Change:
    """One write or command, its undo, and why it cannot run here (``blocked``) if so."""

    setting: str
    target: str  # what it changes, for people: "cpu3", "GPU 0", "/dev/nvme0n1"
    current: str
    wanted: str
    action: Action
    undo: Action
    blocked: str = ""
    # For commands whose tool may "succeed" without changing anything (nvidia-smi
    # prints "Treating as warning and moving on."): (GPU index, GpuState field, value)
    # to read back after the command.
    expect: tuple[int, str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"setting": self.setting, "target": self.target, "current": self.current,
               "wanted": self.wanted, "action": self.action.to_dict(),
               "command": self.action.describe(), "undo": self.undo.to_dict()}
        if self.blocked:
            out["blocked"] = self.blocked
        return out


@dataclass(frozen=True)
class Reading:
    """A setting as found on the machine."""

    name: str
    current: str
    wanted: str
    status: Status
    detail: str = ""  # the reason for unsupported/unknown, or a note
    changes: tuple[Change, ...] = ()
    host_command: str = ""  # what an admin would run by hand (on the host, in a container)

    def to_dict(self, setting: Setting) -> dict[str, Any]:
        return {
            "name": self.name, "title": setting.title, "code": setting.code,
            "current": self.current, "wanted": self.wanted, "status": self.status.value,
            "detail": self.detail, "why": setting.why, "host_command": self.host_command,
            "changes": [c.to_dict() for c in self.changes],
        }


@dataclass
class Machine:
    """What every inspector may look at; built once per command."""

    sr: Sysroot
    data_path: str | None = None
    mounts: list[Mount] = field(default_factory=list)
    container: str | None = None
    gpus: list[GpuState] = field(default_factory=list)
    gpu_reason: str = ""

    @classmethod
    def probe(cls, sr: Sysroot, data_path: str | None = None, *, gpus: bool = True) -> Machine:
        m = cls(sr=sr, data_path=data_path, mounts=read_mounts(sr),
                container=detect_container(sr, read_environ(sr)).runtime)
        if gpus:
            m.gpus, m.gpu_reason = read_gpus(sr)
        else:
            m.gpu_reason = "not read"
        return m

    def read_only_reason(self, path: str) -> str:
        """Why machine file ``path`` cannot be written here ("" when it can)."""
        mount = mount_for(path, self.mounts)
        if mount is not None and mount.read_only:
            where = f" inside a {self.container} container" if self.container else ""
            return f"{mount.mount_point} is mounted read-only{where}"
        return ""

    def raw(self, path: str) -> bytes | None:
        try:
            return self.sr.path(path).read_bytes()
        except OSError:
            return None


@dataclass(frozen=True)
class Setting:
    name: str
    code: str  # the SY### finding code reported when it differs
    title: str  # what is wrong when it differs, one line
    why: str  # why training wants the value (one or two sentences)
    inspect: Callable[[Machine], Reading]
    # What its changes and undos may touch, and nothing else: full-match regexes for
    # the machine files it writes and for its commands (shlex-joined). `revert` obeys a
    # saved undo only if the setting it is saved under manages it (see `manages`).
    writes: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    def manages(self, action: Action) -> bool:
        """True when ``action`` is one this setting's changes or undos can be."""
        if isinstance(action, FileWrite):
            path = action.path
            parts = path.split("/")
            if posixpath.normpath(path) != path or "." in parts or ".." in parts:
                return False
            return any(re.fullmatch(p, path) for p in self.writes)
        command = shlex.join(action.argv)
        return any(re.fullmatch(p, command) for p in self.runs)


# ---------------------------------------------------------------- helpers


def _cpus(sr: Sysroot) -> list[str]:
    """``cpuN`` of every online CPU (offline ones have no cpufreq policy to change)."""
    return [f"cpu{n}" for n in online_cpus(sr)]


def _ranges(nums: list[int]) -> str:
    """[0,1,2,5] -> "0-2,5"."""
    out: list[str] = []
    start = prev = None
    for n in sorted(nums):
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def _summary(values: dict[str, str]) -> str:
    """{"cpu0": "powersave", "cpu1": "performance"} -> "powersave (cpu0), performance (cpu1)"."""
    groups: dict[str, list[int]] = {}
    for cpu, value in values.items():
        groups.setdefault(value, []).append(int(cpu[3:]) if cpu[3:].isdigit() else -1)
    if len(groups) == 1:
        return next(iter(groups))
    return ", ".join(f"{v} (cpu{_ranges(ns)})" for v, ns in sorted(groups.items()))


def _file_change(m: Machine, setting: str, target: str, path: str, current: str,
                 wanted: str, undo_data: bytes | None = None) -> Change:
    raw = m.raw(path)
    undo = FileWrite(path, undo_data if undo_data is not None else (raw or b""))
    return Change(setting, target, current, wanted, FileWrite(path, wanted.encode() + b"\n"),
                  undo, blocked=m.read_only_reason(path))


def _unique_paths(m: Machine, paths: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop files that are the same kernel object as an earlier one (cpuN/cpufreq links
    to a shared policyM: writing it once per policy is enough)."""
    seen: set[str] = set()
    out = []
    for target, path in paths:
        real = m.sr.realpath(path) or path
        if real not in seen:
            seen.add(real)
            out.append((target, path))
    return out


def _per_cpu(m: Machine, setting: str, rel: str, wanted: str, label: str = ""
             ) -> tuple[dict[str, str], list[Change]]:
    values: dict[str, str] = {}
    changes: list[Change] = []
    paths = []
    for n, value in cpu_values(m.sr, online_cpus(m.sr), rel).items():
        values[f"cpu{n}"] = value
        paths.append((f"cpu{n}", f"{CPU_DIR}/cpu{n}/{rel}"))
    for cpu, path in _unique_paths(m, paths):
        if values[cpu] != wanted:
            target = f"{cpu} {label}" if label else cpu
            changes.append(_file_change(m, setting, target, path, values[cpu], wanted))
    return values, changes


def _reading(name: str, current: str, wanted: str, changes: list[Change], host: str,
             detail: str = "") -> Reading:
    status = Status.DIFFERS if changes else Status.OK
    return Reading(name, current, wanted, status, detail, tuple(changes), host)


# ---------------------------------------------------------------- CPU


def inspect_governor(m: Machine) -> Reading:
    name, wanted = "governor", targets.GOVERNOR
    host = "cpupower frequency-set -g performance"
    cpus = _cpus(m.sr)
    first = next((c for c in cpus if m.sr.exists(f"{CPU_DIR}/{c}/cpufreq/scaling_governor")),
                 None)
    if first is None:
        return Reading(name, "none", wanted, Status.UNSUPPORTED,
                       "no cpufreq in sysfs: the hypervisor or firmware sets CPU speed "
                       "(typical for a VM or cloud instance)", host_command=host)
    driver = m.sr.read_text(f"{CPU_DIR}/{first}/cpufreq/scaling_driver") or "unknown"
    available = (m.sr.read_text(f"{CPU_DIR}/{first}/cpufreq/scaling_available_governors")
                 or "").split()
    values, changes = _per_cpu(m, name, "cpufreq/scaling_governor", wanted)
    if available and wanted not in available:
        return Reading(name, _summary(values), wanted, Status.UNSUPPORTED,
                       f"driver {driver} offers no performance governor "
                       f"(available: {' '.join(available)})", host_command=host)
    return _reading(name, _summary(values), wanted, changes, host, f"driver {driver}")


def inspect_energy_preference(m: Machine) -> Reading:
    name = "energy-preference"
    epp_values, epp_changes = _per_cpu(
        m, name, "cpufreq/energy_performance_preference", targets.EPP, "EPP")
    epb_values, epb_changes = _per_cpu(m, name, "power/energy_perf_bias", "0", "EPB")
    if not epp_values and not epb_values:
        return Reading(name, "none", "performance", Status.UNSUPPORTED,
                       "neither energy_performance_preference (HWP/CPPC) nor "
                       "energy_perf_bias in sysfs", host_command="cpupower set -b 0")
    current, wanted, hosts = [], [], []
    if epp_values:
        current.append(f"EPP {_summary(epp_values)}")
        wanted.append("EPP performance")
        hosts.append("echo performance | sudo tee "
                     f"{CPU_DIR}/cpu*/cpufreq/energy_performance_preference")
    if epb_values:
        current.append(f"EPB {_summary(epb_values)}")
        wanted.append("EPB 0")
        hosts.append("cpupower set -b 0")
    return _reading(name, "; ".join(current), "; ".join(wanted), epp_changes + epb_changes,
                    " && ".join(hosts))


def inspect_boost(m: Machine) -> Reading:
    """The machine-wide turbo switch (intel_pstate's or cpufreq's), and the per-policy
    ``cpufreq/boost`` switches that amd-pstate and newer kernels add: all must be on."""
    name = "boost"
    no_turbo, boost = INTEL_NO_TURBO, CPUFREQ_BOOST
    changes: list[Change] = []
    current: list[str] = []
    hosts: list[str] = []
    if m.sr.exists(no_turbo):
        value = m.sr.read_text(no_turbo) or "?"
        current.append("on" if value == "0" else f"off (no_turbo={value})")
        if value != "0":
            changes.append(_file_change(m, name, "intel_pstate", no_turbo,
                                        f"no_turbo={value}", "0"))
        hosts.append(f"echo 0 | sudo tee {no_turbo}")
    elif m.sr.exists(boost):
        value = m.sr.read_text(boost) or "?"
        current.append("on" if value == "1" else f"off (boost={value})")
        if value != "1":
            changes.append(_file_change(m, name, "cpufreq", boost, f"boost={value}", "1"))
        hosts.append(f"echo 1 | sudo tee {boost}")
    per_policy, policy_changes = _per_cpu(m, name, "cpufreq/boost", "1", "boost")
    if per_policy:
        current.append(f"per-policy boost {_summary(per_policy)}")
        changes += policy_changes
        if policy_changes:
            hosts.append(f"echo 1 | sudo tee {CPU_DIR}/cpufreq/policy*/boost")
    if not current:
        return Reading(name, "none", "on", Status.UNSUPPORTED,
                       "no intel_pstate/no_turbo or cpufreq/boost: the firmware or hypervisor "
                       "controls boost")
    return _reading(name, "; ".join(current), "on", changes, " && ".join(hosts))


def inspect_min_perf_pct(m: Machine) -> Reading:
    name = "min-perf-pct"
    path = f"{CPU_DIR}/intel_pstate/min_perf_pct"
    value = m.sr.read_text(path)
    if value is None:
        return Reading(name, "none", "100", Status.UNSUPPORTED,
                       "only intel_pstate has min_perf_pct; elsewhere the performance "
                       "governor already keeps the frequency up")
    changes = [] if value == "100" else [
        _file_change(m, name, "intel_pstate", path, value, "100")]
    return _reading(name, value, "100", changes, f"echo 100 | sudo tee {path}")


def inspect_cstate_latency(m: Machine) -> Reading:
    name = "cstate-latency"
    limit = CSTATE_LATENCY_LIMIT_US
    wanted = f"no idle state deeper than {limit} µs"
    # cpupower's -D disables states with latency >= its argument (and re-enables
    # lighter ones, which pitstop leaves alone).
    host = f"cpupower idle-set -D {limit + 1}"
    deep_enabled: dict[str, int] = {}  # state name -> exit latency (µs)
    cpus_with_idle = 0
    paths: list[tuple[str, str]] = []
    labels: dict[str, str] = {}
    for cpu in _cpus(m.sr):
        base = f"{CPU_DIR}/{cpu}/cpuidle"
        states = [s for s in m.sr.listdir(base) if re.fullmatch(r"state\d+", s)]
        if states:
            cpus_with_idle += 1
        for st in sorted(states, key=lambda s: int(s[5:])):
            latency = m.sr.read_int(f"{base}/{st}/latency")
            disabled = m.sr.read_text(f"{base}/{st}/disable")
            if latency is None or disabled is None or latency <= limit or disabled == "1":
                continue
            label = m.sr.read_text(f"{base}/{st}/name") or st
            deep_enabled[label] = latency
            # the state directory keeps the key unique if two states share a name
            target = f"{cpu} {label} ({st})"
            paths.append((target, f"{base}/{st}/disable"))
            labels[target] = f"{label} ({latency} µs) enabled"
    if cpus_with_idle == 0:
        return Reading(name, "none", wanted, Status.UNSUPPORTED,
                       "no cpuidle states in sysfs (a VM, or idle=poll)", host_command=host)
    changes = [_file_change(m, name, target, path, labels[target], "1")
               for target, path in _unique_paths(m, paths)]
    if deep_enabled:
        current = "enabled: " + ", ".join(
            f"{lbl} {lat} µs" for lbl, lat in sorted(deep_enabled.items(), key=lambda kv: kv[1]))
    else:
        current = f"none deeper than {limit} µs enabled"
    return _reading(name, current, wanted, changes, host,
                    "persists until reboot (or --persist); pitstop does not hold "
                    "/dev/cpu_dma_latency open")


# ---------------------------------------------------------------- GPU


def _gpu_blocked(m: Machine) -> str:
    if find_tool(m.sr, "nvidia-smi") is None:
        return ("nvidia-smi not found (install: apt install nvidia-smi on Debian, "
                "nvidia-utils-<driver> on Ubuntu)")
    return ""


def inspect_gpu_persistence(m: Machine) -> Reading:
    name = "gpu-persistence"
    if not m.gpus:
        return Reading(name, "none", "enabled", Status.UNSUPPORTED, m.gpu_reason)
    blocked = _gpu_blocked(m)
    changes, values = [], []
    for g in m.gpus:
        state = {True: "enabled", False: "disabled", None: "unknown"}[g.persistence]
        values.append(f"GPU {g.index} {state}")
        if g.persistence is False:
            changes.append(Change(
                name, f"GPU {g.index} ({g.name})", "disabled", "enabled",
                RunCommand(("nvidia-smi", "-i", str(g.index), "-pm", "1")),
                RunCommand(("nvidia-smi", "-i", str(g.index), "-pm", "0")), blocked,
                expect=(g.index, "persistence", True)))
    unknown = all(g.persistence is None for g in m.gpus)
    if unknown:
        return Reading(name, "unknown", "enabled", Status.UNKNOWN,
                       "NVML does not report persistence mode")
    return _reading(name, ", ".join(values), "enabled", changes,
                    "nvidia-smi -pm 1 (or: systemctl enable --now nvidia-persistenced)")


def _watts(w: float) -> str:
    return f"{w:g}"


def inspect_gpu_power_limit(m: Machine) -> Reading:
    name = "gpu-power-limit"
    if not m.gpus:
        return Reading(name, "none", "default limit", Status.UNSUPPORTED, m.gpu_reason)
    blocked = _gpu_blocked(m)
    changes, values, hosts = [], [], []
    known = False
    for g in m.gpus:
        if g.power_limit_w is None or g.power_default_limit_w is None:
            values.append(f"GPU {g.index} unknown")
            continue
        known = True
        values.append(f"GPU {g.index} {_watts(g.power_limit_w)} W "
                      f"(default {_watts(g.power_default_limit_w)} W)")
        # Only a limit *below* the default costs speed; an admin who raised it
        # (up to the board's max) did so on purpose.
        if g.power_limit_w < g.power_default_limit_w - 0.5:
            cmd = ("nvidia-smi", "-i", str(g.index), "-pl", _watts(g.power_default_limit_w))
            hosts.append(" ".join(cmd))
            changes.append(Change(
                name, f"GPU {g.index} ({g.name})", f"{_watts(g.power_limit_w)} W",
                f"{_watts(g.power_default_limit_w)} W", RunCommand(cmd),
                RunCommand(("nvidia-smi", "-i", str(g.index), "-pl", _watts(g.power_limit_w))),
                blocked, expect=(g.index, "power_limit_w", g.power_default_limit_w)))
    if not known:
        return Reading(name, "unknown", "default limit", Status.UNKNOWN,
                       "NVML does not report the power limit")
    return _reading(name, ", ".join(values), "at least the default limit", changes,
                    " && ".join(hosts) or "nvidia-smi -i N -pl DEFAULT_WATTS")


# ---------------------------------------------------------------- memory, storage


def _swap_active(sr: Sysroot) -> bool | None:
    """SwapTotal > 0 in /proc/meminfo (as the doctor's DR052 reads it); None: unknown."""
    total = parse_meminfo(sr.read_text("/proc/meminfo") or "").get("SwapTotal")
    return None if total is None else total > 0


def inspect_swappiness(m: Machine) -> Reading:
    name = "swappiness"
    path = "/proc/sys/vm/swappiness"
    value = m.sr.read_int(path)
    host = f"sysctl -w vm.swappiness={SWAPPINESS_WANTED}"
    if value is None:
        return Reading(name, "unknown", f"<= {SWAPPINESS_WANTED}", Status.UNKNOWN,
                       f"cannot read {path}", host_command=host)
    if value <= SWAPPINESS_WANTED:
        return _reading(name, str(value), f"<= {SWAPPINESS_WANTED}", [], host)
    if _swap_active(m.sr) is False:
        return Reading(name, str(value), f"<= {SWAPPINESS_WANTED}", Status.OK,
                       "no swap is active, so swappiness has no effect", host_command=host)
    change = _file_change(m, name, "vm.swappiness", path, str(value), str(SWAPPINESS_WANTED))
    return _reading(name, str(value), f"<= {SWAPPINESS_WANTED}", [change], host)


def inspect_thp(m: Machine) -> Reading:
    name = "thp"
    wanted = "madvise (or always)"
    choice = menu_choice(m.sr.read_text(THP))
    host = f"echo madvise | sudo tee {THP}"
    if choice is None:
        return Reading(name, "none", wanted, Status.UNSUPPORTED,
                       "no transparent hugepage support in this kernel")
    if choice in targets.THP_MODES:
        return _reading(name, choice, wanted, [], host)
    # The file reads as a menu but accepts only the bare word: undo writes the
    # selected word back, which makes the kernel show the same menu again.
    change = _file_change(m, name, "transparent_hugepage", THP, choice, "madvise",
                          undo_data=choice.encode() + b"\n")
    return _reading(name, choice, wanted, [change], host)


def inspect_readahead(m: Machine) -> Reading:
    name = "readahead"
    wanted = f">= {READAHEAD_WANTED_KB} KiB"
    if m.data_path is None:
        return Reading(name, "not checked", wanted, Status.UNKNOWN,
                       "give --data PATH (the dataset directory) to check its disk")
    mount = mount_for(m.data_path, m.mounts)
    if mount is None:
        return Reading(name, "unknown", wanted, Status.UNKNOWN,
                       f"no mount for {m.data_path} in /proc/self/mountinfo")
    on = f"{m.data_path} is on {mount.mount_point} ({mount.fstype} {mount.source})"
    # NFS and FUSE have no block device but a backing-device readahead of their own.
    bdi = f"/sys/class/bdi/{mount.major_minor}/read_ahead_kb"
    if mount.major == 0 and m.sr.exists(bdi):
        path, desc = bdi, f"{mount.fstype} {mount.source}"
    else:
        found, desc = readahead_file(m.sr, mount, m.mounts)
        if found is None:
            if mount.fstype == "overlay":
                return Reading(name, "none", wanted, Status.UNSUPPORTED,
                               f"{on}: a container's layered filesystem; the disk under it "
                               "is the host's (run `pitstop system show --data` on the host, "
                               "or mount the dataset into the container)")
            if mount.major == 0 and not mount.source.startswith("/dev/"):
                return Reading(name, "none", wanted, Status.UNSUPPORTED,
                               f"{on}: no block device and no {bdi}")
            return Reading(name, "unknown", wanted, Status.UNKNOWN, f"{on}: {desc}")
        path = found
    value = m.sr.read_int(path)
    if value is None:
        return Reading(name, "unknown", wanted, Status.UNKNOWN, f"cannot read {path}")
    host = f"echo {READAHEAD_WANTED_KB} | sudo tee {path}"
    changes = [] if value >= READAHEAD_WANTED_KB else [
        _file_change(m, name, desc, path, f"{value} KiB", str(READAHEAD_WANTED_KB))]
    return _reading(name, f"{value} KiB on {desc}", wanted, changes, host, on)


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def shm_size_bytes(m: Machine) -> tuple[int | None, str]:
    """Size of /dev/shm and where the number came from (as the doctor's DR050 reads it)."""
    shm = shm_size(m.sr, mem_total_bytes(m.sr))
    if not shm.mounted:
        return None, "/dev/shm is not a mount of its own"
    if shm.size_bytes is None:
        return None, f"the size of /dev/shm is unknown (size={shm.size_option})"
    return shm.size_bytes, shm.source


def inspect_shm(m: Machine) -> Reading:
    name = "shm"
    total = mem_total_bytes(m.sr)
    size, _source = shm_size_bytes(m)
    if size is None or total is None:
        return Reading(name, "unknown", f">= {_size_text(SHM_ENOUGH_BYTES)} or half of RAM",
                       Status.UNKNOWN, _source if size is None
                       else "cannot read MemTotal from /proc/meminfo")
    # Enough: half of RAM (the kernel's tmpfs default) or 16 GiB, whichever is less —
    # a 16 GiB /dev/shm on a 1 TiB box is plenty for any DataLoader.
    enough = min(total // 2, SHM_ENOUGH_BYTES)
    wanted = f">= {_size_text(enough)}"
    wanted_bytes = total // 2  # what pitstop grows it to: the kernel's default
    wanted_k = wanted_bytes // 1024
    docker = f"docker run --shm-size={max(1, -(-wanted_bytes // 2**30))}g ..."  # rounded up
    remount = f"mount -o remount,size={wanted_k}k /dev/shm"
    host = docker if m.container else remount
    # 1% slack: tmpfs rounds the size to pages.
    if size >= enough * 0.99:
        return _reading(name, _size_text(size), wanted, [], host)
    detail = ("a remount lasts until reboot; make it permanent in /etc/fstab "
              "(tmpfs /dev/shm tmpfs defaults,size=...)")
    blocked = ""
    if m.container:
        blocked = (f"a {m.container} container's /dev/shm is set by the runtime: "
                   f"recreate it with `{docker}` (Kubernetes: an emptyDir with medium: Memory)")
    elif find_tool(m.sr, "mount") is None:
        blocked = "mount not found (install: apt install mount)"
    change = Change(name, "/dev/shm", _size_text(size), _size_text(wanted_bytes),
                    RunCommand(("mount", "-o", f"remount,size={wanted_k}k", "/dev/shm")),
                    RunCommand(("mount", "-o", f"remount,size={size // 1024}k", "/dev/shm")),
                    blocked)
    return _reading(name, _size_text(size), wanted, [change], host, detail)


# ---------------------------------------------------------------- the table

_CPU = re.escape(CPU_DIR) + r"/cpu[0-9]+"  # one CPU's folder

SETTINGS: tuple[Setting, ...] = (
    Setting("governor", "SY001", "CPU frequency governor is not `performance`",
            "ondemand/schedutil/powersave ramp the clock down whenever a core idles for a "
            "moment, which DataLoader workers and the kernel-launching main thread do all "
            "the time; each ramp-up costs latency on the critical path.",
            inspect_governor, writes=(_CPU + r"/cpufreq/scaling_governor",)),
    Setting("energy-preference", "SY002",
            "CPU energy preference favours saving power over speed",
            "With HWP (intel_pstate) or CPPC (amd-pstate) the CPU picks its own clock "
            "from energy_performance_preference / energy_perf_bias; anything but "
            "`performance` lets it trade speed for watts.",
            inspect_energy_preference,
            writes=(_CPU + r"/cpufreq/energy_performance_preference",
                    _CPU + r"/power/energy_perf_bias")),
    Setting("boost", "SY003", "CPU turbo/boost is off",
            "Turbo is the top ~20-40% of single-core clock; data loading and Python "
            "overhead in the training loop are single-thread bound.",
            inspect_boost, writes=(re.escape(INTEL_NO_TURBO), re.escape(CPUFREQ_BOOST),
                                   _CPU + r"/cpufreq/boost")),
    Setting("min-perf-pct", "SY004", "intel_pstate min_perf_pct is below 100",
            "A floor below 100% lets idle-ish cores drop to low P-states between batches; "
            "100 keeps every core at least at its base clock (tuned: throughput-performance).",
            inspect_min_perf_pct, writes=(re.escape(f"{CPU_DIR}/intel_pstate/min_perf_pct"),)),
    Setting("cstate-latency", "SY005", "deep CPU idle states (C-states) are enabled",
            "Waking from a deep C-state takes 100 µs or more; a GPU-feeding thread that "
            "sleeps between kernel launches pays it every time (tuned: "
            "accelerator-performance, force_latency=99).",
            inspect_cstate_latency, writes=(_CPU + r"/cpuidle/state[0-9]+/disable",)),
    Setting("gpu-persistence", "SY006", "GPU persistence mode is off",
            "Without persistence the driver tears the GPU down when the last process "
            "exits and re-initialises it (seconds) at the next start: every short job, "
            "test or `nvidia-smi` call pays for it.",
            inspect_gpu_persistence, runs=(r"nvidia-smi -i [0-9]+ -pm [01]",)),
    Setting("gpu-power-limit", "SY007", "GPU power limit is below its default",
            "A lowered power limit caps the SM clock under load: the GPU throttles "
            "(clocks_event_reasons: SW power cap) and every step takes longer.",
            inspect_gpu_power_limit, runs=(r"nvidia-smi -i [0-9]+ -pl [0-9]+(\.[0-9]+)?",)),
    Setting("swappiness", "SY008", "vm.swappiness is high",
            "A high swappiness swaps out idle parts of the training process (optimizer "
            "state, DataLoader workers) to keep page cache; touching them again stalls "
            "the step. 10 keeps anonymous memory resident (tuned: throughput-performance).",
            inspect_swappiness, writes=(r"/proc/sys/vm/swappiness",)),
    Setting("thp", "SY009", "transparent hugepages are disabled",
            "`never` denies 2 MiB pages even to allocators that ask for them (PyTorch "
            "with THP_MEM_ALLOC_ENABLE=1, jemalloc, tcmalloc), so large tensors pay 4 KiB "
            "TLB misses. `madvise` gives them to whoever asks without the memory bloat and "
            "compaction stalls `always` can cause in forked DataLoader workers.",
            inspect_thp, writes=(re.escape(THP),)),
    Setting("readahead", "SY010", "readahead of the dataset's disk is small",
            "Reading shards, tar files or large images sequentially with the kernel's "
            "default 128 KiB readahead issues many small requests; 4 MiB keeps a disk or "
            "network filesystem streaming (tuned: throughput-performance). Random reads of "
            "small files gain little.",
            inspect_readahead,
            writes=(r"/sys/class/bdi/[^/]+/read_ahead_kb", r"/sys/block/[^/]+/queue/read_ahead_kb",
                    r"/sys/devices/(?:[^/]+/)+queue/read_ahead_kb")),
    Setting("shm", "SY011", "/dev/shm is small",
            "DataLoader workers hand every batch to the main process through shared "
            "memory in /dev/shm; when it is full they die with 'bus error' or "
            "'No space left on device' (Docker's default is 64 MiB).",
            inspect_shm, runs=(r"mount -o remount,size=[0-9]+k /dev/shm",)),
)

SETTING_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

PROFILES: dict[str, tuple[str, ...]] = {"training": SETTING_NAMES}


def inspect_all(m: Machine, names: tuple[str, ...] = SETTING_NAMES
                ) -> list[tuple[Setting, Reading]]:
    """Read every named setting (in table order); never raises for a machine's oddities."""
    out = []
    for s in SETTINGS:
        if s.name not in names:
            continue
        try:
            reading = s.inspect(m)
        except Exception as err:  # an odd sysfs must not hide the other settings
            reading = Reading(s.name, "unknown", "", Status.UNKNOWN,
                              f"could not read: {type(err).__name__}: {err}")
        out.append((s, reading))
    return out
