"""Captures and samples in, per-step breakdowns and per-rank summaries out (pure functions).

A step is the time between two step boundaries (the first optimizer's ``step()``
returning; for loops without one, a ``backward()`` followed by a gradient reset; for
loops without backward, one DataLoader batch to the next; the API's ``prof.step()``;
see :mod:`pitstop.profile.recorder`). Its time is split into phases, each instant
going to exactly one phase, the most specific one that covers it:

    data > collective > h2d > backward > forward > optimizer > other

so a host-to-device copy inside ``forward()`` counts as ``h2d``, the forward and
backward an LBFGS closure runs inside ``optimizer.step()`` count as forward and
backward, and ``other`` is what the loop did outside every hooked call (its own input
pipeline, logging, metrics, Python between calls; :mod:`pitstop.profile.attribution`
says which, from the stack samples).
"""

from __future__ import annotations

import itertools
import statistics
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PHASES",
    "RankSummary",
    "Step",
    "merge_ranks",
    "phases_between",
    "probe_step_index",
    "steps_from_capture",
    "summarize_rank",
]

PHASES = ("data", "collective", "h2d", "optimizer", "backward", "forward", "other")
#: Which phase owns an instant several intervals cover (the recorder tags by the same order).
_PRIORITY = ("data", "collective", "h2d", "backward", "forward", "optimizer")


@dataclass
class Step:
    index: int
    start_ns: int
    end_ns: int
    kind: str  # "warmup", "probe" (warm-up step run under torch.profiler) or "measured"
    phases_ms: dict[str, float]
    device_ms: float | None = None
    syncs: int | None = None
    main_thread_cpu_ms: float | None = None

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "start_ns": self.start_ns,
                "ms": round(self.ms, 3),
                "phases_ms": {k: round(v, 3) for k, v in self.phases_ms.items()},
                "device_ms": self.device_ms, "syncs": self.syncs,
                "main_thread_cpu_ms": self.main_thread_cpu_ms}


def _clip_union(intervals: Sequence[Sequence[int]], starts: list[int], lo: int, hi: int
                ) -> list[tuple[int, int]]:
    """Parts of ``intervals`` (sorted by start) inside [lo, hi], merged."""
    out: list[tuple[int, int]] = []
    # Intervals can nest (an inner call ends first), so look back a little.
    i = max(0, bisect_left(starts, lo) - 8)
    n = len(intervals)
    while i < n:
        a, b = intervals[i]
        i += 1
        if a >= hi:
            break
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _exclusive_ms(per_kind: dict[str, list[tuple[int, int]]], lo: int, hi: int
                  ) -> dict[str, float]:
    """Split [lo, hi] among phases by priority; what no phase covers is ``other``."""
    points = {lo, hi}
    for ivs in per_kind.values():
        for a, b in ivs:
            points.add(a)
            points.add(b)
    cuts = sorted(points)
    out = dict.fromkeys(PHASES, 0.0)
    # Pointer per kind into its merged, sorted intervals.
    pos = dict.fromkeys(per_kind, 0)
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        owner = "other"
        for kind in _PRIORITY:
            ivs = per_kind.get(kind) or []
            if not ivs:
                continue
            p = pos[kind]
            while p < len(ivs) and ivs[p][1] <= mid:
                p += 1
            pos[kind] = p
            if p < len(ivs) and ivs[p][0] <= mid:
                owner = kind
                break
        out[owner] += (b - a) / 1e6
    return out


def _step_windows(cap: dict[str, Any]) -> list[tuple[int, int]]:
    boundaries: list[int] = list(cap.get("boundaries") or [])
    if not boundaries:
        return []
    if int(cap.get("schema", 1)) < 2 and cap.get("boundary") == "dataloader":
        data = sorted(cap.get("intervals", {}).get("data", []))
        return list(itertools.pairwise([a for a, _ in data]))
    first = cap.get("start_ns")
    if first is None:
        first = cap.get("t0_ns")
    first = min(first, boundaries[0]) if first is not None else boundaries[0]
    starts = [first, *boundaries[:-1]]
    return list(zip(starts, boundaries, strict=False))


def probe_step_index(cap: dict[str, Any]) -> int | None:
    """Index of the step the operator probe ran in (None when it did not run)."""
    if not cap.get("probe"):
        return None
    if "probe_step" in cap:
        return cap["probe_step"]
    warmup = int(cap.get("warmup", 0))
    return warmup - 2 if warmup >= 3 else None


def steps_from_capture(cap: dict[str, Any]) -> list[Step]:
    """Every step of one process, with its phase breakdown, in order."""
    windows = _step_windows(cap)[: int(cap.get("warmup", 0)) + int(cap.get("steps", 0))]
    warmup = int(cap.get("warmup", 0))
    probe_index = probe_step_index(cap)
    kinds = {}
    for kind, ivs in (cap.get("intervals") or {}).items():
        srt = sorted((int(a), int(b)) for a, b in ivs)
        kinds[kind] = (srt, [a for a, _ in srt])
    cuda = cap.get("cuda") or {}
    device_ms = cuda.get("device_step_ms") or []
    syncs = cuda.get("syncs_per_step") or {}
    cpu_marks = cap.get("main_thread_cpu_ns") or []
    steps = []
    for i, (lo, hi) in enumerate(windows):
        per_kind = {k: _clip_union(ivs, starts, lo, hi) for k, (ivs, starts) in kinds.items()}
        phases = _exclusive_ms(per_kind, lo, hi)
        kind = "probe" if i == probe_index else ("warmup" if i < warmup else "measured")
        step = Step(i, lo, hi, kind, phases)
        k = i - int(cuda.get("first_boundary", 1))
        if 0 <= k < len(device_ms):
            step.device_ms = device_ms[k]
        if cuda:
            step.syncs = int(syncs.get(str(i), 0))
        if 1 <= i < len(cpu_marks):
            step.main_thread_cpu_ms = round((cpu_marks[i] - cpu_marks[i - 1]) / 1e6, 3)
        steps.append(step)
    return steps


