"""The loader search: which configurations to try, in what order, and when to stop.

A full grid (every worker count x prefetch depth x persistence x pinning x start
method) costs tens of trials; the search below usually needs a sixth of them:

1. **Coarse sweep of workers** 0, 1, 2, 4, 8, ... up to the CPUs this process may
   use, with PyTorch's default prefetch depth (2), persistent workers and (on a GPU
   target) pinned memory. From 2 workers on, it stops as soon as a step up is not at
   least :data:`RISE` faster than the best so far ("throughput stopped rising"), or,
   with a model, as soon as the loader keeps the step fed (:data:`FED` of the step's
   own rate: "outruns the step"). When it reaches the CPU count still rising and the
   workers use less than :data:`IO_CPU` of a core each, they are waiting on I/O, not
   computing, and the sweep goes on past the CPU count (up to
   ``SearchDomain.io_max_workers``).
2. **Local refinement of workers**: one probe halfway between the best count and the
   next one measured above it (a peak may hide there), then a bisection between the
   best and the largest count below it that is not good enough, for the fewest
   workers that are (within :data:`TIE` of the best; with a model: fed). With a
   model, a count just below the fewest good enough (within :data:`NEAR`) is
   measured again in turns (A B, then B A) with the cheapest count above it that is
   fed on its own numbers, and is fed too when, pooled, that count is not
   :data:`RISE` faster (failing a fed count, with the fastest above it, and the pooled
   rates are judged within :data:`TIE` of the best): a hard threshold alone lets noise
   of a fraction of a percent decide between 4 and 8 workers.
3. **The other knobs at that worker count**: prefetch depth (4, then 8 while it
   pays; else 1, which holds half the memory), pinned memory off (GPU target),
   non-persistent workers and other start methods. The last two only change what
   happens at an epoch boundary, so they are measured as start-up and boundary only,
   with the steady rate of the trial they vary.

Choice: the cheapest measured configuration (fewest workers, then fewest batches in
flight, no pinned copies, persistent) that is good enough; configurations are
compared by *effective* samples/s (the epoch boundary spread over a real epoch).
Every configuration not tried is accounted for in the notes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from pitstop.bench.ladder import SLOWER_MARGIN
from pitstop.bench.measure import Measurement
from pitstop.tune import interrupt
from pitstop.tune.budget import Budget
from pitstop.tune.loader_trials import LoaderConfig, LoaderTrial
from pitstop.tune.measure import overall_rate
from pitstop.tune.memory import MemoryEstimate

RISE = 0.05
NEAR = 2 * RISE  # how close below a fed count a count must be to be measured again in turns
TIE = SLOWER_MARGIN
FED = 0.95
IO_CPU = 0.5
IO_FACTOR = 4
IO_MAX = 64
PREFETCHES = (1, 2, 4, 8)
DEFAULT_PREFETCH = 2


class TrialRunner(Protocol):
    trials: list[LoaderTrial]

    def measure(self, config: LoaderConfig, role: str) -> LoaderTrial: ...
    def remeasure(self, trial: LoaderTrial) -> LoaderTrial: ...
    def boundary_only(self, config: LoaderConfig, steady: LoaderTrial, role: str) -> LoaderTrial: ...
    def skip(self, config: LoaderConfig, role: str, reason: str,
             memory: MemoryEstimate | None = None) -> LoaderTrial: ...
    def memory(self, config: LoaderConfig) -> MemoryEstimate: ...
    def estimated_seconds(self, config: LoaderConfig) -> float: ...


@dataclass(frozen=True)
class SearchDomain:
    """Every setting the loader search may choose from."""

    max_workers: int
    io_max_workers: int
    pin_choices: tuple[bool, ...] = (False,)
    prefetches: tuple[int, ...] = PREFETCHES
    start_methods: tuple[str | None, ...] = (None,)

    @classmethod
    def for_machine(cls, cpus: int, *, cuda: bool, max_workers: int | None = None,
                    start_methods: tuple[str | None, ...] = (None,)) -> SearchDomain:
        top = max(0, cpus if max_workers is None else max_workers)
        io_top = top if max_workers is not None else min(IO_MAX, max(top, IO_FACTOR * cpus))
        return cls(top, io_top, (True, False) if cuda else (False,), PREFETCHES, start_methods)

    def grid(self) -> list[LoaderConfig]:
        """Every configuration of the domain (what a full grid search measures)."""
        configs: list[LoaderConfig] = [LoaderConfig(0, None, pin) for pin in self.pin_choices]
        for w, p, persistent, pin, method in itertools.product(
                range(1, self.io_max_workers + 1), self.prefetches, (True, False),
                self.pin_choices, self.start_methods):
            configs.append(LoaderConfig(w, p, pin, persistent, method))
        return configs

    def sweep_points(self) -> list[int]:
        points = [0]
        w = 1
        while w <= self.max_workers:
            points.append(w)
            w *= 2
        if self.max_workers not in points:
            points.append(self.max_workers)
        return points

    def io_points(self) -> list[int]:
        points = []
        w = max(1, self.max_workers) * 2
        while w < self.io_max_workers:
            points.append(w)
            w *= 2
        if self.io_max_workers > self.max_workers:
            points.append(self.io_max_workers)
        return points


@dataclass
class SearchOutcome:
    best: LoaderTrial | None
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    step_rate: float | None = None


class LoaderSearch:
    """Runs the search of the module docstring against a :class:`TrialRunner`."""

    def __init__(self, runner: TrialRunner, domain: SearchDomain, *, budget: Budget,
                 step_rate: float | None = None, pin_default: bool = False,
                 user_config: LoaderConfig | None = None) -> None:
        self.runner = runner
        self.domain = domain
        self.budget = budget
        self.step_rate = step_rate
        self.pin = pin_default and True in domain.pin_choices
        self.user_config = user_config
        self.notes: list[str] = []
        self.out_of_budget = False
        self._judged_in_turns: set[int] = set()  # worker counts already measured in turns

    # -- judging
    def measured(self) -> list[LoaderTrial]:
        return [t for t in self.runner.trials if t.measured]

    def best(self) -> LoaderTrial | None:
        done = self.measured()
        if not done:
            return None
        top = max(t.score for t in done)
        return min((t for t in done if t.score >= top * (1 - 1e-9)), key=lambda t: t.config.cost())

    def step_alone(self) -> float | None:
        """The step's own rate: the best of its measurements so far (at the start and
        after each trial). A busy machine only ever slows a step down, so the best is
        the closest to what it can do; judging "fed" against it errs towards one
        worker too many, never towards a starved step."""
        if self.step_rate is None:
            return None
        return max([self.step_rate, *(t.step_alone for t in self.runner.trials
                                      if t.step_alone is not None)])

    def fed(self, trial: LoaderTrial) -> bool:
        """Keeps the step fed: at least FED of the step's own rate, or, measured in
        turns with a count that is, not RISE slower (:meth:`_confirm_fed`)."""
        return trial.fed_in_turns or self.fed_alone(trial)

    def fed_alone(self, trial: LoaderTrial) -> bool:
        """Reaches FED of the step's own rate on the trial's own numbers."""
        alone = self.step_alone()
        return alone is not None and trial.score >= FED * alone

    def good_enough(self, trial: LoaderTrial) -> bool:
        """Fed (with a model, when some trial is), else not more than TIE below the best.

        Unlike the bench's keep-or-leave-out rule, one repeat reaching the best does
        not count: a loader's single repeats can be served from a queue that filled
        while the consumer was descheduled, so only the total rate is trusted."""
        if not trial.measured:
            return False
        if self.step_rate is not None and any(self.fed(t) for t in self.measured()):
            return self.fed(trial)
        best = self.best()
        return best is not None and trial.score >= best.score * (1 - TIE)

    def choice(self) -> LoaderTrial | None:
        """The cheapest good-enough measured configuration."""
        good = [t for t in self.measured() if self.good_enough(t)]
        return min(good, key=lambda t: (t.config.cost(), -t.score)) if good else None

    # -- running one trial, within budget and memory
    def _try(self, config: LoaderConfig, role: str) -> LoaderTrial | None:
        interrupt.check()
        config = config.normalised()
        for t in self.runner.trials:
            if t.config == config and t.status == "measured" and t.derived_from is None:
                return t
        if self.out_of_budget:
            return None
        estimate = self.runner.estimated_seconds(config)
        if not self.budget.affords(estimate):
            self.out_of_budget = True
            self.notes.append(f"budget: {self.budget.left():.1f} s left, a trial takes about "
                              f"{estimate:.1f} s; stopped before {config.label()}")
            return None
        mem = self.runner.memory(config)
        if not mem.fits:
            return self.runner.skip(config, role, f"not started: would not fit memory ({mem.why})",
                                    mem)
        return self.runner.measure(config, role)

    def _by_workers(self, w: int, prefetch: int = DEFAULT_PREFETCH) -> LoaderConfig:
        return LoaderConfig(w, prefetch if w else None, self.pin, w > 0).normalised()

    def _trial_at(self, w: int) -> LoaderTrial | None:
        cfg = self._by_workers(w)
        return next((t for t in self.runner.trials if t.config == cfg and t.measured
                     and t.derived_from is None), None)

    # -- the phases
    def run(self) -> SearchOutcome:
        outcome = SearchOutcome(None, self.notes, step_rate=self.step_rate)
        try:
            if self.user_config is not None:
                self._try(self.user_config, "yours")
            self._sweep()
            self._refine_workers()
            self._refine_knobs()
            interrupt.check()
        except KeyboardInterrupt:
            outcome.interrupted = True
            self.notes.append("interrupted (Ctrl-C): the choice is among the trials finished "
                              "before it")
        outcome.best = self.choice()
        return outcome

    def _sweep(self) -> None:
        points = self.domain.sweep_points()
        extended = False
        i = 0
        best: LoaderTrial | None = None
        while i < len(points):
            w = points[i]
            i += 1
            trial = self._try(self._by_workers(w), "sweep")
            if trial is None:
                return
            if not trial.measured:
                if trial.status == "skipped":
                    self.notes.append(f"workers >= {w} not tried: {trial.reason}")
                    return
                continue
            rising = self._rising(trial, best)
            if w >= 2 and not rising and best is not None and self._affords_two():
                # Stopping is the decision that costs the most if noise took it: measure
                # both again, in the opposite order, and decide on the pooled rates.
                self.runner.remeasure(trial)
                self.runner.remeasure(best)
                rising = self._rising(trial, best)
                if rising:
                    self.notes.append(f"{w} workers looked no faster than "
                                      f"{best.config.num_workers}; measured both again in "
                                      f"turns: it is")
            if w >= 2 and not rising and best is not None:
                rest = points[i:]
                self.notes.append(
                    f"sweep stopped at {w} workers: {trial.score:,.1f}/s is not {RISE:.0%} above "
                    f"{best.score:,.1f}/s ({best.config.num_workers} workers)"
                    + (f"; {', '.join(map(str, rest))} workers not swept" if rest else ""))
                return
            if best is None or trial.score > best.score:
                best = trial
            if self.fed(trial):
                rest = points[i:]
                alone = self.step_alone() or 0.0
                self.notes.append(
                    f"sweep stopped at {w} workers: {trial.score:,.1f}/s keeps the step "
                    f"({alone:,.1f}/s alone) fed"
                    + (f"; {', '.join(map(str, rest))} workers not needed" if rest else ""))
                return
            if i == len(points) and not extended and w == self.domain.max_workers:
                extended = True
                more = self.domain.io_points()
                if not more:
                    continue
                if trial.worker_cpu is not None and trial.worker_cpu < IO_CPU and w > 0:
                    self.notes.append(
                        f"at {w} workers (the CPU count) each worker used "
                        f"{trial.worker_cpu:.2f} CPU: waiting on I/O, so the sweep goes on "
                        f"past the CPU count ({', '.join(map(str, more))})")
                    points.extend(more)
                else:
                    why = ("busy computing" if trial.worker_cpu is not None
                           else "CPU use not readable")
                    self.notes.append(
                        f"workers above the CPU count ({self.domain.max_workers}) not tried: "
                        f"the workers were {why} "
                        + (f"({trial.worker_cpu:.2f} CPU each)" if trial.worker_cpu is not None
                           else ""))

    @staticmethod
    def _rising(trial: LoaderTrial, best: LoaderTrial | None) -> bool:
        """A step up counts as rising when its rate, or failing that its best repeat, is
        RISE above the best so far (noise mostly slows a trial down)."""
        return best is None or max(trial.score, _best_repeat(trial)) >= best.score * (1 + RISE)

    def _affords_two(self) -> bool:
        return not self.out_of_budget and self.budget.affords(
            2 * self.runner.estimated_seconds(LoaderConfig(0)))

    def _refine_workers(self) -> None:
        best = self.best_sweep()
        if best is None:
            return
        b = best.config.num_workers
        # Upward: a peak may hide between the best and the next count measured above it.
        while True:
            above = sorted(w for w in self._measured_workers() if w > b)
            if not above or above[0] - b <= 1:
                break
            m = (b + above[0]) // 2
            trial = self._try(self._by_workers(m), "refine")
            if trial is None or not trial.measured:
                break
            current = self._trial_at(b)
            assert current is not None
            if trial.score >= current.score * (1 + RISE):
                b = m
            else:
                break
        # Downward: the fewest workers that are good enough.
        while True:
            passing = sorted(w for w in self._measured_workers()
                             if self.good_enough(self._trial_at(w)))  # type: ignore[arg-type]
            if not passing:
                return
            low = passing[0]
            below = [w for w in self._measured_workers() if w < low]
            if not below:
                return
            if self._confirm_fed(max(below)):
                continue
            if low - max(below) <= 1:
                return
            m = (max(below) + low) // 2
            trial = self._try(self._by_workers(m), "refine")
            if trial is None or not trial.measured:
                return

    def _confirm_fed(self, w: int) -> bool:
        """With a model: is ``w`` workers, just below the fewest good enough, good enough too?

        "Fed" on a trial's own numbers is a hard threshold (FED of the step's best rate
        alone, a best that only rises as the step is measured again), and on a busy
        machine a loader that keeps up falls a fraction of a percent short of it while
        one with twice the workers just passes, or none passes at all. So a count
        within NEAR of the anchor (the cheapest count above it that passes on its own;
        when none does, the fastest count above it) is measured again in turns with
        it. Against a fed anchor, ``w`` is fed when, pooled, the anchor is not RISE
        faster (the margin by which the sweep tells "more workers are faster" from
        noise): more workers that do not make the step faster mean the loader is not
        what holds it back. Against an anchor that is not fed itself, the pooled rates
        are judged like any trial's (within TIE of the best). Counts further below are
        not measured again."""
        if self.step_rate is None or w in self._judged_in_turns:
            return False
        trial = self._trial_at(w)
        above = [t for t in (self._trial_at(v) for v in self._measured_workers() if v > w)
                 if t is not None]
        if trial is None or not above or self.fed(trial):
            return False
        passing = [t for t in above if self.fed_alone(t)]
        anchor = (min(passing, key=lambda t: t.config.cost()) if passing
                  else max(above, key=lambda t: t.score))
        margin = RISE if passing else TIE
        if trial.score * (1 + NEAR) < anchor.score:
            return False
        n = anchor.config.num_workers
        if not self._affords_two():
            self.notes.append(f"{w} workers not measured again in turns with {n}: out of "
                              f"budget")
            return False
        self._judged_in_turns.add(w)
        as_fast = self.as_fast_in_turns(trial, anchor, margin)
        fed = self.fed_alone(anchor)
        what = "fed" if fed else "the fastest above it, not fed on its own"
        verdict = (f"{n} are more than {margin:.0%} faster" if not as_fast else
                   f"{n} are not {RISE:.0%} faster, so {w} keep the step fed" if fed else
                   f"{n} are not {margin:.0%} faster")
        self.notes.append(f"{w} workers ({trial.score:,.1f}/s) measured again in turns with "
                          f"{n} ({anchor.score:,.1f}/s, {what}): {verdict}")
        if as_fast and self.fed_alone(anchor):
            trial.fed_in_turns = not self.fed_alone(trial)
        # Against an anchor that is not fed itself, the pooled rates are judged by the
        # non-model rule (within TIE of the best) like every other trial's.
        return self.good_enough(trial)

    def as_fast_in_turns(self, trial: LoaderTrial, other: LoaderTrial,
                         margin: float = RISE) -> bool:
        """Measure both again, the later-measured first (A B, then B A), and tell
        whether, pooled, ``other`` is not ``margin`` faster than ``trial``."""
        first, second = sorted((trial, other), key=self.runner.trials.index, reverse=True)
        self.runner.remeasure(first)
        self.runner.remeasure(second)
        return trial.score * (1 + margin) >= other.score

    def best_sweep(self) -> LoaderTrial | None:
        trials = [self._trial_at(w) for w in self._measured_workers()]
        done = [t for t in trials if t is not None]
        if not done:
            return None
        top = max(t.score for t in done)
        return min((t for t in done if t.score >= top), key=lambda t: t.config.cost())

    def _measured_workers(self) -> list[int]:
        return sorted({t.config.num_workers for t in self.measured()
                       if t.config == self._by_workers(t.config.num_workers)
                       and t.derived_from is None})

    def _refine_knobs(self) -> None:
        pick = self.choice()
        if pick is None:
            return
        w = pick.config.num_workers
        if w == 0:
            self.notes.append("prefetch_factor, persistent_workers and the start method not "
                              "tried: the choice has no worker processes")
            if len(self.domain.pin_choices) > 1:
                self._try(replace(pick.config, pin_memory=not pick.config.pin_memory), "pin")
            return
        base = self._trial_at(w) or pick
        self._refine_prefetch(base)
        current = self.choice() or base
        if len(self.domain.pin_choices) > 1:
            self._try(replace(current.config, pin_memory=not current.config.pin_memory), "pin")
            current = self.choice() or current
        self._boundary_variants(current)

    def _refine_prefetch(self, base: LoaderTrial) -> None:
        cfg = base.config
        deeper = [p for p in self.domain.prefetches if p > (cfg.prefetch_factor or 0)]
        last = base
        went_deeper = False
        for p in deeper:
            trial = self._try(replace(cfg, prefetch_factor=p), "prefetch")
            if trial is None or not trial.measured:
                break
            if trial.score >= last.score * (1 + RISE):
                last = trial
                went_deeper = True
                continue
            rest = [q for q in deeper if q > p]
            if rest:
                self.notes.append(f"prefetch {', '.join(map(str, rest))} not tried: {p} was no "
                                  f"faster than {last.config.prefetch_factor}")
            break
        if went_deeper:
            self.notes.append(f"prefetch below {cfg.prefetch_factor} not tried: a deeper queue paid")
        else:
            shallower = [p for p in self.domain.prefetches if p < (cfg.prefetch_factor or 0)]
            for p in sorted(shallower, reverse=True)[:1]:
                self._try(replace(cfg, prefetch_factor=p), "prefetch")
            if len(shallower) > 1:
                self.notes.append(f"prefetch {', '.join(map(str, sorted(shallower)[:-1]))} not "
                                  f"tried: below {sorted(shallower)[-1]} nothing is left to save")

    def _boundary_variants(self, current: LoaderTrial) -> None:
        steady = current
        while steady.derived_from is not None:
            steady = self.runner.trials[steady.derived_from - 1]
        variants: list[tuple[LoaderConfig, str]] = [
            (replace(current.config, persistent_workers=not current.config.persistent_workers),
             "persistent")]
        for method in self.domain.start_methods:
            if method != current.config.multiprocessing_context:
                variants.append((replace(current.config, multiprocessing_context=method), "start"))
        for cfg, role in variants:
            if any(t.config == cfg and t.measured for t in self.runner.trials):
                continue
            if self.out_of_budget or not self.budget.affords(2 * (steady.startup_s or 0.5)):
                self.notes.append(f"{cfg.label()} not tried: out of budget")
                continue
            self.runner.boundary_only(cfg, steady, role)


def _best_repeat(trial: LoaderTrial) -> float:
    return effective_measurement(trial).max if trial.measured else 0.0


def effective_measurement(trial: LoaderTrial) -> Measurement:
    """The trial's repeats scaled by its effective/steady ratio (the epoch boundary
    spread over each repeat), so the bench's rule compares what the search ranks by."""
    m = trial.measurement
    assert m is not None and trial.effective is not None
    factor = trial.effective / overall_rate(m) if m.median > 0 else 1.0
    return Measurement(rates=[r * factor for r in m.rates], samples=m.samples,
                       timed_seconds=m.timed_seconds, warmup_seconds=m.warmup_seconds,
                       steps=m.steps)


def untried(domain: SearchDomain, trials: list[LoaderTrial]) -> int:
    """How many grid configurations the search never measured."""
    tried = {t.config.normalised() for t in trials if t.status in ("measured", "failed")}
    return sum(1 for cfg in domain.grid() if cfg.normalised() not in tried)


def run_grid(runner: TrialRunner, domain: SearchDomain, *, budget: Budget,
             on_trial: Callable[[LoaderTrial], None] = lambda t: None) -> list[LoaderTrial]:
    """Measure every configuration of ``domain`` (the reference the search is judged by)."""
    out = []
    for cfg in domain.grid():
        mem = runner.memory(cfg)
        trial = (runner.measure(cfg, "grid") if mem.fits else
                 runner.skip(cfg, "grid", f"not started: would not fit memory ({mem.why})", mem))
        out.append(trial)
        on_trial(trial)
    return out
