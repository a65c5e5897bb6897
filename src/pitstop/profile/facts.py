"""Per-rank summaries, operator probe and telemetry samples reduced to the facts a
verdict is decided on (pure functions; every value carries its unit in its name)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pitstop.profile.analysis import (
    PHASES,
    RankSummary,
    find_stragglers,
    phases_between,
    window_samples,
)
from pitstop.profile.attribution import attribute_other
from pitstop.profile.contention import contention_facts

__all__ = ["build_facts"]


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _in_intervals(t_s: float, ivs: Sequence[Sequence[int]]) -> bool:
    t = t_s * 1e9
    return any(a <= t <= b for a, b in ivs)


def _loader_facts(cap: dict[str, Any], rank: RankSummary, samples: list[dict[str, Any]]
                  ) -> dict[str, Any]:
    """How the processes that produce batches behave while the loop waits for them."""
    pid = str(cap.get("pid"))
    workers = [str(p) for p in cap.get("worker_pids") or []]
    if not workers:  # spawned workers are not in the capture: find them as children
        workers = sorted({k for s in samples for k, v in (s.get("procs") or {}).items()
                          if str(v.get("ppid")) == pid})
    data_ivs = [iv for s in rank.measured for iv in _step_data(cap, s.start_ns, s.end_ns)]
    if workers:
        procs, chosen, where = workers, samples, "workers"
    else:
        procs, where = [pid], "main process"
        chosen = [s for s in samples if _in_intervals(s["t"], data_ivs)] or samples
    cpu: list[float | None] = []
    states: list[str] = []
    reads: list[float] = []
    for s in chosen:
        table = s.get("procs") or {}
        here = [table[p] for p in procs if p in table]
        if not here:
            continue
        cpu.append(_mean([h.get("cpu") for h in here]))
        states.extend(str(h.get("state")) for h in here)
        reads.append(sum((h.get("read_bps") or 0) for h in here))
    n_states = len(states) or 1
    return {
        "loader": where,
        "workers": len(workers),
        "loader_cpu_cores_mean": _round(_mean(cpu), 3),
        "loader_running_share": round(states.count("running") / n_states, 3) if states else None,
        "loader_disk_wait_share": round(states.count("disk-sleep") / n_states, 3) if states else None,
        "loader_read_bps_mean": _round(_mean(reads), 0),
        "loader_samples": len(chosen),
    }


def _step_data(cap: dict[str, Any], lo: int, hi: int) -> list[tuple[int, int]]:
    out = []
    for a, b in (cap.get("intervals") or {}).get("data", []):
        if b > lo and a < hi:
            out.append((max(a, lo), min(b, hi)))
    return out


def _round(v: float | None, nd: int) -> float | None:
    return None if v is None else round(v, nd)


_COMPUTE = ("forward", "backward", "optimizer")
_CONTENTION_MARGIN_NS = 1_000_000_000


def _probe_facts(cap: dict[str, Any], rank: RankSummary) -> dict[str, Any] | None:
    """The probe's figures over the compute phases of the probed step: operator time
    against the time the step spent in forward/backward/optimizer (the probe's own cost
    subtracted), so the loop's input pipeline or logging never counts as host overhead."""
    probe = cap.get("probe")
    if not probe or "phases" not in probe:
        return None
    lo, hi = probe.get("start_ns"), probe.get("end_ns")
    if lo is None or hi is None or hi <= lo:
        return None
    phases_ms = phases_between(cap, lo, hi)
    comp = [probe["phases"].get(k) or {} for k in _COMPUTE]
    ops = sum(int(c.get("ops", 0)) for c in comp)
    ops_us = sum(float(c.get("ops_us", 0.0)) for c in comp)
    tiny = sum(float(c.get("tiny_ops_us", 0.0)) for c in comp)
    matmul = sum(float(c.get("matmul_us", 0.0)) for c in comp)
    conv = sum(float(c.get("conv_us", 0.0)) for c in comp)
    own = sum(float(c.get("overhead_us", 0.0)) for c in comp)
    compute_us = sum(phases_ms[k] for k in _COMPUTE) * 1000.0 - own
    all_ops = int(probe.get("ops", 0))
    out: dict[str, Any] = {
        "probe_step": cap.get("probe_step"),
        "ops_per_step": all_ops,
        "compute_ops_per_step": ops,
        "budget_hit": probe.get("budget_hit"),
        "top_ops": probe.get("top", []),
        "probe_overhead_us": round(own, 1),
    }
    if compute_us <= 0 or ops == 0:
        out.update({"host_overhead_share": None, "matmul_share_of_op_time": None,
                    "conv_share_of_op_time": None, "probe_step_compute_ms": None,
                    "op_us_mean": None, "tiny_op_share": None})
        return out
    big = ops_us - tiny
    overhead = max(0.0, min(1.0, (compute_us - big) / compute_us))
    basis = "wall (probed step)"
    cpu_ops = sum(float(c.get("cpu_ops_us", 0.0)) for c in comp)
    if cpu_ops > 0:
        # Main-thread CPU time, which another process taking the core mid-step does not
        # inflate. The real-work operators' CPU time is the probe's (an operator runs at
        # full speed under the counting mode); the compute CPU time it is a share of is
        # that of the measured steps, which ran without the mode (whose per-operator cost
        # depends on each operator's arguments and cannot be subtracted exactly); the
        # probed step's own gaps between operators are the fallback.
        cpu_tiny = sum(float(c.get("cpu_tiny_ops_us", 0.0)) for c in comp)
        cpu_gaps = sum(float(c.get("cpu_gaps_us", 0.0)) for c in comp)
        cpu_big = cpu_ops - cpu_tiny
        per_step = cap.get("compute_cpu_ns") or []
        measured = [per_step[s.index] / 1e3 for s in rank.measured if s.index < len(per_step)]
        measured = [v for v in measured if v > 0]
        if measured:
            cpu_total = statistics.median(measured)
            basis = "main-thread CPU (measured steps)"
        else:
            cpu_total = cpu_ops + cpu_gaps
            basis = "main-thread CPU (probed step)"
        overhead = max(0.0, min(1.0, (cpu_total - cpu_big) / cpu_total)) if cpu_total > 0 else overhead
        matmul = sum(float(c.get("cpu_matmul_us", 0.0)) for c in comp)
        conv = sum(float(c.get("cpu_conv_us", 0.0)) for c in comp)
        big, ops_us, tiny = cpu_big, cpu_ops, cpu_tiny
    out.update({
        "probe_step_compute_ms": round(compute_us / 1000.0, 3),
        "op_us_mean": round(ops_us / ops, 2),
        "tiny_op_share": round(tiny / ops_us, 3) if ops_us else None,
        "host_overhead_share": round(overhead, 3),
        "matmul_share_of_op_time": round(matmul / big, 3) if big > 0 else None,
        "conv_share_of_op_time": round(conv / ops_us, 3) if ops_us else None,
        "time_basis": basis,
    })
    if probe.get("kernels"):
        out["kernels_per_step"] = int(probe["kernels"])
        out["gpu_busy_share"] = round(min(1.0, float(probe["kernel_us"]) / compute_us), 3)
        kus = float(probe["kernel_us"]) or 1.0
        out["matmul_share_of_kernel_time"] = round(float(probe["kernel_matmul_us"]) / kus, 3)
    return out


