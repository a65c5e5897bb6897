"""Is the machine's CPU taken by processes outside the training job?

A telemetry reader for pitstop's sampler (the same ``read() -> dict`` shape as the
readers in :mod:`pitstop.telemetry.host`), with two measurements:

- ``job_run_ns`` / ``job_wait_ns``: the job's threads' time on a CPU and time spent
  *runnable but waiting for one* (``/proc/PID/task/TID/schedstat``, cumulative over
  the job's processes and threads). A starved job waits; a job that is merely idle
  sleeps, which this does not count. Without schedstat (a kernel without
  ``CONFIG_SCHED_INFO``) these are None;
- ``foreign_cpu_cores`` and ``foreign_top``, every :data:`SCAN_S`: CPU (in cores) of
  every process on the machine that is not the job and not pitstop, and the busiest
  five as ``[label, cores]`` (label: process name and first argument).

:func:`contention_facts` reduces the samples of a window to the facts the verdict
reads (``foreign_cpu_cores_mean``, ``foreign_procs``, ``job_runqueue_wait_share``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["SCAN_S", "ContentionReader", "contention_facts"]

SCAN_S = 0.5
TOP = 8


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                run, wait, *_ = fh.read().split()
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return out


class ContentionReader:
    """Job run/wait time and the CPU of every process outside the job (see module doc)."""

    def __init__(self, roots: Sequence[int], *, scan_s: float = SCAN_S) -> None:
        self.roots = list(roots)
        self.scan_s = scan_s
        self.me = os.getpid()
        self._job: set[int] = set(self.roots)
        self._threads: dict[int, tuple[int, int]] = {}
        self._run = self._wait = 0
        self._sched_ok = os.path.exists(f"/proc/{self.me}/task/{self.me}/schedstat")
        self._last_scan = -1e9
        self._cpu: dict[int, float] = {}
        self._names: dict[int, str] = {}

    def _job_pids(self) -> set[int]:
        import psutil

        pids: set[int] = set()
        for r in self.roots:
            try:
                root = psutil.Process(r)
                pids.add(r)
                pids.update(c.pid for c in root.children(recursive=True))
            except Exception:
                continue
        return pids

    def _label(self, proc: Any) -> str:
        try:
            cmd = proc.cmdline()
        except Exception:
            cmd = []
        name = proc.info.get("name") or "?"
        arg = next((os.path.basename(a) for a in cmd[1:] if not a.startswith("-")), "")
        return f"{name} {arg}".strip()[:60]

    def _scan(self, now: float) -> dict[str, Any]:
        import psutil

        dt = now - self._last_scan
        first = self._last_scan < 0
        self._last_scan = now
        self._job = self._job_pids() or self._job
        cpu_now: dict[int, float] = {}
        per: list[tuple[float, int, Any]] = []
        for proc in psutil.process_iter(["name", "cpu_times"]):
            pid = proc.pid
            times = proc.info.get("cpu_times")
            if times is None:
                continue
            total = float(times.user + times.system)
            cpu_now[pid] = total
            if pid in self._job or pid == self.me:
                continue
            before = self._cpu.get(pid)
            if before is not None and not first and dt > 0:
                cores = max(0.0, total - before) / dt
                if cores > 0.005:
                    per.append((cores, pid, proc))
        self._cpu = cpu_now
        if first:
            return {"foreign_cpu_cores": None, "foreign_top": None}
        per.sort(key=lambda r: -r[0])
        top = [[self._label(p), round(c, 3)] for c, _pid, p in per[:TOP]]
        return {"foreign_cpu_cores": round(sum(c for c, _, _ in per), 3), "foreign_top": top}

    def read(self) -> dict[str, Any]:
        now = time.monotonic()
        out: dict[str, Any] = {}
        if now - self._last_scan >= self.scan_s:
            try:
                out.update(self._scan(now))
            except Exception:
                out.update({"foreign_cpu_cores": None, "foreign_top": None})
        if self._sched_ok:
            seen: dict[int, tuple[int, int]] = {}
            for pid in self._job:
                seen.update(_schedstat(pid))
            for tid, (run, wait) in seen.items():
                before = self._threads.get(tid)
                if before is not None:
                    self._run += max(0, run - before[0])
                    self._wait += max(0, wait - before[1])
            self._threads = seen
            out["job_run_ns"], out["job_wait_ns"] = self._run, self._wait
        return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def contention_facts(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The contention facts of a window's samples (keys absent when not measured)."""
    out: dict[str, Any] = {}
    scans = [s for s in samples if s.get("foreign_cpu_cores") is not None]
    if scans:
        out["foreign_cpu_cores_mean"] = round(_mean([s["foreign_cpu_cores"] for s in scans]) or 0.0, 3)
        by_label: dict[str, float] = {}
        for s in scans:
            for label, cores in s.get("foreign_top") or []:
                by_label[label] = by_label.get(label, 0.0) + float(cores)
        top = sorted(by_label.items(), key=lambda kv: -kv[1])[:TOP]
        out["foreign_procs"] = [{"name": k, "cores": round(v / len(scans), 3)} for k, v in top]
        out["foreign_scans"] = len(scans)
    sched = [s for s in samples if s.get("job_run_ns") is not None]
    if len(sched) >= 2:
        run = sched[-1]["job_run_ns"] - sched[0]["job_run_ns"]
        wait = sched[-1]["job_wait_ns"] - sched[0]["job_wait_ns"]
        span = (sched[-1]["t"] - sched[0]["t"]) * 1e9
        if run + wait > 0 and span > 0:
            out["job_runqueue_wait_share"] = round(wait / (run + wait), 3)
            out["job_cpu_cores_mean"] = round(run / span, 3)
    return out
