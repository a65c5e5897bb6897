"""The verdict line: why the GPU (or the training loop) waits, from what a monitor sees.

The verdict itself is ``pitstop profile``'s: :func:`pitstop.profile.verdict.decide`,
called on a facts dict. Profile measures the facts from inside the training process
(the time each step spends in the DataLoader, in forward, …); a monitor sees the
process from outside, so this module *estimates* the same facts over a sliding window
of snapshots (pure functions, no I/O) and lets ``decide`` name the bottleneck:

- **data wait share**: the share of time the training process's main thread is
  *blocked* (neither on a CPU nor runnable, from ``/proc/PID/task/PID/schedstat``),
  but no more than its loader workers are busy (on a CPU, runnable, or in disk
  sleep) or its main thread sleeps in poll/select (``wchan``: a DataLoader's main
  thread polls its result queue while it waits): a main thread that blocks while its
  workers are busy is waiting for their batches; one that polls while they sleep too
  waits for batches whose workers wait on the network or a remote filesystem; one
  that blocks elsewhere while they idle is waiting for something else. On a GPU,
  it is also capped by the GPU's idle share (SM activity from GPM where the GPU has
  it, else ``utilization.gpu``). Without workers it is the share of samples in which
  the main thread sleeps on the disk (loading in the main process is otherwise
  invisible from outside: ``pitstop profile`` measures it).
- **compute share**: the share of time the main thread runs or is runnable.
- **GPU busy share** (``probe.gpu_busy_share``) on a GPU, which makes ``decide`` call
  a GPU fed too slowly by a busy main thread host-bound.
- iowait, the busiest disk's busy percent, and the loader workers' CPU, states and
  read rates, as profile's facts carry them.

The line then says what was seen, in the user's terms, with the first fix ``decide``
gives, e.g. ``GPU 0 idle 55 % while the 8 loader workers of PID 1234 use 7.6 of 8
cores → input-bound: …``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pitstop.profile.verdict import Verdict, decide

__all__ = ["diagnose", "monitor_facts"]

Snapshot = dict[str, Any]
# A GPU at or above this busy percent is reported busy even with no training process.
GPU_BUSY_PCT = 50.0
# A torch process without workers or GPU using less CPU than this is idle, not judged.
IDLE_CORES = 0.1
# Loader workers busy (on a CPU, runnable or in disk sleep) less than this share idle.
LOADER_IDLE_SHARE = 0.3
#: Kernel functions a thread sleeps in while it waits on file descriptors (poll, select,
#: epoll). A DataLoader's main thread waits for its workers' batches there (a poll on
#: the result queue's pipe, 5 s at a time); a CUDA sync, a lock or a collective wait
#: elsewhere (futexes, ioctls).
FD_WAIT_WCHANS = ("poll_schedule_timeout", "do_sys_poll", "do_select", "core_sys_select",
                  "ep_poll", "do_epoll_wait")


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def gpu_busy_pct(gpu: dict[str, Any]) -> float | None:
    """How busy a GPU is: GPM SM activity where the GPU has it, else utilization.gpu."""
    gpm = gpu.get("gpm") or {}
    if gpm.get("sm_active_pct") is not None:
        return float(gpm["sm_active_pct"])
    util = gpu.get("utilization_gpu_pct")
    return None if util is None else float(util)


def _blocked(entry: dict[str, Any]) -> float | None:
    mt = entry.get("main_thread")
    if not mt:
        return None
    return max(0.0, 1.0 - mt["on_cpu_share"] - mt["runqueue_share"])


def _waits_on_fds(entry: dict[str, Any]) -> float | None:
    """1 when the main thread sleeps in poll/select/epoll, 0 when it sleeps elsewhere or
    runs, ``None`` when the kernel does not say (no ``wchan`` rights)."""
    mt = entry.get("main_thread")
    if not mt or "wchan" not in mt:
        return None
    wchan = mt.get("wchan")
    if wchan is None:
        return 0.0 if entry.get("state") == "running" else None
    return 1.0 if wchan.startswith(FD_WAIT_WCHANS) else 0.0


def _activity(entry: dict[str, Any]) -> float | None:
    """How much of the time a (single-threaded) worker wants a CPU or waits on a disk."""
    mt = entry.get("main_thread")
    busy = (mt["on_cpu_share"] + mt["runqueue_share"]) if mt else entry.get("cpu_cores")
    if busy is None:
        return None
    return min(1.0, busy + (1.0 if entry.get("state") == "disk-sleep" else 0.0))


Index = list[tuple[Snapshot, dict[int, dict[str, Any]], dict[int, list[dict[str, Any]]]]]


def _index(window: Sequence[Snapshot]) -> Index:
    """Per snapshot: its processes by pid, and the loader workers of each training process
    (built once per window, shared by every training process's facts)."""
    out: Index = []
    for snap in window:
        procs = snap.get("processes") or []
        workers: dict[int, list[dict[str, Any]]] = {}
        for p in procs:
            if p.get("role") == "worker" and p.get("trainer") is not None:
                workers.setdefault(p["trainer"], []).append(p)
        out.append((snap, {p["pid"]: p for p in procs}, workers))
    return out


def monitor_facts(window: Sequence[Snapshot], pid: int, index: Index | None = None
                  ) -> dict[str, Any] | None:
    """``decide``'s facts for training process ``pid`` over ``window`` (oldest first);
    ``None`` until the window has a rate for the process's main thread."""
    mains, workers_per_snap = [], []
    for snap, table, workers in index if index is not None else _index(window):
        if pid in table:
            mains.append((snap, table[pid]))
            workers_per_snap.append(workers.get(pid, []))
    blocked = _mean([_blocked(m) for _, m in mains])
    if blocked is None:
        return None
    latest_snap, latest = mains[-1]
    worker_pids = {w["pid"] for ws in workers_per_snap for w in ws}
    n_workers = len([w for w in workers_per_snap[-1]]) if workers_per_snap else 0
    worker_entries = [w for ws in workers_per_snap for w in ws]
    activity = _mean([_activity(w) for w in worker_entries])
    states = [w.get("state") for w in worker_entries]
    gpu_idx = sorted({g["index"] for _, m in mains for g in m.get("gpus") or []})
    gpu_busy = _mean([_mean([gpu_busy_pct(g) for g in snap.get("gpus") or [] if g["index"] in gpu_idx])
                      for snap, _ in mains]) if gpu_idx else None
    cuda = bool(gpu_idx)
    main_disk = _mean([1.0 if m.get("state") == "disk-sleep" else 0.0 for _, m in mains]) or 0.0
    # Samples with the main thread asleep in poll/select: with loader workers, waiting for
    # their batches even when the workers do not run either (they wait on a network read,
    # an object store, a remote filesystem's socket).
    fd_wait = _mean([_waits_on_fds(m) for _, m in mains])
    if worker_pids:
        data = min(blocked, max(activity if activity is not None else 0.0, fd_wait or 0.0))
    else:
        data = min(blocked, main_disk)
    if cuda and gpu_busy is not None:
        data = min(data, max(0.0, 1.0 - gpu_busy / 100.0))
    compute = max(0.0, 1.0 - blocked)
    other = max(0.0, 1.0 - data - compute)
    snaps = [s for s, _ in mains]
    disk_busy: list[float] = []
    busiest: Counter[str] = Counter()
    for s in snaps:
        disks = [d for d in s.get("disks") or [] if d.get("busy_pct") is not None]
        if disks:
            top = max(disks, key=lambda d: d["busy_pct"])
            disk_busy.append(top["busy_pct"])
            busiest[top["name"]] += 1
    cpu_count = latest.get("cpus_allowed") or (latest_snap.get("cpu") or {}).get("count")
    return {
        "source": "monitor",
        "ranks": 1,
        "device": "cuda" if cuda else "cpu",
        "steps_measured": 0,
        "step_ms_median": 0.0,
        "step_ms_p90": 0.0,
        "phase_share": {"data": round(data, 4), "forward": round(compute, 4), "backward": 0.0,
                        "optimizer": 0.0, "h2d": 0.0, "collective": 0.0, "other": round(other, 4)},
        "window_s": round(snaps[-1]["t"] - snaps[0]["t"], 1) if len(snaps) > 1 else 0.0,
        "samples_in_window": len(snaps),
        "loader": "workers" if worker_pids else "main process",
        "workers": n_workers,
        "loader_cpu_cores_mean": _r(_mean([w.get("cpu_cores") for w in worker_entries])),
        "loader_running_share": _r(states.count("running") / len(states)) if states else None,
        "loader_disk_wait_share": _r(states.count("disk-sleep") / len(states)) if states else None,
        "loader_read_bps_mean": _r(_mean([sum(w.get("read_bps") or 0 for w in ws)
                                          for ws in workers_per_snap if ws]), 0),
        "loader_activity_share": _r(activity),
        "main_fd_wait_share": _r(fd_wait),
        "main_blocked_share": _r(blocked),
        "main_cpu_cores_mean": _r(_mean([m.get("cpu_cores") for _, m in mains])),
        "main_runqueue_share": _r(_mean([(m.get("main_thread") or {}).get("runqueue_share")
                                         for _, m in mains])),
        "iowait_pct_mean": _r(_mean([(s.get("cpu") or {}).get("iowait_pct") for s in snaps]), 1),
        "disk_busy_pct_mean": _r(_mean(disk_busy), 1),
        "disk_busiest": busiest.most_common(1)[0][0] if busiest else None,
        "cpu_pct_mean": _r(_mean([(s.get("cpu") or {}).get("busy_pct") for s in snaps]), 1),
        "cpu_count": cpu_count,
        "gpus": gpu_idx,
        "gpu_util_pct_mean": _r(gpu_busy, 1),
        "probe": {"gpu_busy_share": _r(gpu_busy / 100.0), "host_overhead_share": None}
        if cuda and gpu_busy is not None else None,
        "stragglers": [],
        "per_rank": [],
    }


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f} %"


