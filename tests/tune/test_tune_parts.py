"""The pure parts of pitstop.tune, on numbers: budgets, memory estimates, the compile
amortisation rule, the loss guard, the search's decisions on known throughput curves."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from pitstop.bench.measure import Measurement
from pitstop.train.loader import MachineFacts
from pitstop.tune.budget import Budget, parse_budget
from pitstop.tune.loader_trials import LoaderConfig, LoaderTrial
from pitstop.tune.measure import robust_rate
from pitstop.tune.memory import MemoryEstimate, estimate
from pitstop.tune.model_trials import loss_drift
from pitstop.tune.model_tune import compile_advice
from pitstop.tune.search import LoaderSearch, SearchDomain


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("60s", 60), ("2m", 120), ("1m30s", 90), ("1.5min", 90), ("1h", 3600),
    (" 45 s ", 45), ("0.5", 0.5)])
def test_budget_forms(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10x", "-5s", "0", "0s", "5s later", "m", "nan", "inf",
                                  "1e300", "25h", "9" * 400])
def test_bad_budgets_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="--budget"):
        parse_budget(text)


def test_budget_clock() -> None:
    now = [100.0]
    b = Budget(10, clock=lambda: now[0])
    now[0] = 104
    assert b.spent() == 4 and b.left() == 6 and b.affords(6) and not b.affords(6.1)
    assert Budget(10, clock=lambda: now[0], agree=lambda v: v + 5).left() == 5


FACTS = MachineFacts(cpus=2, cpus_why="test", local_world_size=1, ram_available=8 * 2**30,
                     shm_free=64 * 2**20)


def test_memory_estimate_refuses_what_would_exhaust_shm_or_ram() -> None:
    batch = 4 * 2**20
    # 2 workers x prefetch 2 = 4 batches = 16 MiB: fits half of 64 MiB of /dev/shm
    assert estimate(workers=2, prefetch=2, pin_memory=False, batch_bytes=batch,
                    worker_bytes=2**20, facts=FACTS).fits
    big = estimate(workers=4, prefetch=4, pin_memory=False, batch_bytes=batch,
                   worker_bytes=2**20, facts=FACTS)
    assert not big.fits and "/dev/shm" in big.why and big.in_flight == 16
    hungry = estimate(workers=8, prefetch=1, pin_memory=True, batch_bytes=1024,
                      worker_bytes=2**30, facts=FACTS)
    assert not hungry.fits and "available RAM" in hungry.why
    assert estimate(workers=0, prefetch=None, pin_memory=False, batch_bytes=batch,
                    worker_bytes=0, facts=FACTS).fits


def test_compile_that_does_not_pay_back_over_the_run_is_not_recommended() -> None:
    # The example: 90 s of compile to win 5 % on a 1,000-step run.
    short = compile_advice("default", base_rate=320, compiled_rate=336, compile_s=90,
                           steps=1000, batch_size=32)
    assert not short.recommended and "not worth it" in short.why and "pays after" in short.why
    assert short.saved_s is not None and short.saved_s < 90
    long = compile_advice("default", base_rate=320, compiled_rate=336, compile_s=90,
                          steps=50_000, batch_size=32)
    assert long.recommended and long.saved_s is not None and long.saved_s > 90
    slower = compile_advice("default", base_rate=320, compiled_rate=321, compile_s=5,
                            steps=10**6, batch_size=32)
    assert not slower.recommended and "no faster" in slower.why


def test_loss_drift() -> None:
    assert loss_drift([2.0, 1.5], [2.0, 1.5]) == 0
    assert loss_drift([2.2, 1.5], [2.0, 1.5]) == pytest.approx(0.1)
    assert loss_drift([float("nan"), 1.0], [2.0, 1.0]) == math.inf
    assert loss_drift([1.0], [1.0, 2.0]) == math.inf


def test_robust_rate_ignores_slow_repeats() -> None:
    m = Measurement(rates=[100, 40, 98, 102, 50], samples=1, timed_seconds=1,
                    warmup_seconds=0, steps=1)
    assert robust_rate(m) == pytest.approx(100)


# ---------------------------------------------------------------- the search on known curves

@dataclass
class CurveRunner:
    """Measures by formula: samples/s as a function of the settings (a known curve)."""

    curve: dict[int, float]
    prefetch_gain: dict[int, float] = field(default_factory=dict)
    trials: list[LoaderTrial] = field(default_factory=list)
    cpu_per_worker: float = 0.05

    def rate(self, cfg: LoaderConfig) -> float:
        return self.curve[cfg.num_workers] * self.prefetch_gain.get(cfg.prefetch_factor or 2, 1.0)

    def memory(self, cfg: LoaderConfig) -> MemoryEstimate:
        return MemoryEstimate(cfg.in_flight, 1, 0, 0, True, "fits")

    def estimated_seconds(self, cfg: LoaderConfig) -> float:
        return 1.0

    def remeasure(self, trial: LoaderTrial) -> LoaderTrial:
        trial.rounds += 1
        return trial

    def skip(self, cfg: LoaderConfig, role: str, reason: str, memory: object = None) -> LoaderTrial:
        t = LoaderTrial(cfg, role, "skipped", reason)
        self.trials.append(t)
        return t

    def measure(self, cfg: LoaderConfig, role: str) -> LoaderTrial:
        r = self.rate(cfg)
        m = Measurement(rates=[r, r, r], samples=int(r * 3), timed_seconds=3, warmup_seconds=0,
                        steps=3)
        t = LoaderTrial(cfg, role, "measured", measurement=m, batches_per_s=r / 8, startup_s=0.1,
                        boundary_s=0.0, effective=r, worker_cpu=self.cpu_per_worker, seconds=1)
        self.trials.append(t)
        return t

    def boundary_only(self, cfg: LoaderConfig, steady: LoaderTrial, role: str) -> LoaderTrial:
        t = LoaderTrial(cfg, role, "measured", measurement=steady.measurement,
                        batches_per_s=steady.batches_per_s, boundary_s=0.5,
                        effective=steady.score * 0.9, derived_from=self.trials.index(steady) + 1)
        self.trials.append(t)
        return t


def _search(runner: CurveRunner, *, cpus: int = 2, step: float | None = None) -> LoaderSearch:
    return LoaderSearch(runner, SearchDomain.for_machine(cpus, cuda=False),
                        budget=Budget(1e9), step_rate=step)


def test_search_finds_a_plateau_between_sweep_points_with_few_trials() -> None:
    # Storage that serves 5 reads at once: rises to 5 workers, flat after.
    runner = CurveRunner({w: 100.0 * min(w, 5) if w else 100.0 for w in range(9)})
    outcome = _search(runner).run()
    assert outcome.best is not None and outcome.best.config.num_workers == 5
    assert outcome.best.config.persistent_workers
    tried = {t.config.num_workers for t in runner.trials}
    assert tried <= {0, 1, 2, 4, 8, 6, 5}
    assert len(runner.trials) < len(SearchDomain.for_machine(2, cuda=False).grid()) / 4
    assert any("past the CPU count" in n for n in outcome.notes)


def test_cpu_bound_workers_are_not_swept_past_the_cpu_count() -> None:
    runner = CurveRunner({0: 100, 1: 100, 2: 195}, cpu_per_worker=0.98)
    outcome = _search(runner).run()
    assert outcome.best is not None and outcome.best.config.num_workers == 2
    assert max(t.config.num_workers for t in runner.trials) == 2
    assert any("busy computing" in n for n in outcome.notes)


def test_with_a_step_the_fewest_workers_that_keep_it_fed_win() -> None:
    # Each worker makes 40 samples/s; the step consumes 100 samples/s.
    runner = CurveRunner({w: min(40.0 * w, 100.0) if w else 30.0 for w in range(9)})
    outcome = _search(runner, cpus=8, step=100.0).run()
    assert outcome.best is not None and outcome.best.config.num_workers == 3
    assert any("fed" in n for n in outcome.notes)


def test_a_deeper_prefetch_is_kept_only_when_it_pays() -> None:
    runner = CurveRunner({0: 50, 1: 100, 2: 200}, prefetch_gain={4: 1.2, 8: 1.21},
                         cpu_per_worker=0.9)
    outcome = _search(runner).run()
    assert outcome.best is not None and outcome.best.config.prefetch_factor == 4
    flat = CurveRunner({0: 50, 1: 100, 2: 200}, cpu_per_worker=0.9)
    outcome = _search(flat).run()
    assert outcome.best is not None and outcome.best.config.prefetch_factor == 1  # as fast, half the memory


def test_a_sweep_that_would_stop_measures_both_again_first() -> None:
    runner = CurveRunner({0: 100, 1: 180, 2: 182, 4: 183}, cpu_per_worker=0.9)
    _search(runner, cpus=4).run()
    again = {t.config.num_workers: t.rounds for t in runner.trials if t.rounds > 1}
    assert again == {1: 2, 2: 2}  # the stop at 2 workers was confirmed before it was taken
