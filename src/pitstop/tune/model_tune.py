"""``pitstop.tune.model()``: measure training-step options on the user's model, pick some.

The options are tried one group at a time, each on top of the best configuration so
far (a coordinate search, like the bench's ladder, instead of every combination):

1. the **reference**: fp32 without TF32, no autotuner, the optimizer's default;
2. **cuDNN autotuner** (``cudnn.benchmark``; CUDA, models with convolutions or RNNs);
3. **TF32** matmuls and convolutions (CUDA, compute capability 8.0+);
4. **precision**: bf16 autocast, fp16 autocast with a GradScaler (CUDA);
5. **channels_last** (models with 2-D/3-D convolutions);
6. **optimizer implementation**: foreach, fused;
7. **batch size** (:mod:`.batch_size`);
8. **torch.compile** modes, at the chosen batch size, each recommended only when the
   time it saves over ``steps`` training steps exceeds the time it takes to compile.

An option is kept when it is at least :data:`KEEP` faster than the best so far and
passes the correctness guard: its first losses stay within ``tolerance`` (relative)
of the fp32 reference's (for compile: of the same configuration uncompiled).
Options that cannot run here (no CUDA, no convolution, an old GPU, no compiler) are
listed with the reason, never faked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import psutil
import torch

from pitstop.errors import UsageError
from pitstop.train.precision import cpu_bf16_flags
from pitstop.train.prefetch import resolve_device
from pitstop.tune import interrupt
from pitstop.tune.batch_size import HEADROOM, BatchSearch, search_batch_size
from pitstop.tune.budget import Budget, format_seconds
from pitstop.tune.factory import ModelTarget, as_model_target
from pitstop.tune.groups import SKIPPABLE
from pitstop.tune.measure import TrialPlan, plan_for_budget, robust_rate
from pitstop.tune.memory import mib
from pitstop.tune.model_trials import (
    DEFAULT_TOLERANCE,
    ModelConfig,
    ModelTrial,
    ModelTrials,
    is_conv_model,
    loss_drift,
    make_batch,
    optimizer_factory,
    optimizer_impls,
)
from pitstop.tune.progress import Reporter, SilentReporter

KEEP = 0.03
EXPECTED_TRIALS = 10
DEFAULT_STEPS = 1000


@dataclass
class CompileAdvice:
    mode: str
    recommended: bool
    why: str
    speedup: float | None = None
    saved_s: float | None = None
    compile_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "recommended": self.recommended, "why": self.why,
                "speedup": self.speedup, "saved_s": self.saved_s, "compile_s": self.compile_s}


def compile_advice(mode: str, *, base_rate: float, compiled_rate: float, compile_s: float,
                   steps: int, batch_size: int) -> CompileAdvice:
    """Is compiling worth it over a run of ``steps`` steps? Only if the time it saves
    exceeds the time it takes, and it is :data:`KEEP` faster at all."""
    speedup = compiled_rate / base_rate
    per_step_saved = batch_size / base_rate - batch_size / compiled_rate
    saved = steps * per_step_saved
    recommended = speedup >= 1 + KEEP and saved > compile_s
    if speedup < 1 + KEEP:
        why = (f"{speedup:.2f}x the uncompiled step: no faster (needs +{KEEP:.0%}); "
               f"compiling took {format_seconds(compile_s)}")
    else:
        why = (f"{speedup:.2f}x: over {steps:,} steps it saves {format_seconds(max(0.0, saved))}, "
               f"compiling takes {format_seconds(compile_s)}: "
               + ("worth it" if recommended else "not worth it for a run this long"))
        if not recommended and per_step_saved > 0:
            why += f" (it pays after {int(compile_s / per_step_saved) + 1:,} steps)"
    return CompileAdvice(mode, recommended, why, round(speedup, 4), round(saved, 3),
                         round(compile_s, 3))


@dataclass
class ModelTuneResult:
    """Everything a model tune measured, and what it chose."""

    reference: ModelTrial | None
    best: ModelTrial | None
    trials: list[ModelTrial]
    not_tried: list[tuple[str, str]]
    notes: list[str]
    device: str
    steps: int
    tolerance: float
    batch: BatchSearch | None
    compile: list[CompileAdvice]
    seconds: float
    interrupted: bool = False
    world_size: int = 1
    skip: tuple[str, ...] = ()

    @property
    def compile_mode(self) -> str | None:
        chosen = [a for a in self.compile if a.recommended]
        if not chosen:
            return None
        return max(chosen, key=lambda a: a.saved_s or 0.0).mode

    @property
    def config(self) -> ModelConfig | None:
        if self.best is None:
            return None
        return replace(self.best.config, compile_mode=self.compile_mode)

    @property
    def settings(self) -> dict[str, Any] | None:
        return self.config.settings() if self.config is not None else None

    @property
    def rate(self) -> float | None:
        """The chosen configuration's samples/s (with compile when it is recommended)."""
        if self.best is None:
            return None
        mode = self.compile_mode
        if mode:
            for t in self.trials:
                if t.measured and t.config == self.config:
                    return robust_rate(t.measurement)  # type: ignore[arg-type]
        return robust_rate(self.best.measurement)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, Any]:
        return {
            "interrupted": self.interrupted, "device": self.device, "steps": self.steps,
            "world_size": self.world_size, "loss_tolerance": self.tolerance,
            "settings": self.settings,
            "samples_per_s": round(self.rate, 3) if self.rate is not None else None,
            "reference_samples_per_s": (round(robust_rate(self.reference.measurement), 3)
                                        if self.reference is not None
                                        and self.reference.measurement is not None else None),
            "not_tried": [{"option": o, "why": w} for o, w in self.not_tried],
            "notes": list(self.notes),
            "batch_size_search": None if self.batch is None else {
                "limit_bytes": self.batch.limit_bytes, "limit": self.batch.limit_how,
                "headroom": HEADROOM, "notes": self.batch.notes,
                "sizes": [{"batch_size": t.config.batch_size, "status": t.status,
                           "peak_bytes": t.peak_bytes,
                           "samples_per_s": (round(robust_rate(t.measurement), 3)
                                             if t.measurement is not None else None)}
                          for t in self.batch.trials]},
            "compile": [a.as_dict() for a in self.compile],
            "search": {"seconds": round(self.seconds, 3), "trials": len(self.trials)},
            "trials": [t.as_dict() for t in self.trials],
        }

    def save(self, path: Any) -> Any:
        """Write the model config (``pitstop-model.json``): the chosen settings and, as
        evidence, every trial. Read it back with :func:`pitstop.tune.config.read_model_config`."""
        from pitstop.tune.config import save_model_config

        if self.settings is None:
            raise ValueError("no configuration was measured: nothing to save")
        return save_model_config(path, self.settings, measured=self.as_dict())