def _gpus_text(f: dict[str, Any]) -> str:
    names = ", ".join(str(i) for i in f["gpus"])
    return f"GPU {names}" if len(f["gpus"]) == 1 else f"GPUs {names}"


def _first_fix(v: Verdict) -> str:
    return v.fixes[0].text if v.fixes else ""


def _line(pid: int, f: dict[str, Any], v: Verdict) -> str:
    cuda = f["device"] == "cuda"
    idle = None if f["gpu_util_pct_mean"] is None else 100.0 - f["gpu_util_pct_mean"]
    gpu = _gpus_text(f) if cuda else ""
    workers = f["workers"]
    cores = (f["loader_cpu_cores_mean"] or 0.0) * workers
    of = f" of {f['cpu_count']}" if f.get("cpu_count") else ""
    if v.name == "io-bound":
        disk = f" on {f['disk_busiest']}" if f.get("disk_busiest") else ""
        seen = (f"iowait {f['iowait_pct_mean']:.0f} %{disk}" if (f.get("iowait_pct_mean") or 0) >= 1
                else f"PID {pid}'s loader waits on reads{disk}")
        return f"{seen} → io-bound: {_first_fix(v)}"
    if v.name == "input-bound":
        if cuda and idle is not None:
            who = (f"the {workers} loader workers of PID {pid} use {cores:.1f}{of} cores"
                   if workers else f"PID {pid} loads batches in its main process")
            seen = f"{gpu} idle {idle:.0f} % while {who}"
        elif workers and (f["loader_activity_share"] or 0.0) < LOADER_IDLE_SHARE:
            seen = (f"PID {pid} waits for data {_pct(f['phase_share']['data'])} of the time "
                    f"while its {workers} loader workers wait too ({cores:.1f}{of} cores busy: "
                    "reads from the network or a remote filesystem?)")
        elif workers:
            seen = (f"PID {pid} waits for data {_pct(f['phase_share']['data'])} of the time "
                    f"while its {workers} loader workers use {cores:.1f}{of} cores")
        else:
            seen = f"PID {pid} waits on reads while loading batches in its main process"
        return f"{seen} → input-bound: {_first_fix(v)}"
    if v.name == "host-bound":
        busy = f["main_cpu_cores_mean"] or 0.0
        wk = "workers idle, " if workers and (f["loader_activity_share"] or 0) < 0.5 else ""
        return (f"{gpu} idle {idle:.0f} %, {wk}main process (PID {pid}) at {100 * busy:.0f} % of "
                "one core → host-bound or per-step sync: run `pitstop profile -- COMMAND` to "
                "find the syncs and tiny operators")
    if v.name == "compute-bound":
        if cuda and idle is not None:
            return f"{gpu} busy {100 - idle:.0f} % (PID {pid}) → compute-bound: {_first_fix(v)}"
        return (f"PID {pid} computes {_pct(f['phase_share']['forward'])} of the time, waits for "
                f"data {_pct(f['phase_share']['data'])} → compute-bound: {_first_fix(v)}")
    if v.name == "unknown":
        idle = ", its loader workers idle too," if workers else ""
        return (f"PID {pid} waits {_pct(f['main_blocked_share'])} of the time{idle} and computes "
                f"{_pct(f['phase_share']['forward'])} → no single bottleneck seen from outside: "
                "run `pitstop profile -- COMMAND`")
    return f"PID {pid} → {v.name}: {v.headline}"


