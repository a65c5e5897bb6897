"""Cheap readers of ``/proc/PID`` files, for samplers that look at many processes each second.

psutil is the right tool for one process; for a scan of every process each few seconds
one ``/proc/PID/stat`` read gives the name, state, parent, CPU time, threads and RSS in
a single open, several times cheaper than psutil's objects. The parsers are pure (text
in, values out) so that they are tested on recorded files; the readers return ``None``
for a process that vanished or a file that cannot be read, never raise.

Formats: proc(5) for ``stat``, ``status`` (``NSpid``), ``io`` and ``cgroup``; the
kernel's Documentation/scheduler/sched-stats.rst for ``schedstat``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLOCK_TICKS",
    "PAGE_SIZE",
    "ProcStat",
    "list_pids",
    "parse_nspid",
    "parse_schedstat",
    "parse_stat",
    "read_children",
    "read_cmdline",
    "read_nspid",
    "read_read_chars",
    "read_schedstat",
    "read_stat",
    "read_text",
    "read_wchan",
    "thread_names",
]

CLOCK_TICKS: int = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE: int = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# proc(5) state letters, named as psutil names them (profile's facts use these names).
STATE_NAMES = {"R": "running", "S": "sleeping", "D": "disk-sleep", "Z": "zombie",
               "T": "stopped", "t": "tracing-stop", "X": "dead", "I": "idle",
               "P": "parked", "W": "waking", "K": "wake-kill"}


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` a monitor needs (CPU times in seconds)."""

    pid: int
    comm: str
    state: str  # a name from STATE_NAMES
    ppid: int
    cpu_s: float  # utime + stime
    threads: int
    start_ticks: int  # since boot: with pid, identifies a process across pid reuse
    rss_bytes: int


def parse_stat(text: str, *, ticks: int = CLOCK_TICKS, page: int = PAGE_SIZE) -> ProcStat | None:
    """Parse one ``/proc/PID/stat`` line; ``None`` if it is not one.

    The command name sits in parentheses and may itself hold spaces and ``)``, so the
    fields are split after the *last* ``)``.
    """
    head, sep, tail = text.rpartition(")")
    if not sep:
        return None
    pid_text, _, comm = head.partition(" (")
    fields = tail.split()
    if len(fields) < 22:
        return None
    try:
        return ProcStat(
            pid=int(pid_text), comm=comm,
            state=STATE_NAMES.get(fields[0], fields[0]),
            ppid=int(fields[1]),
            cpu_s=(int(fields[11]) + int(fields[12])) / ticks,
            threads=int(fields[17]),
            start_ticks=int(fields[19]),
            rss_bytes=int(fields[21]) * page,
        )
    except ValueError:
        return None


def parse_nspid(status_text: str) -> list[int]:
    """The ``NSpid:`` line of ``/proc/PID/status``: the pid in this namespace first,
    then in each nested PID namespace (the last one is what the process itself sees)."""
    for line in status_text.splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return []
    return []


def parse_schedstat(text: str) -> tuple[int, int] | None:
    """``/proc/PID/schedstat``: (nanoseconds on a CPU, nanoseconds runnable but waiting)."""
    parts = text.split()
    if len(parts) < 2:
        return None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def read_stat(pid: int, proc: str = "/proc") -> ProcStat | None:
    text = read_text(f"{proc}/{pid}/stat")
    return parse_stat(text) if text else None


def read_schedstat(pid: int, tid: int | None = None, proc: str = "/proc") -> tuple[int, int] | None:
    """Scheduler times of ``pid``'s thread ``tid`` (its main thread by default)."""
    text = read_text(f"{proc}/{pid}/task/{tid or pid}/schedstat")
    return parse_schedstat(text) if text else None


def read_nspid(pid: int, proc: str = "/proc") -> list[int]:
    text = read_text(f"{proc}/{pid}/status")
    return parse_nspid(text) if text else []


def read_wchan(pid: int, proc: str = "/proc") -> str | None:
    """The kernel function ``pid``'s main thread sleeps in (``wchan``, e.g.
    ``poll_schedule_timeout``: waiting on file descriptors); ``None`` while it runs, or
    where the kernel hides it (``0`` without ptrace rights over the process)."""
    text = (read_text(f"{proc}/{pid}/wchan") or "").strip()
    return None if text in ("", "0") else text


def read_cmdline(pid: int, proc: str = "/proc") -> list[str]:
    try:
        raw = Path(f"{proc}/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def read_children(pid: int, proc: str = "/proc") -> list[int]:
    """Children started by ``pid``'s main thread (``task/PID/children``, one small read)."""
    text = read_text(f"{proc}/{pid}/task/{pid}/children")
    if not text:
        return []
    return [int(k) for k in text.split() if k.isdigit()]


def read_read_chars(pid: int, proc: str = "/proc") -> int | None:
    """Bytes read by ``pid`` so far (``rchar`` of ``/proc/PID/io``: files, pipes and
    sockets, page cache hits included); ``None`` where ``io`` is not readable."""
    text = read_text(f"{proc}/{pid}/io")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("rchar:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def thread_names(pid: int, proc: str = "/proc") -> list[str]:
    """The names of ``pid``'s threads (``task/*/comm``)."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return []
    names = []
    for tid in tids:
        text = read_text(f"{proc}/{pid}/task/{tid}/comm")
        if text:
            names.append(text.strip())
    return names


def list_pids(proc: str = "/proc") -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []
