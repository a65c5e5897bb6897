"""One training-step configuration, built from scratch and timed: a *model trial*.

A configuration is a precision (fp32, TF32, bf16 or fp16 autocast, fp16 with a
GradScaler), a memory format, the cuDNN autotuner switch, an optimizer
implementation (for-loop, foreach, fused), an optional ``torch.compile`` mode and a
batch size. Each trial deep-copies the user's untouched model (same initial weights
every time), builds the optimizer and a :class:`pitstop.train.TrainStep` with those
settings, and trains on one fixed batch already on the device, so that the rate is
the step's own (the *ideal*: no loader).

The first :data:`GUARD_STEPS` steps are the warm-up; their losses, read on the host,
are the correctness guard: an option whose losses drift from the fp32 reference's by
more than the tolerance is rejected, with both series shown. Compile time is the
warm-up time beyond what the same steps take once compiled.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import math
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from pitstop.bench.ladder import CompileTimeout as TrialTimeout
from pitstop.bench.ladder import time_bound as time_limit
from pitstop.bench.measure import Measurement, Plan, device_sync, measure
from pitstop.train import TrainStep
from pitstop.train.microbatch import batch_size_of, is_out_of_memory
from pitstop.train.prefetch import map_tensors, to_device
from pitstop.tune import interrupt
from pitstop.tune.budget import Budget, format_seconds
from pitstop.tune.factory import ModelTarget, loss_of
from pitstop.tune.measure import TrialPlan, robust_rate, timed_repeats, warm_up
from pitstop.tune.progress import Reporter, SilentReporter
from pitstop.tune.reasons import first_line

GUARD_STEPS = 4
DEFAULT_TOLERANCE = 0.05
# A trial may run past the budget by this share of it before it is cut off.
GRACE = 0.1


@dataclass(frozen=True)
class ModelConfig:
    """The settings of one training-step trial."""

    batch_size: int
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast; fp16 with a GradScaler)
    tf32: bool = False
    channels_last: bool = False
    cudnn_benchmark: bool = False
    optimizer_impl: str = "default"  # default | for-loop | foreach | fused
    compile_mode: str | None = None  # None | default | reduce-overhead | max-autotune

    def label(self) -> str:
        parts = [self.precision + ("+tf32" if self.tf32 else "")]
        if self.channels_last:
            parts.append("channels_last")
        if self.cudnn_benchmark:
            parts.append("cudnn.benchmark")
        if self.optimizer_impl != "default":
            parts.append(f"optimizer {self.optimizer_impl}")
        if self.compile_mode:
            parts.append(f"compile {self.compile_mode}")
        parts.append(f"batch {self.batch_size}")
        return ", ".join(parts)

    def settings(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "precision": self.precision, "tf32": self.tf32,
                "channels_last": self.channels_last, "cudnn_benchmark": self.cudnn_benchmark,
                "optimizer_impl": self.optimizer_impl, "compile_mode": self.compile_mode}


@contextlib.contextmanager
def global_switches(config: ModelConfig) -> Iterator[None]:
    """Set the process-wide switches of ``config`` (cudnn.benchmark, TF32) for the block,
    and put the previous values back after it."""
    before = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32,
              torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = config.tf32
    torch.backends.cudnn.allow_tf32 = config.tf32
    try:
        yield
    finally:
        (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32,
         torch.backends.cudnn.allow_tf32) = before


# ---------------------------------------------------------------- batches

def resize_batch(batch: Any, n: int) -> Any:
    """``batch`` with ``n`` samples: its tensors cut, or tiled and cut, along dim 0."""
    size = batch_size_of(batch)

    def fit(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 0 or t.shape[0] != size:
            return t
        if n <= size:
            return t[:n]
        reps = math.ceil(n / size)
        return t.repeat(reps, *([1] * (t.dim() - 1)))[:n]

    return map_tensors(batch, fit)


def make_batch(target: ModelTarget, n: int) -> Any:
    """A batch of ``n`` samples from the target's batch factory, or its fixed batch resized."""
    if target.batch_fn is not None:
        return target.batch_fn(n)
    if target.batch is None:
        raise ValueError("the model factory gave neither a batch nor a batch_fn")
    return resize_batch(target.batch, n)


def split_batch(target: ModelTarget, batch: Any) -> tuple[Any, Any]:
    """``(inputs, targets)`` for :class:`TrainStep`: the pair when a loss_fn is given,
    else the whole batch as the model's inputs (it computes its own loss)."""
    if target.loss_fn is None:
        return batch, None
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    if isinstance(batch, dict) and len(batch) == 2 and {"inputs", "targets"} <= set(batch):
        return batch["inputs"], batch["targets"]
    raise ValueError(f"with a loss_fn the batch must be (inputs, targets); got "
                     f"{type(batch).__name__}" + (f" of {len(batch)} items"
                                                   if isinstance(batch, (tuple, list)) else ""))


def is_conv_model(model: torch.nn.Module) -> bool:
    return any(isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)) for m in model.modules())


def _channels_last(batch: Any) -> Any:
    def conv(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point() and t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        return t

    return map_tensors(batch, conv)


# ---------------------------------------------------------------- optimizers

def optimizer_factory(target: ModelTarget) -> Callable[..., torch.optim.Optimizer]:
    if target.optimizer is not None:
        return target.optimizer

    def adamw(params: Any, **extra: Any) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=1e-3, **extra)

    return adamw


def optimizer_class(factory: Callable[..., Any]) -> Any:
    """The optimizer class behind a factory (a class, or a functools.partial of one)."""
    func = getattr(factory, "func", factory)
    return func if inspect.isclass(func) else None


def optimizer_impls(factory: Callable[..., Any], device: torch.device) -> dict[str, str | None]:
    """Which of foreach / fused the optimizer offers here, each with None or why not."""
    cls = optimizer_class(factory)
    out: dict[str, str | None] = {}
    if cls is None:
        params: dict[str, Any] = {}
        with contextlib.suppress(TypeError, ValueError):
            params = dict(inspect.signature(factory).parameters)
        accepts_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for name in ("foreach", "fused"):
            out[name] = None if accepts_kwargs or name in params else (
                f"the optimizer factory takes no {name}= argument")
        if cls is None and not accepts_kwargs:
            return out
    else:
        params = dict(inspect.signature(cls).parameters)
        for name in ("foreach", "fused"):
            out[name] = None if name in params else f"{cls.__name__} has no {name}= option"
    return out


def build_optimizer(factory: Callable[..., Any], params: Any, impl: str) -> torch.optim.Optimizer:
    extra: dict[str, Any] = {}
    if impl == "foreach":
        extra = {"foreach": True}
    elif impl == "fused":
        extra = {"fused": True}
    elif impl == "for-loop":
        extra = {"foreach": False}
    opt = factory(params, **extra)
    if not isinstance(opt, torch.optim.Optimizer):
        raise ValueError(f"the optimizer factory returned {type(opt).__name__}, not a "
                         f"torch.optim.Optimizer")
    return opt


# ---------------------------------------------------------------- a built step

class BuiltStep:
    """A fresh copy of the model with ``config`` applied, its optimizer and TrainStep."""

    def __init__(self, target: ModelTarget, config: ModelConfig, device: torch.device) -> None:
        self.target = target
        self.config = config
        self.device = device
        model = copy.deepcopy(target.model).to(device)
        if config.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.optimizer = build_optimizer(optimizer_factory(target), model.parameters(),
                                         config.optimizer_impl)
        runnable: Any = model
        if config.compile_mode is not None:
            mode = None if config.compile_mode == "default" else config.compile_mode
            runnable = torch.compile(model, mode=mode)
        loss_fn = target.loss_fn if target.loss_fn is not None else loss_of
        self.step = TrainStep(runnable, self.optimizer, loss_fn=loss_fn,
                              precision=config.precision)  # type: ignore[arg-type]

    def __call__(self, batch: Any) -> torch.Tensor:
        if self.config.channels_last:
            batch = _channels_last(batch)
        inputs, targets = split_batch(self.target, batch)
        return self.step(inputs, targets)

    def close(self) -> None:
        self.step.close()


class StepConsumer:
    """The user's training step as the consumer of a loader trial."""

    def __init__(self, built: BuiltStep, batch_size: int) -> None:
        self.built = built
        self.device = built.device
        self.batch_size = batch_size
        self._sync = device_sync(built.device)
        self._switches = global_switches(built.config)
        self._switches.__enter__()

    def consume(self, batch: Any) -> int:
        if self.device.type != "cpu":
            batch = to_device(batch, self.device)
        self.built(batch)
        try:
            return batch_size_of(batch)
        except ValueError:
            return self.batch_size

    def sync(self) -> None:
        self._sync()

    def describe(self) -> str:
        return f"the training step ({self.built.config.label()})"

    def close(self) -> None:
        self._switches.__exit__(None, None, None)
        self.built.close()


# ---------------------------------------------------------------- the trial record

@dataclass
class ModelTrial:
    config: ModelConfig
    group: str  # reference | precision | layout | cudnn | optimizer | batch | compile
    status: str  # measured | rejected | skipped | failed | not applicable | oom | interrupted
    reason: str | None = None
    measurement: Measurement | None = None
    losses: list[float] = field(default_factory=list)
    warmup_s: float | None = None
    compile_s: float | None = None
    peak_bytes: int | None = None
    peak_how: str | None = None
    seconds: float = 0.0
    verdict: str | None = None  # kept | not kept | not recommended | ... (set by the search)
    paired_gain: float | None = None  # median ratio to the kept configuration, timed in turns

    @property
    def measured(self) -> bool:
        return self.status == "measured" and self.measurement is not None

    @property
    def rate(self) -> float:
        return self.measurement.median if self.measurement is not None else 0.0

    def as_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {"config": self.config.settings(), "label": self.config.label(),
                "group": self.group, "status": self.status, "reason": self.reason,
                "verdict": self.verdict,
                "samples_per_s": m.summary() if m is not None else None,
                "losses": [round(x, 6) for x in self.losses],
                "warmup_s": _r(self.warmup_s), "compile_s": _r(self.compile_s),
                "peak_bytes": self.peak_bytes, "peak_how": self.peak_how,
                "paired_gain": _r(self.paired_gain), "seconds": _r(self.seconds)}