def _memory_limit(device: torch.device) -> tuple[int | None, str]:
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        usable = free + torch.cuda.memory_reserved(device)
        return (int(usable * (1 - HEADROOM)),
                f"{1 - HEADROOM:.0%} of the {mib(usable)} this process may use on {device} "
                f"(of {mib(total)})")
    avail = psutil.virtual_memory().available
    return (int(avail * (1 - HEADROOM)),
            f"{1 - HEADROOM:.0%} of available RAM ({mib(avail)})")


def _options(target: ModelTarget, device: torch.device, compile_problem: str | None
             ) -> tuple[dict[str, list[tuple[str, dict[str, Any]]]], list[tuple[str, str]]]:
    """The candidate changes per group, and the options that cannot be tried here."""
    cuda = device.type == "cuda"
    conv = is_conv_model(target.model)
    rnn = any(isinstance(m, torch.nn.RNNBase) for m in target.model.modules())
    capability = torch.cuda.get_device_capability(device) if cuda else None
    sm = f"sm_{capability[0]}{capability[1]}" if capability else ""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    skipped: list[tuple[str, str]] = []

    def no_cuda(option: str, what: str) -> None:
        skipped.append((option, f"not tried: {what} (no CUDA device here)"))

    if not cuda:
        no_cuda("cudnn.benchmark", "cuDNN exists only on CUDA devices")
    elif not (conv or rnn):
        skipped.append(("cudnn.benchmark", "not applicable: the model has no convolution or "
                                           "RNN, which is what cuDNN autotunes"))
    else:
        groups["cudnn"] = [("cudnn.benchmark", {"cudnn_benchmark": True})]
    if not cuda:
        no_cuda("tf32", "TF32 is a CUDA tensor-core format (Ampere, sm_80, and newer)")
    elif capability is not None and capability < (8, 0):
        skipped.append(("tf32", f"not applicable: this GPU ({sm}) has no TF32"))
    else:
        groups["tf32"] = [("tf32", {"tf32": True})]
    precision: list[tuple[str, dict[str, Any]]] = []
    if cuda and capability is not None and capability < (8, 0):
        skipped.append(("bf16", f"not applicable: this GPU ({sm}) has no bf16 tensor cores"))
    else:
        precision.append(("bf16", {"precision": "bf16"}))
        if not cuda and not cpu_bf16_flags(_cpuinfo()):
            skipped.append(("bf16 (note)", "tried although this CPU has no bf16 instructions "
                                           "(avx512_bf16/amx_bf16): expect it emulated, slow"))
    if cuda:
        precision.append(("fp16+scaler", {"precision": "fp16"}))
    else:
        no_cuda("fp16+scaler", "fp16 with a GradScaler needs a CUDA GPU (slow on a CPU, and "
                               "TrainStep refuses it there)")
    groups["precision"] = precision
    if conv:
        groups["layout"] = [("channels_last", {"channels_last": True})]
    else:
        skipped.append(("channels_last", "not applicable: the model has no Conv2d/Conv3d"))
    impls = optimizer_impls(optimizer_factory(target), device)
    opt: list[tuple[str, dict[str, Any]]] = []
    for impl in (("fused",) if cuda else ("foreach", "fused")):
        why = impls.get(impl)
        if why is None:
            opt.append((f"optimizer {impl}", {"optimizer_impl": impl}))
        else:
            skipped.append((f"optimizer {impl}", f"not applicable: {why}"))
    if cuda:
        skipped.append(("optimizer foreach", "not tried: already the default on CUDA"))
    groups["optimizer"] = opt
    modes: list[tuple[str, dict[str, Any]]] = []
    if compile_problem is not None:
        skipped.append(("torch.compile", f"not tried: {compile_problem}"))
    else:
        modes.append(("compile default", {"compile_mode": "default"}))
        if cuda:
            modes.append(("compile reduce-overhead", {"compile_mode": "reduce-overhead"}))
            modes.append(("compile max-autotune", {"compile_mode": "max-autotune"}))
        else:
            no_cuda("compile reduce-overhead", "reduce-overhead replays CUDA graphs")
            skipped.append(("compile max-autotune", "not tried on a CPU: it autotunes GPU "
                                                    "kernels; on a CPU it only adds compile time"))
    groups["compile"] = modes
    return groups, skipped


