"""``pitstop.tune.loader()``: measure DataLoader settings on the user's dataset, pick one.

Ties the parts together: the dataset checked (:mod:`.factory`), one batch made in
this process first (:class:`.loader_trials.Preflight`), the consumer chosen (the
loader alone, the copy to the GPU, or the user's training step), the step's own rate
measured when there is a step, then the search (:mod:`.search`) or, on request, the
full grid, and the result with everything that was measured.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from pitstop.bench.measure import Measurement
from pitstop.errors import UsageError
from pitstop.train.loader import MachineFacts, gather_machine_facts
from pitstop.train.prefetch import resolve_device, to_device
from pitstop.tune import interrupt
from pitstop.tune.budget import Budget
from pitstop.tune.factory import DatasetTarget, as_dataset_target, as_model_target
from pitstop.tune.loader_trials import (
    BatchCollateError,
    Consumer,
    CountingConsumer,
    DatasetItemError,
    LoaderConfig,
    LoaderTrial,
    LoaderTrials,
    Preflight,
    StepError,
    user_error_text,
)
from pitstop.tune.measure import TrialPlan, plan_for_budget, robust_rate
from pitstop.tune.model_trials import BuiltStep, ModelConfig, StepConsumer, step_rate
from pitstop.tune.progress import Reporter, SilentReporter
from pitstop.tune.search import LoaderSearch, SearchDomain, run_grid, untried

DEFAULT_BATCH_SIZE = 32
# Trials the budget is planned for (a search usually needs 6-12).
EXPECTED_TRIALS = 10


@dataclass
class LoaderTuneResult:
    """Everything a loader tune measured, and what it chose."""

    choice: LoaderTrial | None
    trials: list[LoaderTrial]
    notes: list[str]
    domain: SearchDomain
    batch_size: int
    device: str
    consumer: str
    step: Measurement | None
    seconds: float
    preflight: Preflight
    facts: MachineFacts
    epoch_batches: int
    strategy: str = "search"
    interrupted: bool = False
    yours: LoaderTrial | None = None
    plan: TrialPlan = field(default_factory=TrialPlan)

    @property
    def settings(self) -> dict[str, Any] | None:
        """The chosen settings as ``pitstop-loader.json`` holds them."""
        return self.choice.config.settings() if self.choice is not None else None

    @property
    def step_rate(self) -> float | None:
        """The step's own samples/s: the best of its measurements (at the start and after
        each trial; a busy machine only ever slows a step down)."""
        if self.step is None:
            return None
        alone = [t.step_alone for t in self.trials if t.step_alone is not None]
        return max([robust_rate(self.step), *alone])

    @property
    def grid_size(self) -> int:
        return len(self.domain.grid())

    @property
    def untried(self) -> int:
        return untried(self.domain, self.trials)

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "interrupted": self.interrupted,
            "choice": self.choice.as_dict() if self.choice is not None else None,
            "batch_size": self.batch_size, "device": self.device, "consumer": self.consumer,
            "step_samples_per_s": self.step.summary() if self.step is not None else None,
            "step_rate": round(self.step_rate, 3) if self.step_rate is not None else None,
            "epoch_batches": self.epoch_batches,
            "search": {"seconds": round(self.seconds, 3), "trials": len(self.trials),
                       "grid_size": self.grid_size, "untried": self.untried,
                       "notes": list(self.notes), "repeat_seconds": self.plan.repeat_seconds},
            "domain": {"max_workers": self.domain.max_workers,
                       "io_max_workers": self.domain.io_max_workers,
                       "prefetch_factors": list(self.domain.prefetches),
                       "pin_memory": list(self.domain.pin_choices),
                       "start_methods": [m or "default" for m in self.domain.start_methods]},
            "machine": {"cpus": self.facts.cpus, "cpus_why": self.facts.cpus_why,
                        "local_world_size": self.facts.local_world_size,
                        "ram_available": self.facts.ram_available, "shm_free": self.facts.shm_free},
            "batch": {"bytes": self.preflight.batch_bytes, "bytes_how": self.preflight.bytes_how,
                      "seconds_in_one_process": round(self.preflight.seconds, 6)},
            "yours": self.yours.as_dict() if self.yours is not None else None,
            "trials": [t.as_dict() for t in self.trials],
        }

    def save(self, path: Any) -> Any:
        """Write ``pitstop-loader.json`` (what ``pitstop.train.loader()`` reads), with the
        trials as its evidence. Nothing is written when no trial finished."""
        from pitstop.train.loader import save_config

        if self.settings is None:
            raise ValueError("no configuration was measured: nothing to save")
        return save_config(path, self.settings, measured={"tool": "pitstop tune loader",
                                                          "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                          **self.as_dict()})


def _start_methods(target: DatasetTarget) -> tuple[str | None, ...]:
    """Start methods worth comparing: only where they can matter. With this Python's
    default being ``fork`` (Linux up to 3.13) every other method only adds start-up
    cost, so none is tried; where the default is something else (3.14's forkserver),
    fork is compared with it; a context the user chose is compared too."""
    default = multiprocessing.get_start_method(allow_none=True) or \
        multiprocessing.get_context().get_start_method()
    methods: list[str | None] = [None]
    if default != "fork" and "fork" in multiprocessing.get_all_start_methods():
        methods.append("fork")
    user = target.loader_kwargs.get("multiprocessing_context")
    if isinstance(user, str) and user not in methods and user != default:
        methods.append(user)
    return tuple(methods)


def _user_config(target: DatasetTarget) -> LoaderConfig | None:
    given = target.user_settings
    if not given:
        return None
    ctx = given.get("multiprocessing_context")
    return LoaderConfig(int(given.get("num_workers") or 0), given.get("prefetch_factor"),
                        bool(given.get("pin_memory", False)),
                        bool(given.get("persistent_workers", False)),
                        ctx if isinstance(ctx, str) else None).normalised()


def user_errors(named: str, model_named: str = "model") -> Any:
    """Turn a dataset, collate or step failure into a one-line usage error."""
    import contextlib

    @contextlib.contextmanager
    def wrap() -> Any:
        try:
            yield
        except (DatasetItemError, BatchCollateError) as err:
            raise UsageError(f"{named}: {user_error_text(err)}") from None
        except StepError as err:
            raise UsageError(f"{model_named}: the training step on a batch from the loader "
                             f"raised {err}") from None

    return wrap()


@interrupt.guard
def tune_loader(dataset: Any, batch_size: int | None = None, *, device: str | torch.device = "auto",
                budget: float = 60.0, model: Any = None, max_workers: int | None = None,
                strategy: str = "search", reporter: Reporter | None = None,
                facts: MachineFacts | None = None, repeat_seconds: float | None = None,
                named: str = "dataset", model_named: str = "model", seed: int = 0,
                step_consumer: Consumer | None = None) -> LoaderTuneResult:
    """Measure DataLoader settings for ``dataset`` and return the cheapest fast one.

    Args:
        dataset: a map-style Dataset, or a dict of DataLoader arguments holding one.
        batch_size: samples per batch (default: the dict's ``batch_size``, else 32).
        device: where batches go (``"cuda"`` adds pinned memory to the search and the
            copy to the GPU to every trial).
        budget: seconds the search may spend (trials are sized to fit about 10).
        model: optional: what a model factory returns (see :mod:`pitstop.tune.factory`).
            The objective is then the whole step: each trial runs the training step on
            the loader's batches, and the cheapest settings that keep the step fed win.
        max_workers: the largest worker count tried (default: the CPUs this process
            may use, further when the workers turn out to wait on I/O).
        strategy: ``"search"`` or ``"grid"`` (measure every configuration: slow; the
            reference the search is judged against).
        facts: the machine's CPU count and free memory (default: read now).
        repeat_seconds: length of one timed repeat (default: from the budget).
    """
    target = as_dataset_target(dataset, named=named)
    if strategy not in ("search", "grid"):
        raise ValueError(f"strategy must be 'search' or 'grid', got {strategy!r}")
    size = batch_size or target.batch_size or DEFAULT_BATCH_SIZE
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise UsageError(f"batch size must be a positive integer, got {size!r}")
    try:
        target_device = resolve_device(device)
    except ValueError as err:
        raise UsageError(str(err)) from None
    reporter = reporter or SilentReporter()
    facts = facts or gather_machine_facts()
    cpus = max(1, facts.cpus // facts.local_world_size)
    clock = Budget(budget)
    plan = (TrialPlan(repeat_seconds=repeat_seconds) if repeat_seconds is not None
            else plan_for_budget(budget, trials=EXPECTED_TRIALS))
    started = time.perf_counter()

    built: BuiltStep | None = None
    consumer: Consumer
    owned: StepConsumer | None = None
    if step_consumer is not None:
        consumer = step_consumer
    elif model is not None:
        model_target = as_model_target(model, named=model_named)
        from pitstop.train.precision import choose_precision

        precision = choose_precision(target_device).precision
        built = BuiltStep(model_target, ModelConfig(size, precision=precision), target_device)
        owned = StepConsumer(built, size)
        consumer = owned
    else:
        consumer = CountingConsumer(target_device, size)

    try:
        with user_errors(named, model_named):
            runner = LoaderTrials(target, size, consumer=consumer, facts=facts, plan=plan,
                                  budget=clock, reporter=reporter, seed=seed)
        need = runner.min_trial_seconds()
        if clock.seconds < need:
            raise UsageError(
                f"budget {clock.seconds:g} s is too small for one trial: one batch takes "
                f"{runner.preflight.seconds:.2f} s to make in one process, so a trial needs "
                f"about {need:.1f} s; give --budget {max(2 * need, need + 5):.0f}s or more")
        step: Measurement | None = None
        if isinstance(consumer, StepConsumer):
            with user_errors(named, model_named):
                try:
                    reporter.trial_started("the training step alone (batch on the device)",
                                           plan.expected_seconds(1.0))
                    device_batch = to_device(runner.preflight.batch, target_device)
                    step = step_rate(consumer.built, device_batch, plan=plan, budget=clock,
                                     reporter=reporter)
                except (KeyboardInterrupt, UsageError):
                    raise
                except Exception as err:
                    raise StepError(err) from err
            reporter.trial_finished(f"step alone: {step.median:,.1f} samples/s (min "
                                    f"{step.min:,.1f}, max {step.max:,.1f}) with the batch "
                                    f"already on {target_device}")
            probe_plan = TrialPlan(repeat_seconds=plan.repeat_seconds / 2, repeats=2,
                                   max_repeats=2)
            built_step = consumer.built

            def probe() -> float:
                return robust_rate(step_rate(built_step, device_batch, plan=probe_plan,
                                             budget=clock.local(), warmup=1))

            runner.step_probe = probe
        domain = SearchDomain.for_machine(cpus, cuda=target_device.type == "cuda",
                                          max_workers=max_workers,
                                          start_methods=_start_methods(target))
        yours = _user_config(target)
        search = LoaderSearch(runner, domain, budget=clock,
                              step_rate=robust_rate(step) if step is not None else None,
                              pin_default=target_device.type == "cuda", user_config=yours)
        interrupted = False
        with user_errors(named, model_named):
            if strategy == "grid":
                try:
                    run_grid(runner, domain, budget=clock)
                except KeyboardInterrupt:
                    interrupted = True
                choice = search.choice()
                notes = ["full grid: every configuration measured"]
            else:
                outcome = search.run()
                choice, notes, interrupted = outcome.best, outcome.notes, outcome.interrupted
        yours_trial = next((t for t in runner.trials if t.role == "yours"), None)
        return LoaderTuneResult(
            choice=choice, trials=runner.trials, notes=notes, domain=domain, batch_size=size,
            device=str(target_device), consumer=consumer.describe(), step=step,
            seconds=time.perf_counter() - started, preflight=runner.preflight, facts=facts,
            epoch_batches=runner.epoch_batches, strategy=strategy, interrupted=interrupted,
            yours=yours_trial, plan=plan)
    finally:
        if owned is not None:
            owned.close()