def _r(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


# ---------------------------------------------------------------- running trials

@dataclass
class Kept:
    """The best configuration so far, built and warm, for paired comparisons."""

    trial: ModelTrial
    built: BuiltStep


class ModelTrials:
    """Runs model trials for one target on one device."""

    def __init__(self, target: ModelTarget, device: torch.device, *, plan: TrialPlan,
                 budget: Budget, reporter: Reporter | None = None,
                 agree: Callable[[list[float], str], list[float]] | None = None,
                 bounded: bool = True) -> None:
        self.target = target
        self.device = device
        self.plan = plan
        self.budget = budget
        self.reporter = reporter or SilentReporter()
        self.trials: list[ModelTrial] = []
        self._agree = agree or (lambda values, op: values)
        # Each trial is cut off when the budget (plus GRACE) runs out, under torchrun
        # too: a trial holds no collective (see _run), so a rank cut off mid-trial
        # leaves none waiting, and the outcome is agreed afterwards (_agree_on).
        self._bounded = bounded
        self._sync = device_sync(device)
        self._batches: dict[int, Any] = {}
        self.kept: Kept | None = None
        self._candidate: BuiltStep | None = None

    def batch(self, n: int) -> Any:
        if n not in self._batches:
            torch.manual_seed(0)
            self._batches = {n: to_device(make_batch(self.target, n), self.device)}
        return self._batches[n]

    def record(self, trial: ModelTrial) -> ModelTrial:
        self.trials.append(trial)
        return trial

    def estimated_seconds(self, config: ModelConfig) -> float:
        """What a trial should cost, from those so far (the largest of all ranks')."""
        done = [t.seconds for t in self.trials if t.measured and t.config.compile_mode is None]
        local = (float(sorted(done)[len(done) // 2]) if done
                 else self.plan.expected_seconds(warmup_seconds=1.0))
        return self._agree([local], "max")[0]

    def measure(self, config: ModelConfig, group: str, *, paired: bool = False) -> ModelTrial:
        """Build ``config`` from scratch and time it on a fixed batch on the device.

        ``paired``: time it in alternation with the kept configuration (see
        :meth:`adopt`), repeat against repeat, so that both see the same machine, and
        record the median ratio as ``trial.paired_gain``; the candidate's build is
        held until :meth:`adopt` or :meth:`drop_candidate`.

        The trial is abandoned (status ``skipped``) when it runs past what the budget
        has left, plus :data:`GRACE` of the budget."""
        interrupt.check()
        bound = self.budget.left() + GRACE * self.budget.seconds
        trial = self.record(ModelTrial(config, group, "measured"))
        index = len(self.trials)
        against = self.kept if paired and self.kept is not None and \
            self.kept.trial.config.batch_size == config.batch_size else None
        self.reporter.trial_started(f"trial {index} {group}: {config.label()}",
                                    self.estimated_seconds(config) * (3 if config.compile_mode else 1))
        started = time.perf_counter()
        built: BuiltStep | None = None
        oom = False
        try:
            with time_limit(bound if self._bounded else 0):
                built = self._run(trial, against)
        except KeyboardInterrupt:
            trial.status, trial.reason = "interrupted", "Ctrl-C while this trial ran"
            raise
        except TrialTimeout:
            trial.status = "skipped"
            trial.reason = (("torch.compile did not finish" if config.compile_mode and
                             trial.warmup_s is None else "did not finish")
                            + f" within the {bound:.0f} s the budget had left")
        except Exception as err:
            if is_out_of_memory(err):
                oom = True
                trial.status, trial.reason = "oom", "out of memory"
            else:
                trial.status, trial.reason = "failed", first_line(err)
        finally:
            with interrupt.deferred():
                if trial.status != "measured":
                    trial.measurement = None
                    trial.paired_gain = None
                if built is not None and (not paired or trial.status != "measured"):
                    built.close()
                    built = None
                self._candidate = built
                built = None
                self._free()
                if config.compile_mode:
                    _reset_dynamo()
                trial.seconds = time.perf_counter() - started
        # Under torchrun every rank must see the same outcome: any rank's OOM or
        # failure is everyone's, and the slowest rank's rate is the group's.
        self._agree_on(trial, oom)
        if trial.status != "measured":
            self.drop_candidate()
        if trial.status == "oom" and against is not None:
            # Two builds at once did not fit: free the kept one, measure this one alone.
            self.trials.remove(trial)
            self.release_kept()
            return self.measure(config, group, paired=paired)
        self.reporter.trial_finished(self.describe(index, trial))
        return trial

    def _run(self, trial: ModelTrial, against: Kept | None) -> BuiltStep:
        """Build, warm up (the loss guard's steps) and time one configuration."""
        config = trial.config
        batch = self.batch(config.batch_size)
        _reset_peak(self.device)
        rss_before = _max_rss()
        with global_switches(config):
            torch.manual_seed(0)
            built = BuiltStep(self.target, config, self.device)
            t0 = time.perf_counter()
            for _ in range(GUARD_STEPS):
                loss = built(batch)
                trial.losses.append(float(loss.float().item()))
                self.reporter.tick()
            self._sync()
            trial.warmup_s = time.perf_counter() - t0
            run = self._runner(built, batch, config.batch_size)
            rate = warm_up(run, steps=2, sync=self._sync, tick=self.reporter.tick)
            steps = self.plan.steps_for(rate)
        trial.peak_bytes, trial.peak_how = _peak(self.device, rss_before)
        if against is None:
            with global_switches(config):
                # No collective inside a trial: a rank that ran out of memory never
                # gets here, and the others must not wait for it.
                timed = timed_repeats(run, steps=steps, plan=self.plan, sync=self._sync,
                                      tick=self.reporter.tick, budget=self.budget.local())
            trial.measurement = timed.measurement
        else:
            trial.measurement, trial.paired_gain = self._paired(trial, run, steps, against, batch)
        per_step = config.batch_size / trial.measurement.median
        if config.compile_mode:
            trial.compile_s = max(0.0, trial.warmup_s - GUARD_STEPS * per_step)
        return built

    def _runner(self, built: BuiltStep, batch: Any, size: int) -> Callable[[int, Callable[[], None]], int]:
        def run(n: int, tick: Callable[[], None]) -> int:
            for _ in range(n):
                built(batch)
                tick()
                interrupt.check()
            return n * size

        return run

    def _paired(self, trial: ModelTrial, run: Callable[[int, Callable[[], None]], int],
                steps: int, against: Kept, batch: Any) -> tuple[Measurement, float]:
        """Alternate repeats of the candidate and the kept configuration (order swapped
        each round); the gain is the median of the per-round ratios."""
        other = self._runner(against.built, batch, against.trial.config.batch_size)
        other_steps = self.plan.steps_for(robust_rate(against.trial.measurement)  # type: ignore[arg-type]
                                          / against.trial.config.batch_size)
        mine: list[float] = []
        theirs: list[float] = []
        rounds = self.plan.repeats
        local = self.budget.local()
        r = 0
        while r < rounds:
            round_start = time.perf_counter()
            pair = [(trial.config, run, steps, mine), (against.trial.config, other, other_steps,
                                                       theirs)]
            for cfg, fn, n, out in (pair if r % 2 == 0 else pair[::-1]):
                with global_switches(cfg):
                    m = measure(fn, Plan(warmup=0, steps=n, repeats=1), sync=self._sync,
                                tick=self.reporter.tick)
                out.extend(m.rates)
            r += 1
            ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
            wide = (max(ratios) - min(ratios)) / statistics.median(ratios)
            if r == rounds and wide > self.plan.wide_spread and rounds < self.plan.max_repeats \
                    and local.affords(time.perf_counter() - round_start):
                rounds += 1
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        size = trial.config.batch_size
        m = Measurement(rates=mine, samples=size * steps * len(mine),
                        timed_seconds=sum(size * steps / x for x in mine), warmup_seconds=0.0,
                        steps=steps * len(mine))
        return m, float(statistics.median(ratios))

    # -- the configuration kept alive for paired comparisons
    def adopt(self, trial: ModelTrial) -> None:
        """Keep the last candidate's build as the configuration the next paired trials
        are timed against (closing the one kept before)."""
        if self._candidate is None or not trial.measured:
            return
        self.release_kept()
        self.kept = Kept(trial, self._candidate)
        self._candidate = None

    def drop_candidate(self) -> None:
        if self._candidate is not None:
            self._candidate.close()
            self._candidate = None
            self._free()

    def release_kept(self) -> None:
        """Free the kept build (before trials that need all the memory)."""
        if self.kept is not None:
            self.kept.built.close()
            self.kept = None
            self._free()

    def _agree_on(self, trial: ModelTrial, oom: bool) -> None:
        rate = trial.rate if trial.measured else 0.0
        # Every rank takes the worst outcome of any: out of memory, then failed, then
        # cut off by the budget (a rank that finished must not keep a trial another
        # could not finish in time: a data-parallel run waits for its slowest rank).
        mine = [1.0 if oom else 0.0,
                1.0 if trial.status == "failed" else 0.0,
                1.0 if trial.status == "skipped" else 0.0]
        flags = self._agree(mine, "max")
        worst = ("oom" if flags[0] > 0 else "failed" if flags[1] > 0
                 else "skipped" if flags[2] > 0 else None)
        if worst is not None and trial.status != worst and trial.status != "interrupted":
            trial.status = worst
            trial.reason = {"oom": "out of memory on another rank",
                            "failed": "failed on another rank",
                            "skipped": "did not finish in time on another rank"}[worst]
            trial.measurement = None
            trial.paired_gain = None
        if trial.measured and trial.measurement is not None:
            slowest = self._agree([rate], "min")[0]
            if slowest < rate and slowest > 0:
                scale = slowest / rate
                trial.measurement.rates = [r * scale for r in trial.measurement.rates]
            peak = self._agree([float(trial.peak_bytes or -1)], "max")[0]
            trial.peak_bytes = int(peak) if peak > 0 else None
            gain = self._agree([trial.paired_gain if trial.paired_gain is not None else -1.0],
                               "min")[0]
            trial.paired_gain = gain if gain > 0 else None

    def _free(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # noqa: LT001 (between trials, not per step)

    def describe(self, index: int, trial: ModelTrial) -> str:
        head = f"trial {index} {trial.group}: {trial.config.label()}: "
        if not trial.measured or trial.measurement is None:
            return head + f"{trial.status}" + (f" ({trial.reason})" if trial.reason else "")
        m = trial.measurement
        text = f"{m.median:,.1f} samples/s (min {m.min:,.1f}, max {m.max:,.1f})"
        if trial.paired_gain is not None:
            text += f", {trial.paired_gain:.2f}x the kept configuration timed in turns"
        if trial.compile_s is not None:
            text += f", compile {format_seconds(trial.compile_s)}"
        if trial.peak_bytes:
            text += f", peak {trial.peak_bytes / 2**20:,.0f} MiB"
        return head + text + f" [{format_seconds(trial.seconds)}]"


def step_rate(built_step: BuiltStep, batch: Any, *, plan: TrialPlan, budget: Budget,
              reporter: Reporter | None = None, warmup: int = GUARD_STEPS) -> Measurement:
    """Samples/s of ``built_step`` on one batch already on its device (the ideal)."""
    reporter = reporter or SilentReporter()
    sync = device_sync(built_step.device)
    n = batch_size_of(batch)

    def run(k: int, tick: Callable[[], None]) -> int:
        for _ in range(k):
            built_step(batch)
            tick()
            interrupt.check()
        return k * n

    with global_switches(built_step.config):
        rate = warm_up(run, steps=max(1, warmup), sync=sync, tick=reporter.tick)
        return timed_repeats(run, steps=plan.steps_for(rate), plan=plan, sync=sync,
                             tick=reporter.tick, budget=budget).measurement


def loss_drift(losses: list[float], reference: list[float]) -> float:
    """The largest relative difference between two loss series (inf if not finite)."""
    if not losses or len(losses) != len(reference):
        return math.inf
    worst = 0.0
    for a, b in zip(losses, reference, strict=True):
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf
        worst = max(worst, abs(a - b) / max(abs(b), 1e-6))
    return worst


def with_config(config: ModelConfig, **changes: Any) -> ModelConfig:
    return replace(config, **changes)


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _max_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _peak(device: torch.device, rss_before: int) -> tuple[int | None, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated"
    grown = _max_rss() - rss_before
    return (grown if grown > 0 else None,
            "growth of this process's peak RSS (CPU; approximate: only a new peak shows)")


def _reset_dynamo() -> None:
    with contextlib.suppress(Exception):
        import torch._dynamo

        torch._dynamo.reset()