def _cpuinfo() -> str | None:
    from pitstop.sysroot import Sysroot

    return Sysroot().read_text("/proc/cpuinfo")


@interrupt.guard
def tune_model(model: Any, batch: Any = None, loss_fn: Callable[..., Any] | None = None, *,
               batch_fn: Callable[[int], Any] | None = None,
               optimizer: Callable[..., Any] | None = None, batch_size: int | None = None,
               device: str | torch.device = "auto", budget: float = 120.0,
               steps: int = DEFAULT_STEPS, tolerance: float = DEFAULT_TOLERANCE,
               reporter: Reporter | None = None, repeat_seconds: float | None = None,
               agree: Callable[[list[float], str], list[float]] | None = None,
               world_size: int = 1, max_batch_size: int | None = None,
               skip: tuple[str, ...] = (), named: str = "model") -> ModelTuneResult:
    """Measure training-step options for ``model`` and return the fastest correct set.

    Args:
        model: an ``nn.Module``, or what a model factory returns (a dict with
            ``model``, ``batch``/``batch_fn``, ``loss_fn``, ``optimizer``; see
            :mod:`pitstop.tune.factory`).
        batch: one batch (``(inputs, targets)`` with a ``loss_fn``; anything the model
            takes when it computes its own loss).
        loss_fn: ``loss_fn(outputs, targets)``; None when the model returns its loss.
        batch_fn: ``batch_fn(n)`` -> a batch of ``n`` samples (else ``batch`` is tiled).
        optimizer: ``optimizer(params, **extra)``; default AdamW(lr=1e-3).
        batch_size: the size to start from (default: the batch's).
        steps: the planned length of the run, over which compile time is amortised.
        tolerance: how far (relative) an option's first losses may drift from fp32's.
        agree: under torchrun, a reduction over ranks (``agree(values, "max"|"min")``)
            so that every rank takes the same decisions.
        skip: option groups not to try: any of ``cudnn``, ``tf32``, ``precision``,
            ``layout``, ``optimizer``, ``batch-size``, ``compile``.
    """
    unknown = sorted(set(skip) - set(SKIPPABLE))
    if unknown:
        raise UsageError(f"--skip {','.join(unknown)}: not an option group; choose from "
                         f"{', '.join(SKIPPABLE)}")
    if isinstance(model, torch.nn.Module):
        parts: Any = {"model": model}
        for key, value in (("batch", batch), ("batch_fn", batch_fn), ("loss_fn", loss_fn),
                           ("optimizer", optimizer)):
            if value is not None:
                parts[key] = value
        target = as_model_target(parts, named=named)
    else:
        target = as_model_target(model, named=named)
    if not target.has_batch:
        raise UsageError(f"{named}: no batch to train on; return 'batch' (or 'batch_fn') with "
                         f"the model")
    try:
        dev = resolve_device(device)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if steps < 1:
        raise UsageError(f"steps must be >= 1, got {steps}")
    reporter = reporter or SilentReporter()
    reduce = agree or (lambda values, op: values)
    clock = Budget(budget, agree=lambda v: reduce([v], "max")[0])
    plan = (TrialPlan(repeat_seconds=repeat_seconds) if repeat_seconds is not None
            else plan_for_budget(budget, trials=EXPECTED_TRIALS))
    started = time.perf_counter()
    from pitstop.bench.ladder import compile_problem

    trials = ModelTrials(target, dev, plan=plan, budget=clock, reporter=reporter, agree=reduce)
    groups, not_tried = _options(target, dev, compile_problem(dev))
    for name in skip:
        if name == "batch-size":
            continue
        for label, _change in groups.pop(name, []):
            not_tried.append((label, "not tried: skipped on request (--skip)"))
    notes: list[str] = []
    size = batch_size or _batch_size(target, named)
    result = ModelTuneResult(None, None, trials.trials, not_tried, notes, str(dev), steps,
                             tolerance, None, [], 0.0, world_size=world_size, skip=tuple(skip))
    try:
        _search(trials, groups, result, size=size, clock=clock, reduce=reduce,
                max_batch_size=max_batch_size, named=named)
        interrupt.check()
    except KeyboardInterrupt:
        result.interrupted = True
        notes.append("interrupted (Ctrl-C): the choice is among the trials finished before it")
    result.seconds = time.perf_counter() - started
    return result


