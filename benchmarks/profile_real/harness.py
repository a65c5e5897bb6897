"""Run a training command plain or under ``pitstop profile`` and measure it: wall time, peak
RSS of the training process (the process that runs the script, not pitstop itself), and a
watchdog that kills the run when that process grows past a limit.

Shared by ``bench_profile_memory.py`` and ``bench_profile_real.py``. Peak RSS is the
kernel's high-water mark (``VmHWM`` in ``/proc/PID/status``) read every 50 ms, so a
short spike between two reads is still counted; the watchdog reads ``VmRSS``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
POLL_S = 0.05


@dataclass
class RunStats:
    rc: int
    wall_s: float
    peak_rss: int  # bytes, the training process
    killed: bool = False
    kill_reason: str = ""
    pids: list[int] = field(default_factory=list)
    stderr_tail: str = ""
    stopped: bool = False  # ended by the harness at its stop line (the same work plain or profiled)

    def to_dict(self) -> dict[str, Any]:
        return {"rc": self.rc, "wall_s": round(self.wall_s, 2), "peak_rss_mb": round(self.peak_rss / 2**20, 1),
                "killed": self.killed, "kill_reason": self.kill_reason, "stopped": self.stopped}


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _is_pitstop(proc: psutil.Process) -> bool:
    try:
        cmd = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return "pitstop" in cmd[1:3] or any(c.endswith("/pitstop") for c in cmd[:2])


def _training_pids(root: int, marker: str) -> list[int]:
    """The processes of the tree that run the script (their command line names it),
    pitstop itself and DataLoader workers' spawn helpers aside."""
    try:
        procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in procs:
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if marker in cmd and not _is_pitstop(p):
            out.append(p.pid)
    return out


def run_measured(cmd: list[str], *, marker: str, cwd: Path | None = None,
                 env: dict[str, str] | None = None, timeout_s: float = 900.0,
                 rss_limit: int | None = None, stop_pattern: str | None = None,
                 stop_count: int = 1) -> RunStats:
    """Run ``cmd`` to its end (or the watchdog's kill) and measure the process(es) whose
    command line contains ``marker`` (the script's path). With ``stop_pattern``, the run
    is ended (SIGTERM to its process group) when its stdout has printed that many lines
    matching it: the same amount of work, plain or profiled, for scripts that would
    otherwise train for hours."""
    import re
    import threading

    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(SRC) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    peaks: dict[int, int] = {}
    killed, reason = False, ""
    err_chunks: list[str] = []
    stop = {"seen": 0, "at": None}
    pattern = re.compile(stop_pattern) if stop_pattern else None

    def drain_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_chunks.append(line)
            if len(err_chunks) > 400:
                del err_chunks[:200]

    def drain_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if pattern is not None and stop["at"] is None and pattern.search(line):
                stop["seen"] += 1
                if stop["seen"] >= stop_count:
                    stop["at"] = time.monotonic()
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)

    readers = [threading.Thread(target=drain_err, daemon=True),
               threading.Thread(target=drain_out, daemon=True)]
    for r in readers:
        r.start()
    while proc.poll() is None:
        for pid in _training_pids(proc.pid, marker):
            peaks[pid] = max(peaks.get(pid, 0), _status_kb(pid, "VmHWM") * 1024)
            if rss_limit is not None and _status_kb(pid, "VmRSS") * 1024 > rss_limit and not killed:
                killed, reason = True, f"pid {pid} above {rss_limit / 2**20:.0f} MB"
                os.killpg(proc.pid, signal.SIGKILL)
        if time.monotonic() - t0 > timeout_s and not killed:
            killed, reason = True, f"timeout {timeout_s:.0f} s"
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(POLL_S)
    for r in readers:
        r.join(timeout=5)
    rc = proc.wait()
    end = stop["at"] if stop["at"] is not None else time.monotonic()
    return RunStats(rc if rc >= 0 else 128 - rc, end - t0, max(peaks.values(), default=0), killed,
                    reason, sorted(peaks), "".join(err_chunks)[-3000:], stopped=stop["at"] is not None)


def pitstop_cmd(out_dir: Path, steps: int, warmup: int, command: list[str]) -> list[str]:
    return [sys.executable, "-m", "pitstop", "profile", "--steps", str(steps), "--warmup",
            str(warmup), "--out", str(out_dir), "--", *command]


def rss_bound(plain: int) -> int:
    """The issue's bound: +10 % or +200 MB over the plain run, whichever is larger."""
    return plain + max(int(plain * 0.10), 200 * 2**20)


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"
