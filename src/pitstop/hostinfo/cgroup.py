"""This process's cgroup limits (v1 and v2): CPU quota and memory limit.

Read by the doctor (facts ``cpu.cgroup``, ``memory.cgroup``) and by
``pitstop.train.loader`` (how many CPUs the loader's workers may share).

Containers, Slurm and systemd slices limit a process through its cgroup, which
``/proc/cpuinfo``, ``/proc/meminfo`` and ``os.cpu_count()`` do not show. A limit set on
an ancestor cgroup applies too, so the v2 files are read up the path to the root and the
tightest limit wins.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pitstop.sysroot import Sysroot

# cgroup v1 reports "no limit" as the largest page-aligned signed 64-bit number.
V1_UNLIMITED = 1 << 62


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """``({v1 controller: path}, v2 path)`` from the text of a ``/proc/PID/cgroup``
    (``hierarchy:controllers:path`` lines; v2's has no controllers)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v1, v2


def membership(sr: Sysroot, proc: str = "self") -> tuple[dict[str, str], str | None]:
    """``({v1 controller: path}, v2 path)`` from ``/proc/self/cgroup`` (``proc``: a pid)."""
    return parse_proc_cgroup(sr.read_text(f"/proc/{proc}/cgroup") or "")


def _ancestors(path: str) -> list[str]:
    """``/a/b`` -> ``["/a/b", "/a", "/"]``."""
    out = []
    p = path or "/"
    while True:
        out.append(p)
        if p == "/":
            return out
        p = posixpath.dirname(p.rstrip("/")) or "/"


def _v1_dirs(controller_dirs: tuple[str, ...], path: str) -> list[str]:
    # Without a private cgroup namespace the path may not exist under our mount: then
    # the mount's root is this container's own cgroup.
    return [f"{d}{path.rstrip('/')}" for d in controller_dirs] + list(controller_dirs)


def parse_cpu_max(text: str | None) -> tuple[int, int] | None:
    """A cgroup v2 ``cpu.max`` as ``(quota_us, period_us)``; quota ``-1`` means "max"."""
    if not text:
        return None
    quota_s, _, period_s = text.strip().partition(" ")
    try:
        period = int(period_s or 100000)
        quota = -1 if quota_s == "max" else int(quota_s)
    except ValueError:
        return None
    return quota, period


def parse_cgroup2_cpu_max(text: str | None) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` ("200000 100000" -> 2.0; "max ..." -> None)."""
    parsed = parse_cpu_max(text)
    if parsed is None or parsed[0] <= 0 or parsed[1] <= 0:
        return None
    return parsed[0] / parsed[1]


def _cpu_quota_and_file(sr: Sysroot, proc: str = "self") -> tuple[dict[str, Any], str | None]:
    """:func:`cpu_quota`'s answer, and the file that set the limit (None: no limit)."""
    v1, v2 = membership(sr, proc)
    if "cpu" in v1:
        for base in _v1_dirs(("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"), v1["cpu"]):
            quota = sr.read_int(f"{base}/cpu.cfs_quota_us", 10)
            period = sr.read_int(f"{base}/cpu.cfs_period_us", 10)
            if quota is not None and period:
                limited = quota > 0
                return ({"version": 1, "path": v1["cpu"], "quota_us": quota, "period_us": period,
                         "cpus": round(quota / period, 2) if limited else None},
                        f"{base}/cpu.cfs_quota_us" if limited else None)
    if v2 is not None:
        best: dict[str, Any] | None = None
        for anc in _ancestors(v2):
            parsed = parse_cpu_max(sr.read_text(f"/sys/fs/cgroup{anc.rstrip('/')}/cpu.max"))
            if parsed is None:
                continue
            quota, period = parsed
            cpus = round(quota / period, 2) if quota > 0 and period > 0 else None
            entry = {"version": 2, "path": v2, "limited_at": anc, "quota_us": quota,
                     "period_us": period, "cpus": cpus}
            if best is None or (cpus is not None and (best["cpus"] is None or cpus < best["cpus"])):
                best = entry
        if best is not None:
            if best["cpus"] is None:
                best.pop("limited_at", None)
                return best, None
            return best, f"/sys/fs/cgroup{best['limited_at'].rstrip('/')}/cpu.max"
    return {"version": None, "cpus": None}, None


def cpu_quota(sr: Sysroot) -> dict[str, Any]:
    """The CPU quota in CPUs (``cpus``), or ``None`` when unlimited or unknown."""
    return _cpu_quota_and_file(sr)[0]


def cpu_limit(sr: Sysroot, proc: str = "self") -> tuple[float | None, str]:
    """The exact CPU quota in CPUs (None: unlimited or unknown) and the file that set it,
    for this process or process ``proc`` (a pid)."""
    entry, where = _cpu_quota_and_file(sr, proc)
    if where is None:
        return None, "no cgroup CPU quota"
    return entry["quota_us"] / entry["period_us"], where


def memory_limit(sr: Sysroot) -> dict[str, Any]:
    """The memory limit and current usage of this cgroup, in bytes (``None``: unlimited)."""
    v1, v2 = membership(sr)
    if "memory" in v1:
        for base in _v1_dirs(("/sys/fs/cgroup/memory",), v1["memory"]):
            limit = sr.read_int(f"{base}/memory.limit_in_bytes", 10)
            if limit is not None:
                return {"version": 1, "limit_bytes": None if limit >= V1_UNLIMITED else limit,
                        "usage_bytes": sr.read_int(f"{base}/memory.usage_in_bytes", 10)}
    if v2 is not None:
        limit_b: int | None = None
        usage = sr.read_int(f"/sys/fs/cgroup{v2.rstrip('/')}/memory.current", 10)
        found = False
        for anc in _ancestors(v2):
            text = sr.read_text(f"/sys/fs/cgroup{anc.rstrip('/')}/memory.max")
            if text is None:
                continue
            found = True
            if text != "max":
                try:
                    value = int(text)
                except ValueError:
                    continue
                limit_b = value if limit_b is None else min(limit_b, value)
        if found:
            return {"version": 2, "limit_bytes": limit_b, "usage_bytes": usage}
    return {"version": None, "limit_bytes": None, "usage_bytes": None}


def device_rules(sr: Sysroot) -> dict[str, Any]:
    """The device-access rules of this process's cgroup.

    cgroup v1 lists them in ``devices.list`` (``"c 195:0 rw"``, ``"a *:* rwm"`` for
    "everything"); that is how Docker, Kubernetes and Slurm (``ConstrainDevices``) give a
    job some GPUs and not others. cgroup v2 enforces them with an eBPF program that
    cannot be read back, so there ``rules`` is ``None``.
    """
    v1, v2 = membership(sr)
    if "devices" in v1:
        for base in _v1_dirs(("/sys/fs/cgroup/devices",), v1["devices"]):
            text = sr.read_text(f"{base}/devices.list")
            if text is not None:
                return {"version": 1, "path": v1["devices"], "file": f"{base}/devices.list",
                        "rules": [line.strip() for line in text.splitlines() if line.strip()]}
    return {"version": 2 if v2 is not None else None, "rules": None}