def _batch_size(target: ModelTarget, named: str) -> int:
    from pitstop.train.microbatch import batch_size_of

    if target.batch is not None:
        try:
            return batch_size_of(target.batch)
        except ValueError as err:
            raise UsageError(f"{named}: {err}") from None
    try:
        batch_size_of(make_batch(target, 32))
    except Exception as err:
        raise UsageError(f"{named}: batch_fn(32) failed: {type(err).__name__}: {err}") from None
    return 32


def _search(trials: ModelTrials, groups: dict[str, list[tuple[str, dict[str, Any]]]],
            result: ModelTuneResult, *, size: int, clock: Budget,
            reduce: Callable[[list[float], str], list[float]], max_batch_size: int | None,
            named: str) -> None:
    notes = result.notes
    # 1. the reference, halving the batch while it does not fit
    ref: ModelTrial | None = None
    for _ in range(12):
        ref = trials.measure(ModelConfig(size), "reference", paired=True)
        if ref.status != "oom" or size <= 1:
            break
        notes.append(f"batch {size} ran out of memory in fp32; trying {size // 2}")
        size //= 2
    assert ref is not None
    if not ref.measured:
        reason = ref.reason or ref.status
        if ref.status == "failed":
            raise UsageError(f"{named}: the training step failed: {reason}")
        if ref.status == "skipped":
            raise UsageError(f"budget {clock.seconds:g} s is too small for one trial: the fp32 "
                             f"reference step {reason}; give a larger --budget")
        notes.append(f"the fp32 reference could not be measured ({reason})")
        return
    ref.verdict = "reference"
    trials.adopt(ref)
    result.reference = ref
    best = ref
    result.best = best

    def consider(trial: ModelTrial, current: ModelTrial, guard_ref: ModelTrial) -> ModelTrial:
        if not trial.measured:
            trial.verdict = trial.status
            return current
        drift = reduce([loss_drift(trial.losses, guard_ref.losses)], "max")[0]
        if drift > result.tolerance:
            trial.status, trial.verdict = "rejected", "rejected by the loss guard"
            trial.reason = (f"loss drifted {drift:.1%} (> {result.tolerance:.0%}) from "
                            f"{guard_ref.config.label()}: "
                            f"{_series(trial.losses)} vs {_series(guard_ref.losses)}")
            return current
        # Timed in turns with the kept configuration when it could be: the ratio of
        # neighbouring repeats is immune to what the rest of the machine does.
        gain = (trial.paired_gain if trial.paired_gain is not None else
                robust_rate(trial.measurement) / robust_rate(current.measurement))  # type: ignore[arg-type]
        if gain >= 1 + KEEP:
            trial.verdict = f"kept ({gain:.2f}x)"
            return trial
        trial.verdict = f"not kept ({gain:.2f}x, needs +{KEEP:.0%})"
        return current

    for group in ("cudnn", "tf32", "precision", "layout", "optimizer"):
        start_best = best
        for _label, change in groups.get(group, []):
            if not clock.affords(trials.estimated_seconds(best.config)):
                notes.append(f"{_label} not tried: out of budget")
                continue
            trial = trials.measure(replace(start_best.config, **change), group, paired=True)
            kept = consider(trial, best, ref)
            if kept is trial:
                trials.adopt(trial)
            else:
                trials.drop_candidate()
            best = kept
        result.best = best
    trials.release_kept()  # the batch size search needs all the memory
    # 7. batch size
    if "batch-size" in result.skip:
        notes.append("batch size not searched: skipped on request (--skip)")
    elif clock.affords(2 * trials.estimated_seconds(best.config)):
        limit, how = _memory_limit(trials.device)
        if limit is not None:
            limit = int(reduce([float(limit)], "min")[0])
        search = search_batch_size(
            trials, best, limit=limit, limit_how=how, max_size=max_batch_size,
            affordable=lambda: clock.affords(trials.estimated_seconds(best.config)))
        result.batch = search
        for t in search.trials:
            if t.verdict is None:
                t.verdict = ("chosen" if t is search.choice else t.status if not t.measured
                             else "measured")
        if search.choice is not None and search.choice is not best:
            search.choice.verdict = (f"chosen ({robust_rate(search.choice.measurement) / robust_rate(best.measurement):.2f}x"  # type: ignore[arg-type]
                                     f" of batch {best.config.batch_size})")
            best = search.choice
        result.best = best
    else:
        notes.append("batch size not searched: out of budget")
    # 8. compile, at the chosen settings
    base_rate = robust_rate(best.measurement)  # type: ignore[arg-type]
    for label, change in groups.get("compile", []):
        left = clock.left()
        if left < 3 * trials.estimated_seconds(best.config):
            notes.append(f"{label} not tried: {left:.0f} s of budget left is too little to "
                         f"compile and measure")
            continue
        trial = trials.measure(replace(best.config, **change), "compile")
        if not trial.measured:
            trial.verdict = trial.status
            continue
        drift = reduce([loss_drift(trial.losses, best.losses)], "max")[0]
        if drift > result.tolerance:
            trial.status, trial.verdict = "rejected", "rejected by the loss guard"
            trial.reason = (f"loss drifted {drift:.1%} from the uncompiled step: "
                            f"{_series(trial.losses)} vs {_series(best.losses)}")
            continue
        advice = compile_advice(change["compile_mode"], base_rate=base_rate,
                                compiled_rate=robust_rate(trial.measurement),  # type: ignore[arg-type]
                                compile_s=trial.compile_s or 0.0, steps=result.steps,
                                batch_size=best.config.batch_size)
        result.compile.append(advice)
        trial.verdict = ("recommended" if advice.recommended else "not recommended")
        trial.reason = advice.why


def _series(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