def _other_facts(cap: dict[str, Any], rank: RankSummary, share: dict[str, float]
                 ) -> dict[str, Any]:
    """The ``other`` time split by what the stack samples saw the loop do."""
    att = attribute_other(cap, [(s.start_ns, s.end_ns) for s in rank.measured])
    if att is None:
        return {}
    out: dict[str, Any] = {"stack_samples": att["samples"], "other_samples": att["other_samples"]}
    if att.get("split"):
        other = share.get("other", 0.0)
        out["other_split"] = {k: round(v * other, 4) for k, v in att["split"].items()}
        out["other_sites"] = [{**site, "share_of_step": round(site["share_of_other"] * other, 4)}
                              for site in att["sites"]]
    return out


def build_facts(caps: Sequence[dict[str, Any]], ranks: Sequence[RankSummary],
                samples: list[dict[str, Any]], *, cpu_count: int | None = None
                ) -> dict[str, Any]:
    """Everything the verdict needs, from rank 0 (or the only process) and all ranks."""
    facts: dict[str, Any] = {"ranks": len(ranks)}
    if not ranks:
        return facts
    by_pid = {int(c.get("pid", 0)): c for c in caps}
    main = ranks[0]
    cap = by_pid[main.pid]
    measured = [s for r in ranks for s in r.measured]
    start = min(s.start_ns for s in measured)
    end = max(s.end_ns for s in measured)
    win = window_samples(samples, start, end)
    total_ms = sum(s.ms for s in measured) or 1.0
    share = {p: sum(s.phases_ms[p] for s in measured) / total_ms for p in PHASES}
    facts.update({
        "device": "cuda" if cap.get("cuda") else "cpu",
        "steps_measured": len(main.measured),
        "step_ms_median": round(main.step_ms_median, 3),
        "step_ms_p90": round(main.step_ms_p90, 3),
        "phase_share": {k: round(v, 4) for k, v in share.items()},
        "window_s": round((end - start) / 1e9, 3),
        "samples_in_window": len(win),
    })
    facts.update(_loader_facts(cap, main, win))
    facts["iowait_pct_mean"] = _round(_mean([s.get("iowait_pct") for s in win]), 1)
    facts["disk_busy_pct_mean"] = _round(_mean([s.get("disk_busy_pct") for s in win]), 1)
    facts["disk_read_bps_mean"] = _round(_mean([s.get("disk_read_bps") for s in win]), 0)
    facts["cpu_pct_mean"] = _round(_mean([s.get("cpu_pct") for s in win]), 1)
    facts["cpu_count"] = cpu_count
    gpu_util = [g.get("utilization_gpu_pct") for s in win for g in s.get("gpus") or []]
    mem_util = [g.get("utilization_memory_pct") for s in win for g in s.get("gpus") or []]
    facts["gpu_util_pct_mean"] = _round(_mean(gpu_util), 1)
    facts["gpu_mem_util_pct_mean"] = _round(_mean(mem_util), 1)
    probe_cap = next((c for c in [cap, *caps] if (c.get("probe") or {}).get("ops") is not None), None)
    probe_rank = next((r for r in ranks if probe_cap is not None and r.pid == probe_cap.get("pid")), None)
    facts["probe"] = _probe_facts(probe_cap, probe_rank) if probe_cap and probe_rank else None
    if facts["probe"] is None:
        err = (cap.get("probe") or {}).get("error")
        warmup = int(cap.get("warmup", 0))
        facts["probe_missing"] = err or (
            "it needs --warmup 2 or more" if warmup < 2 else
            f"the window ended before warm-up step {warmup - 1}, the probed one" if
            len(main.steps) < warmup else "the probe did not run (see notes)")
    facts["step_boundary"] = cap.get("boundary")
    bps = [int(b) for b in cap.get("backwards_per_step") or [] if b]
    if bps:
        facts["backwards_per_step"] = statistics.median(bps)
    facts["torch_threads"] = cap.get("torch_threads")
    facts["autocast"] = bool(cap.get("autocast"))
    if cap.get("precision_ab"):
        facts["precision_ab"] = cap["precision_ab"]
    facts.update(_other_facts(cap, main, share))
    # Other processes are scanned every 0.5 s: a short window borrows the scans around it.
    facts.update(contention_facts(window_samples(samples, start - _CONTENTION_MARGIN_NS,
                                                 end + _CONTENTION_MARGIN_NS)))
    cuda = cap.get("cuda") or {}
    if cuda:
        syncs = [s.syncs or 0 for s in main.measured]
        facts["syncs_per_step_mean"] = round(sum(syncs) / len(syncs), 2) if syncs else 0.0
        facts["sync_sites"] = cuda.get("sync_sites") or {}
        facts["gpu_memory"] = cuda.get("memory") or {}
        dev = [s.device_ms for s in main.measured if s.device_ms is not None]
        facts["device_step_ms_median"] = round(statistics.median(dev), 3) if dev else None
    facts["h2d_bytes_per_step"] = (int(cap.get("h2d_bytes", 0)) // max(1, len(main.steps))
                                   if cap.get("h2d_bytes") else 0)
    facts["stragglers"] = [s.to_dict() for s in find_stragglers(ranks)]
    facts["per_rank"] = [r.to_dict() for r in ranks]
    return facts
