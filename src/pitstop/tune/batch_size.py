"""The batch size search: the fastest size that leaves memory headroom, not the largest
that fits.

Starting from the size the model trials ran at, sizes double while throughput still
rises by :data:`RISE` and the step's peak memory stays under ``1 - HEADROOM`` of what
this process may use. An out-of-memory error is caught, the memory freed, and the
size recorded as too large; a size whose peak is over the limit counts the same.
Between the largest good size and the first bad one, a binary search (on multiples
of 8 where the sizes allow) finds the largest good size, but only while the curve
was still rising there: on a plateau a larger batch buys nothing. Peak memory is
extrapolated linearly from the sizes measured, so a size predicted to exceed the
limit is not run at all. The choice is the fastest good size; within :data:`TIE` of
it, the smaller one (less memory, and closer to the optimisation settings the user
tuned for).

Every decision uses numbers all ranks agreed on (see :meth:`ModelTrials._agree_on`),
so under torchrun all ranks take the same path and the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pitstop.tune.measure import robust_rate
from pitstop.tune.model_trials import ModelConfig, ModelTrial, ModelTrials

HEADROOM = 0.10
RISE = 0.05
TIE = 0.03
MAX_DOUBLINGS = 8


@dataclass
class BatchSearch:
    """The sizes tried and the one chosen."""

    trials: list[ModelTrial] = field(default_factory=list)
    choice: ModelTrial | None = None
    limit_bytes: int | None = None
    limit_how: str = ""
    notes: list[str] = field(default_factory=list)


def _good(trial: ModelTrial, limit: int | None) -> bool:
    if not trial.measured:
        return False
    return limit is None or trial.peak_bytes is None or trial.peak_bytes <= limit


def _round(size: int) -> int:
    return size - size % 8 if size >= 16 else size


def predicted_peak(points: list[tuple[int, int]], size: int) -> float | None:
    """Peak bytes at ``size`` from the line through the two largest sizes measured."""
    pts = sorted(points)
    if len(pts) < 2:
        return None
    (b1, p1), (b2, p2) = pts[-2], pts[-1]
    if b2 == b1:
        return None
    slope = (p2 - p1) / (b2 - b1)
    return p2 + slope * (size - b2)


def search_batch_size(trials: ModelTrials, start: ModelTrial, *, limit: int | None,
                      limit_how: str, affordable: Callable[[], bool],
                      max_size: int | None = None) -> BatchSearch:
    """Run the search from ``start`` (a measured trial at the current best settings)."""
    out = BatchSearch(limit_bytes=limit, limit_how=limit_how)
    by_size: dict[int, ModelTrial] = {start.config.batch_size: start}
    good = start
    bad: int | None = None
    base: ModelConfig = start.config

    def measure(size: int) -> ModelTrial:
        trial = trials.measure(replace(base, batch_size=size), "batch")
        by_size[size] = trial
        out.trials.append(trial)
        if trial.measured and not _good(trial, limit):
            trial.verdict = "over the headroom"
            trial.reason = (f"peak {trial.peak_bytes / 2**20:,.0f} MiB > {limit_how}"
                            if trial.peak_bytes is not None else None)
        return trial

    def peaks() -> list[tuple[int, int]]:
        return [(b, t.peak_bytes) for b, t in by_size.items()
                if t.measured and t.peak_bytes is not None]

    size = start.config.batch_size
    rising = True
    for _ in range(MAX_DOUBLINGS):
        nxt = size * 2
        if max_size is not None and nxt > max_size:
            out.notes.append(f"batch sizes above {max_size} not tried (the limit given)")
            break
        guess = predicted_peak(peaks(), nxt)
        if limit is not None and guess is not None and guess > limit:
            out.notes.append(f"batch {nxt} not run: its peak is predicted at "
                             f"{guess / 2**20:,.0f} MiB, over {limit_how}")
            bad = nxt
            break
        if not affordable():
            out.notes.append(f"batch {nxt} and larger not tried: out of budget")
            break
        trial = measure(nxt)
        if not _good(trial, limit):
            bad = nxt
            break
        if robust_rate(trial.measurement) < robust_rate(good.measurement) * (1 + RISE):  # type: ignore[arg-type]
            rising = False
            out.notes.append(f"batch sizes above {nxt} not tried: {nxt} was not {RISE:.0%} faster "
                             f"than {good.config.batch_size}")
            if robust_rate(trial.measurement) > robust_rate(good.measurement):  # type: ignore[arg-type]
                good = trial
            break
        good = trial
        size = nxt
    # Bisect between the largest good size and the first bad one, while rising.
    while rising and bad is not None and bad - good.config.batch_size > max(1, good.config.batch_size // 8):
        mid = _round((good.config.batch_size + bad) // 2)
        if mid <= good.config.batch_size or mid >= bad:
            break
        guess = predicted_peak(peaks(), mid)
        if limit is not None and guess is not None and guess > limit:
            bad = mid
            continue
        if not affordable():
            out.notes.append("binary search stopped: out of budget")
            break
        trial = measure(mid)
        if _good(trial, limit):
            if robust_rate(trial.measurement) < robust_rate(good.measurement) * (1 + TIE):  # type: ignore[arg-type]
                break
            good = trial
        else:
            bad = mid
    measured = [t for t in by_size.values() if _good(t, limit)]
    if measured:
        top = max(robust_rate(t.measurement) for t in measured)  # type: ignore[arg-type]
        near = [t for t in measured if robust_rate(t.measurement) >= top * (1 - TIE)]  # type: ignore[arg-type]
        out.choice = min(near, key=lambda t: t.config.batch_size)
    return out
