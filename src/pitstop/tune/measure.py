"""Timing one trial: warm-up, a repeat length chosen from the warm-up's rate, timed
repeats (more of them when their spread is wide), built on the bench's harness.

:func:`pitstop.bench.measure.measure` does the timed part: it reads the clock only
after the device is synchronised and computes samples/s from the samples really
consumed. What is added here is what a search needs and a fixed ladder does not:

* repeats sized in *seconds* (from the budget), not in steps, so that a fast and a
  slow configuration cost the same time to measure;
* one more repeat, up to :attr:`TrialPlan.max_repeats`, while the spread of the
  repeats (max - min over the median) is above :attr:`TrialPlan.wide_spread`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pitstop.bench.measure import Measurement, Plan, StepRunner, measure
from pitstop.tune.budget import Budget


@dataclass(frozen=True)
class TrialPlan:
    """How long each timed repeat should last and when to repeat more."""

    repeat_seconds: float = 0.5
    repeats: int = 3
    max_repeats: int = 5
    wide_spread: float = 0.10
    min_steps: int = 2
    max_steps: int = 100_000

    def steps_for(self, steps_per_second: float) -> int:
        """Steps in one repeat at the rate seen in the warm-up."""
        if not steps_per_second > 0 or math.isinf(steps_per_second):
            return self.min_steps
        wanted = math.ceil(steps_per_second * self.repeat_seconds)
        return max(self.min_steps, min(self.max_steps, wanted))

    def expected_seconds(self, warmup_seconds: float = 0.0) -> float:
        return warmup_seconds + self.repeats * self.repeat_seconds


def plan_for_budget(seconds: float, *, trials: int, floor: float = 0.08,
                    ceiling: float = 2.0) -> TrialPlan:
    """Repeats long enough to be stable, short enough that about ``trials`` trials fit
    ``seconds`` (a trial is about 3 repeats plus warm-up and start-up, ~5 repeat-lengths)."""
    per_trial = seconds / max(1, trials)
    return TrialPlan(repeat_seconds=max(floor, min(ceiling, per_trial / 5)))


def overall_rate(m: Measurement) -> float:
    """Samples over seconds of all the repeats together: what a loader trial is ranked by.

    A loader is a pipeline with a queue: while this process is descheduled the workers
    fill it, and the next repeat drains it faster than they produce. The faster half
    of the repeats would count those bursts; the total counts each sample once, over
    all the time it took."""
    return m.samples / m.timed_seconds if m.timed_seconds > 0 else 0.0


def robust_rate(m: Measurement) -> float:
    """The mean of the faster half of the repeats: what model trials are ranked by.

    On a machine shared with other work, noise is one-sided: another process taking
    the CPU slows a repeat down and never speeds one up, so the median moves with how
    much of a trial happened to overlap someone else's burst. The faster half keeps
    one or two contended repeats from deciding, and averaging it keeps one lucky
    repeat from deciding either."""
    rates = sorted(m.rates, reverse=True)
    top = rates[: max(1, math.ceil(len(rates) / 2))]
    return sum(top) / len(top)


def spread(m: Measurement) -> float:
    """(max - min) / median of the repeats."""
    return (m.max - m.min) / m.median if m.median > 0 else math.inf


@dataclass
class Timed:
    """A measurement and what it cost."""

    measurement: Measurement
    steps_per_repeat: int
    extra_repeats: int = 0
    notes: list[str] = field(default_factory=list)


def timed_repeats(run: StepRunner, *, steps: int, plan: TrialPlan, sync: Callable[[], None],
                  tick: Callable[[], None] = lambda: None, budget: Budget | None = None,
                  agree: Callable[[float], float] = lambda value: value) -> Timed:
    """``plan.repeats`` timed repeats of ``steps`` steps, then more while the spread is
    wide (and the budget allows one more repeat). ``agree`` reduces the spread and the
    repeat length over ranks when they must decide together (see Budget.local for when
    they must not)."""
    m = measure(run, Plan(warmup=0, steps=steps, repeats=plan.repeats), sync=sync, tick=tick)
    timed = Timed(m, steps)
    while agree(spread(m)) > plan.wide_spread and len(m.rates) < plan.max_repeats:
        per_repeat = agree(m.timed_seconds / len(m.rates))
        if budget is not None and not budget.affords(per_repeat):
            timed.notes.append(f"spread {spread(m):.0%} but no budget left for another repeat")
            break
        more = measure(run, Plan(warmup=0, steps=steps, repeats=1), sync=sync, tick=tick)
        m.rates.extend(more.rates)
        m.samples += more.samples
        m.timed_seconds += more.timed_seconds
        m.steps += more.steps
        timed.extra_repeats += 1
    if spread(m) > plan.wide_spread:
        timed.notes.append(f"repeats spread {spread(m):.0%} of the median (noisy)")
    return timed


def warm_up(run: StepRunner, *, steps: int, sync: Callable[[], None],
            tick: Callable[[], None] = lambda: None) -> float:
    """Run ``steps`` untimed steps; return the steps/s of their second half (the first
    half absorbs start-up: queues filling, autotuning, first-call allocations)."""
    first = max(1, steps // 2)
    run(first, tick)
    sync()
    rest = max(1, steps - first)
    t0 = time.perf_counter()
    run(rest, tick)
    sync()
    elapsed = time.perf_counter() - t0
    return rest / elapsed if elapsed > 0 else math.inf