def phases_between(cap: dict[str, Any], lo: int, hi: int) -> dict[str, float]:
    """Milliseconds of each phase in [lo, hi] of one capture (exclusive, by priority)."""
    per_kind = {}
    for kind, ivs in (cap.get("intervals") or {}).items():
        srt = sorted((int(a), int(b)) for a, b in ivs)
        per_kind[kind] = _clip_union(srt, [a for a, _ in srt], lo, hi)
    return _exclusive_ms(per_kind, lo, hi)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass
class RankSummary:
    """One process's measured steps reduced to the figures the verdict needs."""

    rank: int | None
    pid: int
    steps: list[Step]
    measured: list[Step]
    step_ms_median: float
    step_ms_p10: float
    step_ms_p90: float
    phase_ms_mean: dict[str, float]
    phase_share: dict[str, float]
    work_ms: list[float]  # per measured step: time spent on this rank's own work
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "pid": self.pid,
            "steps_measured": len(self.measured),
            "step_ms": {"median": round(self.step_ms_median, 3),
                        "p10": round(self.step_ms_p10, 3), "p90": round(self.step_ms_p90, 3)},
            "phase_ms_mean": {k: round(v, 3) for k, v in self.phase_ms_mean.items()},
            "phase_share": {k: round(v, 4) for k, v in self.phase_share.items()},
            "work_ms_median": round(statistics.median(self.work_ms), 3) if self.work_ms else None,
            "notes": self.notes,
        }


def summarize_rank(cap: dict[str, Any]) -> RankSummary:
    steps = steps_from_capture(cap)
    measured = [s for s in steps if s.kind == "measured"]
    notes: list[str] = []
    if not measured and steps:
        measured = [s for s in steps if s.kind != "probe"][1:] or steps
        notes.append(f"only {len(steps)} step(s) ran, fewer than the warm-up: the figures "
                     "include warm-up steps")
    ms = [s.ms for s in measured]
    total = sum(ms) or 1.0
    phase_tot = {p: sum(s.phases_ms[p] for s in measured) for p in PHASES}
    n = max(1, len(measured))
    ddp = bool(cap.get("ddp"))
    # Under data-parallel training, backward contains the gradient all-reduce and so
    # the wait for the slowest rank; collectives are waits by definition.
    work = [s.ms - s.phases_ms["collective"] - (s.phases_ms["backward"] if ddp else 0.0)
            for s in measured]
    return RankSummary(
        rank=cap.get("rank"), pid=int(cap.get("pid", 0)), steps=steps, measured=measured,
        step_ms_median=statistics.median(ms) if ms else 0.0,
        step_ms_p10=_pct(ms, 0.1), step_ms_p90=_pct(ms, 0.9),
        phase_ms_mean={p: v / n for p, v in phase_tot.items()},
        phase_share={p: v / total for p, v in phase_tot.items()},
        work_ms=work, notes=notes)


@dataclass
class Straggler:
    rank: int
    work_ms_median: float
    others_median_ms: float
    slower_share: float  # share of steps in which this rank was slower than the others' median

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "work_ms_median": round(self.work_ms_median, 3),
                "others_median_ms": round(self.others_median_ms, 3),
                "excess_pct": round(100 * (self.work_ms_median / self.others_median_ms - 1), 1)
                if self.others_median_ms else None,
                "slower_in_share_of_steps": round(self.slower_share, 3)}


def find_stragglers(ranks: Sequence[RankSummary], *, excess: float = 0.15,
                    consistency: float = 0.6) -> list[Straggler]:
    """Ranks whose own work per step is ``excess`` above the median of the other ranks
    in at least ``consistency`` of the steps (and in the median)."""
    ranked = [r for r in ranks if r.rank is not None and r.work_ms]
    if len(ranked) < 2:
        return []
    n = min(len(r.work_ms) for r in ranked)
    out = []
    for r in ranked:
        others = [o for o in ranked if o is not r]
        slower = 0
        for i in range(n):
            med = statistics.median(o.work_ms[i] for o in others)
            if r.work_ms[i] > med * (1 + excess):
                slower += 1
        own = statistics.median(r.work_ms[:n])
        others_med = statistics.median(statistics.median(o.work_ms[:n]) for o in others)
        if n and slower / n >= consistency and own > others_med * (1 + excess):
            out.append(Straggler(int(r.rank or 0), own, others_med, slower / n))
    return out


def window_samples(samples: Iterable[dict[str, Any]], start_ns: int, end_ns: int
                   ) -> list[dict[str, Any]]:
    lo, hi = start_ns / 1e9, end_ns / 1e9
    return [s for s in samples if lo <= s.get("t", 0.0) <= hi]


def merge_ranks(caps: Sequence[dict[str, Any]]) -> list[RankSummary]:
    """Summaries of every process that ran steps, rank 0 (or the single process) first."""
    out = [summarize_rank(c) for c in caps]
    out = [r for r in out if r.steps]
    out.sort(key=lambda r: (r.rank if r.rank is not None else -1, r.pid))
    return out