def _idle_torch(p: dict[str, Any], f: dict[str, Any]) -> bool:
    """A process with torch loaded that is not training now (a test runner, a notebook
    kernel between cells): no loader workers, no GPU, and almost no CPU; never one the
    user asked for with --pid."""
    return (not p.get("followed") and not f["workers"] and f["device"] == "cpu"
            and (f["main_cpu_cores_mean"] or 0.0) < IDLE_CORES)


def _idle_gpu_lines(snap: Snapshot) -> list[dict[str, Any]]:
    out = []
    for g in snap.get("gpus") or []:
        busy = gpu_busy_pct(g)
        if busy is None:
            continue
        state = f"busy {busy:.0f} %" if busy >= GPU_BUSY_PCT else f"idle {100 - busy:.0f} %"
        out.append({"pid": None, "gpus": [g["index"]], "verdict": None,
                    "line": f"GPU {g['index']} {state}, no training process seen using it"})
    return out


def diagnose(window: Sequence[Snapshot]) -> list[dict[str, Any]]:
    """One verdict per training process in the newest snapshot of ``window`` (busiest
    first), else one line per GPU, else a line saying no training process is seen."""
    if not window:
        return []
    latest = window[-1]
    trainers = [p for p in latest.get("processes") or [] if p.get("role") == "training"]
    # The processes asked for with --pid first, then the biggest GPU users, the busiest.
    trainers.sort(key=lambda p: (not p.get("followed"),
                                 -sum((g.get("memory_bytes") or 0) for g in p.get("gpus") or []),
                                 -(p.get("cpu_cores") or 0.0), p["pid"]))
    out: list[dict[str, Any]] = []
    index = _index(window)
    for p in trainers:
        facts = monitor_facts(window, p["pid"], index)
        if facts is None:
            out.append({"pid": p["pid"], "gpus": [], "verdict": None,
                        "line": f"PID {p['pid']}: measuring (needs two samples)"})
            continue
        if _idle_torch(p, facts):
            continue
        v = decide(facts)
        out.append({"pid": p["pid"], "gpus": facts["gpus"], "verdict": v.name,
                    "line": _line(p["pid"], facts, v), "fix": _first_fix(v),
                    "window_s": facts["window_s"], "samples": facts["samples_in_window"],
                    "facts": {k: facts[k] for k in (
                        "phase_share", "main_blocked_share", "main_cpu_cores_mean",
                        "loader_activity_share", "main_fd_wait_share", "workers",
                        "loader_cpu_cores_mean",
                        "gpu_util_pct_mean", "iowait_pct_mean", "disk_busy_pct_mean")}})
    used = {i for v in out for i in v["gpus"]}
    out += [line for line in _idle_gpu_lines(latest) if line["gpus"][0] not in used]
    if not out:
        cpu = latest.get("cpu") or {}
        busy, iowait = cpu.get("busy_pct"), cpu.get("iowait_pct")
        host = (f" (host CPU {busy:.0f} %, iowait {iowait:.0f} %)"
                if busy is not None and iowait is not None else "")
        out.append({"pid": None, "gpus": [], "verdict": None,
                    "line": f"no training process seen{host}"})
    return out
