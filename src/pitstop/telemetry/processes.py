"""Training processes, their DataLoader workers, GPU users and the busiest other processes.

A monitor cannot afford psutil objects for every process each second, nor a walk of
``/proc`` at every sample. :class:`ProcessReader` splits the work:

- every ``rescan_s`` seconds one ``/proc/PID/stat`` read per process finds the
  *training processes*: the parent of any ``pt_data_worker`` (the name torch's
  DataLoader gives its worker processes), any process NVML lists on a GPU, any pid
  the user asked to follow, and any Python process that has ``libtorch`` mapped; it
  also ranks the other processes by CPU over the last rescan interval;
- every sample it reads only the tracked processes (training processes and their
  descendants): CPU, RSS, state, bytes read and, for their main threads, the
  scheduler's on-CPU and run-queue times, which say how much of the time a process
  *waits* (blocked: not running, not runnable) rather than computes.

PIDs are those of the ``/proc`` this process sees; ``nspid`` adds the pid the process
sees itself inside a nested PID namespace (a container), from ``NSpid`` in its status.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from pitstop.hostinfo.cpu import usable_cpus
from pitstop.telemetry.containers import ContainerRef, container_of
from pitstop.telemetry.procfs import (
    ProcStat,
    list_pids,
    read_children,
    read_cmdline,
    read_nspid,
    read_read_chars,
    read_schedstat,
    read_stat,
    read_wchan,
)

__all__ = ["LOADER_WORKER_NAME", "ProcessReader"]

#: ``torch.utils.data._utils.worker`` names the worker's main thread (and so the
#: process's ``comm``) ``pt_data_worker``, for fork and spawn start methods alike.
LOADER_WORKER_NAME = "pt_data_worker"
# Names a Python training process's main thread may have (torch renames it on some paths).
_PYTHON_COMMS = ("python", "pt_main_thread", "torchrun")
_TORCH_RECHECK_S = 10.0
# Seconds between full scans per second one scan took (200: scans use <= 0.5 % of a core).
SCAN_BUDGET = 200.0
_CMDLINE_MAX = 400


def _torch_loaded(pid: int, proc: str) -> bool:
    try:
        with open(f"{proc}/{pid}/maps", "rb") as fh:
            return b"libtorch" in fh.read()
    except OSError:
        return False


def _usable_cpus(pid: int) -> int | None:
    """CPUs ``pid`` may use: affinity and cgroup quota (a pod's limit on a big node)."""
    try:
        return usable_cpus(pid=pid)[0]
    except Exception:  # a process gone half-way, an unreadable cgroup file
        return None


@dataclass
class _Known:
    """What does not change over a process's life, read once (pid + start time is the key)."""

    start_ticks: int
    cmdline: str
    nspid: int | None
    container: ContainerRef | None
    cpus_allowed: int | None


@dataclass
class _Last:
    t: float
    cpu_s: float
    sched: tuple[int, int] | None = None
    read_chars: int | None = None


@dataclass
class ProcessReader:
    """See the module docstring. ``gpu_pids`` is set by whoever reads NVML."""

    follow: list[int] = field(default_factory=list)
    rescan_s: float = 2.0
    top_others: int = 12
    proc: str = "/proc"
    gpu_pids: frozenset[int] = frozenset()
    notes: list[str] = field(default_factory=list)
    _self: int = field(default_factory=os.getpid)
    _known: dict[int, _Known] = field(default_factory=dict)
    _last: dict[int, _Last] = field(default_factory=dict)
    _torch: dict[tuple[int, int], tuple[bool, float]] = field(default_factory=dict)
    _scan_cpu: dict[int, tuple[int, float]] = field(default_factory=dict)
    _scan_t: float = 0.0
    _last_scan: float = -1e9
    _scan_cost: float = 0.0
    _scan_gpu: frozenset[int] = frozenset()
    _trainers: set[int] = field(default_factory=set)
    _tracked: dict[int, str] = field(default_factory=dict)  # pid -> role
    _owner: dict[int, int] = field(default_factory=dict)  # worker/child pid -> its trainer
    _others: list[dict[str, Any]] = field(default_factory=list)

    # ------------------------------------------------------------------ discovery
    def _is_torch(self, st: ProcStat, now: float) -> bool:
        if not st.comm.startswith(_PYTHON_COMMS):
            return False
        key = (st.pid, st.start_ticks)
        found = self._torch.get(key)
        if found is not None and (found[0] or now - found[1] < _TORCH_RECHECK_S):
            return found[0]
        loaded = _torch_loaded(st.pid, self.proc)
        self._torch[key] = (loaded, now)
        return loaded

    def _rescan(self, now: float) -> None:
        stats: dict[int, ProcStat] = {}
        for pid in list_pids(self.proc):
            st = read_stat(pid, self.proc)
            if st is not None:
                stats[pid] = st
        children: dict[int, list[int]] = {}
        for st in stats.values():
            children.setdefault(st.ppid, []).append(st.pid)
        trainers = {st.ppid for st in stats.values() if st.comm == LOADER_WORKER_NAME}
        trainers |= {p for p in self.gpu_pids | set(self.follow) if p in stats}
        trainers |= {pid for pid, st in stats.items()
                     if pid not in trainers and st.comm != LOADER_WORKER_NAME
                     and self._is_torch(st, now)}
        trainers.discard(self._self)
        trainers.discard(0)
        tracked: dict[int, str] = {}
        owner: dict[int, int] = {}
        for root in sorted(trainers):
            tracked[root] = "training"
            stack = list(children.get(root, []))
            while stack:
                pid = stack.pop()
                if pid in trainers or pid in tracked:
                    continue
                tracked[pid] = "worker" if stats[pid].comm == LOADER_WORKER_NAME else "child"
                owner[pid] = root
                stack.extend(children.get(pid, []))
        # A launcher (torchrun, a shell running python) whose children train is not
        # itself the one to judge: it waits for them by design.
        for pid in trainers:
            if any(c in trainers for c in children.get(pid, [])):
                tracked[pid] = "launcher"
        self._trainers, self._tracked, self._owner = trainers, tracked, owner
        self._rank_others(stats, now)
        alive = {(pid, st.start_ticks) for pid, st in stats.items()}
        self._known = {p: k for p, k in self._known.items() if (p, k.start_ticks) in alive}
        self._torch = {k: v for k, v in self._torch.items() if k in alive}
        self._last = {p: v for p, v in self._last.items() if p in stats}

    def _rank_others(self, stats: dict[int, ProcStat], now: float) -> None:
        dt = now - self._scan_t if self._scan_t else 0.0
        before = self._scan_cpu
        ranked: list[tuple[float, ProcStat]] = []
        for pid, st in stats.items():
            if pid in self._tracked or pid == self._self:
                continue
            prev = before.get(pid)
            if dt > 0 and prev is not None and prev[0] == st.start_ticks:
                ranked.append((max(0.0, st.cpu_s - prev[1]) / dt, st))
        self._scan_cpu = {pid: (st.start_ticks, st.cpu_s) for pid, st in stats.items()}
        self._scan_t = now
        ranked.sort(key=lambda x: -x[0])
        self._others = [self._entry(st, "other", cpu_cores=round(cores, 3))
                        for cores, st in ranked[: self.top_others] if cores > 0.0]

    # ------------------------------------------------------------------ one process
    def _identity(self, st: ProcStat) -> _Known:
        k = self._known.get(st.pid)
        if k is None or k.start_ticks != st.start_ticks:
            ns = read_nspid(st.pid, self.proc)
            cmd = " ".join(read_cmdline(st.pid, self.proc)) or f"[{st.comm}]"
            k = _Known(st.start_ticks, cmd[:_CMDLINE_MAX],
                       ns[-1] if len(ns) > 1 and ns[-1] != st.pid else None,
                       container_of(st.pid, self.proc), _usable_cpus(st.pid))
            self._known[st.pid] = k
        return k

    def _entry(self, st: ProcStat, role: str, **extra: Any) -> dict[str, Any]:
        k = self._identity(st)
        entry: dict[str, Any] = {
            "pid": st.pid, "ppid": st.ppid, "nspid": k.nspid, "name": st.comm,
            "cmdline": k.cmdline, "role": role, "trainer": self._owner.get(st.pid),
            "state": st.state, "threads": st.threads, "rss_bytes": st.rss_bytes,
            "cpu_cores": None, "read_bps": None, "main_thread": None,
            "container": k.container.to_dict() if k.container else None,
            "cpus_allowed": k.cpus_allowed,
            "gpus": [],
        }
        entry.update(extra)
        return entry

    def _read_tracked(self, pid: int, role: str, now: float) -> dict[str, Any] | None:
        st = read_stat(pid, self.proc)
        if st is None or st.state == "zombie":
            return None
        entry = self._entry(st, role)
        if pid in self.follow:
            entry["followed"] = True  # asked for with --pid: judged and shown first
        sched = read_schedstat(pid, proc=self.proc)
        chars = read_read_chars(pid, self.proc)
        last = self._last.get(pid)
        if last is not None and now > last.t:
            dt = now - last.t
            entry["cpu_cores"] = round(max(0.0, st.cpu_s - last.cpu_s) / dt, 3)
            if sched is not None and last.sched is not None:
                on = max(0, sched[0] - last.sched[0]) / 1e9 / dt
                queued = max(0, sched[1] - last.sched[1]) / 1e9 / dt
                entry["main_thread"] = {"on_cpu_share": round(min(1.0, on), 3),
                                        "runqueue_share": round(min(1.0, queued), 3)}
                if role == "training":  # what it sleeps in: a DataLoader waits in poll()
                    entry["main_thread"]["wchan"] = read_wchan(pid, self.proc)
            if chars is not None and last.read_chars is not None:
                entry["read_bps"] = round(max(0, chars - last.read_chars) / dt)
        self._last[pid] = _Last(now, st.cpu_s, sched, chars)
        return entry

    def _new_child(self) -> bool:
        for pid in self._trainers:
            if any(c not in self._tracked for c in read_children(pid, self.proc)):
                return True
        return False

    # ------------------------------------------------------------------ the sample
    def read(self) -> dict[str, Any]:
        now = time.monotonic()
        # A full scan costs one read per process: on a node with thousands of them it
        # is spaced out so that scanning stays under ~0.5 % of a core.
        every = max(self.rescan_s, SCAN_BUDGET * self._scan_cost)
        if (now - self._last_scan >= every or self._new_child()
                or self.gpu_pids != self._scan_gpu):
            self._scan_gpu = self.gpu_pids
            self._rescan(now)
            self._last_scan = now
            self._scan_cost = time.monotonic() - now
        procs = []
        for pid, role in sorted(self._tracked.items()):
            entry = self._read_tracked(pid, role, now)
            if entry is not None:
                procs.append(entry)
        return {"processes": procs, "other_processes": list(self._others)}
