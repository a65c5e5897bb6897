"""The ladder: from a naive training loop to a tuned one, one knob per rung.

Each rung is the configuration of the rung below plus one knob, built from scratch
(fresh loader, same initial weights) and measured the same way. A knob that makes
this machine *slower* is reported with its rung and left out of every rung above
it, so the top of the ladder is what this machine should run. Knobs that cannot
apply here (pinned memory without a GPU, cuDNN on a CPU, bf16 on a CPU without bf16
instructions) are shown as "not applicable" with the reason.

The *ideal* row reuses the model and step of the best configuration with one batch
already on the device and no loader at all: the compute-only limit the ladder climbs
toward.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

import torch
from torch.utils.data import DataLoader, RandomSampler

from pitstop.bench import trainlib
from pitstop.bench.dataset import ImageDataset, RepeatedView
from pitstop.bench.measure import Measurement, Plan, device_sync, measure
from pitstop.bench.model import ModelSpec, build_model
from pitstop.bench.rungs import RUNGS, Rung, parse_rungs
from pitstop.signals import deferred

__all__ = ["RUNGS", "Knobs", "LadderResult", "Rung", "RungResult", "Workload", "parse_rungs",
           "run_ladder"]


@dataclass(frozen=True)
class Knobs:
    """The switches a configuration has on. Field order is the ladder's order."""

    workers: bool = False
    pinned: bool = False
    cudnn_benchmark: bool = False
    no_sync: bool = False
    mixed_precision: bool = False
    channels_last: bool = False
    compile: bool = False

    def with_on(self, name: str) -> Knobs:
        return replace(self, **{name: True})

    def active(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]



# A knob is left out only when its median is this much below the rung it builds on AND
# none of its repeats reaches that rung's median: noise on a busy machine must not
# throw a useful knob away, nor keep a harmful one.
SLOWER_MARGIN = 0.03


class LadderAborted(Exception):
    """Raised inside a run when the user interrupts it."""


class Reporter(Protocol):
    """What the ladder tells the outside world while it runs."""

    def rung_started(self, label: str, total_steps: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def tick(self) -> None: ...
    def rung_finished(self, result: RungResult) -> None: ...
    def note(self, text: str) -> None: ...


class SilentReporter:
    def rung_started(self, label: str, total_steps: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def tick(self) -> None:
        pass

    def rung_finished(self, result: RungResult) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class RungResult:
    """One row of the ladder (or the ideal / DDP row)."""

    index: int | None
    name: str
    title: str
    change: str
    status: str  # baseline | kept | slower | not applicable | skipped | failed | interrupted
    reason: str | None = None
    knobs: list[str] = field(default_factory=list)
    applied: dict[str, Any] = field(default_factory=dict)
    measurement: Measurement | None = None

    @property
    def measured(self) -> bool:
        return self.measurement is not None


@dataclass
class Workload:
    """Everything a rung needs that does not depend on its knobs."""

    device: torch.device
    dataset: ImageDataset
    model_spec: ModelSpec
    num_classes: int
    batch_size: int
    plan: Plan
    log_every: int = 50
    lr: float = 0.05
    compile_timeout: float = 180.0
    world_size: int = 1
    distributed_sampler: bool = False


@dataclass
class Context:
    """Facts about this machine that decide whether a knob can apply at all."""

    device: torch.device
    quick: bool
    auto_precision: str
    auto_precision_reason: str | None
    compile_problem: str | None


def probe_context(device: torch.device, *, quick: bool) -> Context:
    """Resolve what ``precision="auto"`` picks here and whether torch.compile can work."""
    probe = torch.nn.Linear(4, 4).to(device)
    step = trainlib.make_step(probe, torch.optim.SGD(probe.parameters(), lr=0.1), precision="auto")
    precision = str(step.precision)
    reason = None
    if precision == "fp32":
        reason = step.precision_reason
    return Context(device=device, quick=quick, auto_precision=precision,
                   auto_precision_reason=reason, compile_problem=compile_problem(device))


def compile_problem(device: torch.device) -> str | None:
    """Why torch.compile cannot work here, or None."""
    try:
        import torch._dynamo as dynamo
    except ImportError as err:
        return f"torch._dynamo cannot be imported ({err})"
    if not dynamo.is_dynamo_supported():
        return "TorchDynamo does not support this Python/platform"
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "Triton is not installed (torch.compile's GPU backend needs it)"
        except Exception as err:  # a broken Triton install must cost one rung, not the run
            return f"Triton cannot be imported ({_first_line(err)})"
        return None
    try:
        from torch._inductor import config as inductor_config

        cxx = inductor_config.cpp.cxx[0] if isinstance(inductor_config.cpp.cxx, tuple) \
            else inductor_config.cpp.cxx
    except Exception:
        cxx = None
    candidates = [c for c in (cxx, os.environ.get("CXX"), "g++", "c++", "clang++") if c]
    if not any(shutil.which(c) for c in candidates):
        return ("no C++ compiler found (torch.compile's CPU backend compiles C++): "
                "apt install g++")
    return None


def applicability(rung: Rung, ctx: Context) -> tuple[str, str] | None:
    """``(status, reason)`` when ``rung`` cannot be measured here, else None."""
    cpu = ctx.device.type != "cuda"
    if rung.knob == "pinned" and cpu:
        return ("not applicable", "pinned memory speeds up host-to-GPU copies; the device "
                                  f"here is the {ctx.device.type.upper()}, nothing is copied")
    if rung.knob == "cudnn_benchmark" and cpu:
        return ("not applicable", "cuDNN exists only on CUDA devices")
    if rung.knob == "mixed_precision" and ctx.auto_precision == "fp32":
        return ("not applicable", ctx.auto_precision_reason or "precision='auto' chose fp32")
    if rung.knob == "compile":
        if ctx.compile_problem:
            return ("not applicable", ctx.compile_problem)
        if ctx.quick:
            return ("skipped", "--quick: compiling the model takes tens of seconds on a small "
                               "CPU; run without --quick to measure it")
    return None


class CompileTimeout(BaseException):
    """The compile warm-up ran past its bound. A BaseException, like KeyboardInterrupt,
    so that the ``except Exception`` blocks inside torch.compile cannot swallow it."""


_FORK_HOOK_FILES = (os.path.join("logging", "__init__.py"), os.path.join("threading.py"))


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise :class:`CompileTimeout` in the main thread after ``seconds`` (SIGALRM).

    The alarm repeats every 0.1 s once expired: a raise that lands somewhere exceptions
    are ignored (a fork callback, a finaliser) is followed by another. If the block
    still completes after the bound expired, the timeout is raised then: a swallowed
    raise may have left part of the model uncompiled, and the measurement would lie.
    """
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "SIGALRM"):
        yield
        return
    expired = False

    def expire(signum: int, frame: Any) -> None:
        nonlocal expired
        expired = True
        if frame is not None and frame.f_code.co_filename.endswith(_FORK_HOOK_FILES):
            return  # inside os.fork's callbacks a raise is only printed; the next alarm will do
        raise CompileTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if expired:
        raise CompileTimeout(seconds)


class Trainer:
    """The training loop of one configuration: model, optimizer, step, loader.

    ``loss_reads`` counts the host reads of the loss (each one a device sync on a GPU).
    """

    def __init__(self, workload: Workload, knobs: Knobs, *, ddp: bool = False,
                 cut_threads: bool = True) -> None:
        self.workload = workload
        self.knobs = knobs
        # Use the intra-op thread count pitstop.train.loader recommends beside its workers
        # (CPU training); False keeps torch's own count.
        self.cut_threads = cut_threads
        self.device = workload.device
        if self.device.type == "cuda" and self.device.index is None:
            # "cuda" and "cuda:0" compare unequal: name the GPU so batch checks are exact
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.loss_reads = 0
        self.steps_done = 0
        self._sink = open(os.devnull, "w")  # noqa: SIM115 - closed in close()
        self._iterator: Iterator[Any] | None = None
        self.loader: DataLoader[Any] | None = None
        # Intra-op threads while this configuration trains (None: torch's own count).
        self.threads: int | None = None

        model: torch.nn.Module = build_model(workload.model_spec, workload.num_classes)
        model = model.to(self.device)
        if knobs.channels_last:
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids)
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=workload.lr, momentum=0.9)
        runnable = torch.compile(model) if knobs.compile else model
        self.step = trainlib.make_step(runnable, optimizer,
                                       precision="auto" if knobs.mixed_precision else "fp32")
        self.metrics = trainlib.make_metrics(self.device) if knobs.no_sync else None
        self.applied: dict[str, Any] = {
            "precision": str(getattr(self.step, "precision", "fp32")),
            "memory_format": "channels_last" if knobs.channels_last else "contiguous (NCHW)",
            "compiled": knobs.compile,
            "cudnn_benchmark": knobs.cudnn_benchmark,
            "loss_read": (f"every {workload.log_every} steps (pitstop.train.Metrics)"
                          if knobs.no_sync else "loss.item() printed every step"),
            "ddp": ddp,
        }

    # -- the loader
    def build_loader(self) -> DataLoader[Any]:
        w = self.workload
        batches = w.plan.total_steps + 2  # +2: the prefetcher and the loader read ahead
        view = RepeatedView(w.dataset, batches * w.batch_size * w.world_size)
        sampler: Any = None if w.distributed_sampler else RandomSampler(view)
        if not self.knobs.workers:
            # The naive loader: what `DataLoader(ds, batch_size, shuffle=True)` gives; pinned
            # still when rung 2 builds on it (workers left out, or none chosen here).
            if sampler is None:
                from torch.utils.data.distributed import DistributedSampler

                sampler = DistributedSampler(view, shuffle=True)
            pin = self.knobs.pinned and self.device.type == "cuda"
            loader: DataLoader[Any] = DataLoader(  # noqa: LT002 (the naive rung, on purpose)
                view, w.batch_size, sampler=sampler, num_workers=0, pin_memory=pin,
                drop_last=True)
        else:
            overrides: dict[str, Any] = {"drop_last": True}
            if sampler is not None:
                overrides["sampler"] = sampler
            if not self.knobs.pinned:
                overrides["pin_memory"] = False
            loader = trainlib.make_loader(view, w.batch_size, device=self.device, **overrides)
        workers, source = trainlib.loader_workers(loader)
        recommended, threads_source = trainlib.training_threads(loader, self.device)
        self.threads = recommended if self.cut_threads else None
        if recommended is not None and not self.cut_threads:
            threads_source = (f"torch's own thread count (measured faster here than the "
                              f"{recommended} recommended beside the workers)")
        self.applied.update({
            "num_workers": workers,
            "num_workers_source": source,
            "pin_memory": bool(loader.pin_memory),
            "prefetch_factor": loader.prefetch_factor if workers else None,
            "persistent_workers": bool(loader.persistent_workers),
            "non_blocking": bool(loader.pin_memory),
            "device_prefetcher": self.knobs.pinned and self.device.type == "cuda",
            "loader": type(loader).__name__,
            "torch_threads": self.threads or torch.get_num_threads(),
            "torch_threads_source": threads_source if recommended is not None
                                    else "torch's own thread count",
        })
        return loader

    def _batches(self) -> Iterator[Any]:
        if self._iterator is None:
            self.loader = self.build_loader()
            if self.knobs.pinned and self.device.type == "cuda":
                self._iterator = iter(trainlib.prefetcher(self.loader, self.device))
            else:
                self._iterator = iter(self.loader)
        return self._iterator

    def close_loader(self) -> None:
        """Shut the loader's worker processes down (the model and step stay usable).

        Dropping the last reference runs the DataLoader iterator's ``__del__``, which
        joins the workers (long, on a loaded machine). A Ctrl-C landing inside a
        ``__del__`` is swallowed by Python ("Exception ignored in ..."), and the ladder
        would climb on as if nothing had been pressed; so signals wait until the
        workers are joined and take effect right after.
        """
        with deferred(collect=True):
            self._iterator = None
            self.loader = None

    def close(self) -> None:
        self.close_loader()
        self._sink.close()

    # -- the loop
    def _prepare(self, inputs: torch.Tensor, targets: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        if inputs.device != self.device:
            inputs, targets = trainlib.to_device((inputs, targets), self.device)
        if self.knobs.channels_last:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, targets

    def _after_step(self, loss: torch.Tensor) -> None:
        self.steps_done += 1
        if self.metrics is None:
            # The naive habit: a host read of the loss, and a print, every step.
            print(f"step {self.steps_done}: loss {loss.item():.4f}", file=self._sink)
            self.loss_reads += 1
            return
        self.metrics.update("loss", loss)
        if self.steps_done % self.workload.log_every == 0:
            values = self.metrics.compute()
            self.loss_reads += 1
            print(f"step {self.steps_done}: loss {values.get('loss', float('nan')):.4f}",
                  file=self._sink)
            self.metrics.reset()

    def run(self, n: int, tick: Callable[[], None]) -> int:
        """``n`` training steps from the loader; returns the samples consumed."""
        batches = self._batches()
        samples = 0
        with intra_op_threads(self.threads):
            for _ in range(n):
                inputs, targets = self._prepare(*next(batches))
                loss = trainlib.call_step(self.step, inputs, targets)
                self._after_step(loss)
                samples += int(inputs.shape[0])
                tick()
        return samples

    def ideal_runner(self) -> Callable[[int, Callable[[], None]], int]:
        """Steps on one fixed batch already on the device: no loader, no per-step reads."""
        w = self.workload
        images = torch.stack([w.dataset[i % len(w.dataset)][0] for i in range(w.batch_size)])
        labels = torch.tensor([w.dataset.items[i % len(w.dataset)][1]
                               for i in range(w.batch_size)])
        inputs, targets = self._prepare(images.to(self.device), labels.to(self.device))

        def run(n: int, tick: Callable[[], None]) -> int:
            for _ in range(n):
                trainlib.call_step(self.step, inputs, targets)
                tick()
            return n * int(inputs.shape[0])

        return run


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads (None: unchanged), then restore."""
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def global_settings(knobs: Knobs) -> Iterator[None]:
    """Set the process-wide switches of ``knobs``, and put the old values back after."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = knobs.cudnn_benchmark
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def _first_line(err: BaseException) -> str:
    """A one-line reason. Errors re-raised from DataLoader workers carry the worker's
    traceback in their message: its last line (the original error) is kept too."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    if len(lines) > 1 and any(line.startswith("Traceback") or "Original Traceback" in line
                              for line in lines):
        text += f" {lines[-1]}"
    return text


def measure_trainer(trainer: Trainer, workload: Workload, reporter: Reporter, label: str
                    ) -> Measurement:
    reporter.rung_started(label, workload.plan.total_steps)
    guard = None
    if trainer.knobs.compile:
        def guard(warm: Callable[[], int]) -> int:
            with time_bound(workload.compile_timeout):
                return warm()

    with global_settings(trainer.knobs):
        m = measure(trainer.run, workload.plan, sync=device_sync(workload.device),
                    tick=reporter.tick, on_phase=reporter.phase, warmup_guard=guard)
    m.extra["loss_reads"] = trainer.loss_reads
    m.extra["steps"] = trainer.steps_done
    trainer.applied["loss_reads_per_step"] = round(trainer.loss_reads / max(1, trainer.steps_done), 4)
    trainer.applied["loss_reads"] = trainer.loss_reads
    trainer.applied["steps"] = trainer.steps_done
    return m


def is_slower(candidate: Measurement, base: Measurement) -> bool:
    """The keep-or-leave-out rule (see :data:`SLOWER_MARGIN`)."""
    return candidate.median < base.median * (1 - SLOWER_MARGIN) and candidate.max < base.median


@dataclass
class LadderResult:
    rungs: list[RungResult]
    ideal: RungResult | None
    final_knobs: Knobs
    interrupted: bool = False

    def baseline(self) -> RungResult | None:
        return next((r for r in self.rungs if r.index == 0 and r.measured), None)


def run_ladder(workload: Workload, ctx: Context, *, selected: set[int] | None = None,
               reporter: Reporter | None = None, measure_ideal: bool = True) -> LadderResult:
    """Climb the ladder. ``selected``: rung indices to measure (0 is always measured).

    Ctrl-C (KeyboardInterrupt) stops the climb: the result holds the rungs measured so
    far and ``interrupted=True``. Every trainer is closed before it returns.
    """
    reporter = reporter or SilentReporter()
    results: list[RungResult] = []
    knobs = Knobs()
    best: tuple[Trainer, Measurement] | None = None
    cut_threads = True  # rung 1 may find torch's own thread count faster (CPU only)
    interrupted = False
    ideal: RungResult | None = None

    def finish(result: RungResult) -> None:
        results.append(result)
        reporter.rung_finished(result)

    try:
        for rung in RUNGS:
            base = RungResult(rung.index, rung.name, rung.title, rung.change, status="")
            if selected is not None and rung.index not in selected and rung.index != 0:
                base.status, base.reason = "skipped", "not selected (--rungs)"
                finish(base)
                continue
            blocked = applicability(rung, ctx)
            if blocked is None and rung.knob == "workers":
                blocked = _workers_blocked(workload)
            if blocked is not None:
                base.status, base.reason = blocked
                finish(base)
                continue
            candidate = knobs if rung.knob is None else knobs.with_on(rung.knob)
            base.knobs = candidate.active()
            trainer: Trainer | None = None
            try:
                trainer = Trainer(workload, candidate, cut_threads=cut_threads)
                base.measurement = measure_trainer(trainer, workload, reporter,
                                                   f"{rung.index} {rung.name}")
                if rung.knob == "workers" and trainer.threads is not None:
                    trainer, base.measurement, cut_threads = _compare_threads(
                        trainer, base.measurement, workload, candidate, reporter)
            except KeyboardInterrupt:
                base.status, base.reason = "interrupted", "Ctrl-C while this rung ran"
                base.applied = dict(trainer.applied) if trainer else {}
                if trainer:
                    trainer.close()
                finish(base)
                raise
            except CompileTimeout:
                base.status = "skipped"
                base.reason = (f"torch.compile did not finish within {workload.compile_timeout:g} s "
                               f"on this machine (bound: --compile-timeout)")
                base.measurement = None
                _reset_dynamo()
            except Exception as err:
                base.status = "failed"
                base.reason = _first_line(err)
                base.measurement = None
                reporter.note(f"rung {rung.index} {rung.name} failed:\n"
                              + "".join(traceback.format_exception_only(type(err), err)).strip())
                if rung.knob == "compile":
                    _reset_dynamo()
            if trainer is not None:
                base.applied = dict(trainer.applied)
            if base.measurement is None:
                if trainer is not None:
                    trainer.close()
                _free_device_memory(workload.device)
                if rung.index == 0:
                    finish(base)
                    break  # without the baseline there is nothing to compare against
                finish(base)
                continue
            assert trainer is not None
            trainer.close_loader()
            if rung.index == 0 or best is None:
                base.status = "baseline"
                keep = True
            elif is_slower(base.measurement, best[1]):
                base.status = "slower"
                loss = 1 - base.measurement.median / best[1].median
                base.reason = (f"{loss:.0%} slower than the rung it builds on "
                               f"({best[1].median:.1f} samples/s); left out of the rungs above"
                               + _slower_hint(rung, base, workload))
                keep = False
            else:
                base.status = "kept"
                keep = True
            if keep:
                knobs = candidate
                if best is not None:
                    best[0].close()
                best = (trainer, base.measurement)
            else:
                trainer.close()
            finish(base)
        if measure_ideal and best is not None:
            try:
                ideal = run_ideal(best[0], workload, reporter)
            except (Exception, CompileTimeout) as err:
                ideal = RungResult(None, "ideal", "ideal (no loader)", "", status="failed",
                                   reason=_first_line(err))
                reporter.note(f"the ideal row failed: {_first_line(err)}")
                reporter.rung_finished(ideal)
    except KeyboardInterrupt:
        interrupted = True
    if best is not None:
        best[0].close()
    return LadderResult(results, ideal, knobs, interrupted)


def run_ideal(trainer: Trainer, workload: Workload, reporter: Reporter) -> RungResult:
    """Measure the best configuration's model and step on a batch already on the device."""
    trainer.close_loader()
    result = RungResult(None, "ideal", "ideal (no loader)",
                        "the best configuration's model and step on one batch already on the "
                        "device: no loader, no per-step host reads",
                        status="measured", knobs=trainer.knobs.active())
    runner = trainer.ideal_runner()
    reporter.rung_started("ideal", workload.plan.total_steps)
    plan = replace(workload.plan, warmup=max(2, min(workload.plan.warmup, 5)))
    with global_settings(trainer.knobs):
        result.measurement = measure(runner, plan, sync=device_sync(workload.device),
                                     tick=reporter.tick, on_phase=reporter.phase)
    result.applied = {k: v for k, v in trainer.applied.items()
                      if k in ("precision", "memory_format", "compiled", "cudnn_benchmark", "ddp")}
    result.applied.update({"loader": None, "num_workers": None, "loss_read": "never per step"})
    reporter.rung_finished(result)
    return result


def _compare_threads(cut: Trainer, cut_m: Measurement, workload: Workload, knobs: Knobs,
                     reporter: Reporter) -> tuple[Trainer, Measurement, bool]:
    """Rung 1 on a CPU: measure the same configuration with torch's own thread count too
    and keep the faster. Cutting the threads to the CPUs the workers leave avoids
    oversubscription (a large gain when other processes compete for the cores); when
    the workers are mostly idle, the cores they leave unused may be worth more. The
    rung's ``applied["threads_compared"]`` records both medians."""
    cut.close_loader()
    own: Trainer | None = None
    try:
        own = Trainer(workload, knobs, cut_threads=False)
        own_m = measure_trainer(own, workload, reporter, "1 workers, torch's own threads")
    except Exception as err:
        if own is not None:
            own.close()
        reporter.note(f"rung 1 with torch's own thread count failed: {_first_line(err)}")
        return cut, cut_m, True
    except BaseException:  # Ctrl-C: end this trainer's workers; the ladder handles the rest
        if own is not None:
            own.close()
        raise
    compared = {"recommended": {"threads": cut.threads, "median": round(cut_m.median, 3)},
                "torch_default": {"threads": torch.get_num_threads(),
                                  "median": round(own_m.median, 3)}}
    keep_cut = cut_m.median >= own_m.median
    winner, loser = (cut, own) if keep_cut else (own, cut)
    loser.close()
    winner.applied["threads_compared"] = compared
    return winner, (cut_m if keep_cut else own_m), keep_cut


def _slower_hint(rung: Rung, result: RungResult, workload: Workload) -> str:
    """A likely cause, where one is known, appended to a "slower" reason."""
    if rung.knob == "workers" and workload.device.type == "cpu":
        workers = result.applied.get("num_workers")
        threads = result.applied.get("torch_threads")
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return (f"; on a CPU the {workers} worker process(es) compete with the training's "
                f"{threads} intra-op thread(s) for {cpus} CPUs")
    return ""


def _workers_blocked(workload: Workload) -> tuple[str, str] | None:
    """Rung 1 cannot add workers where the loader factory chooses none (one CPU per rank)."""
    count, why = trainlib.planned_workers(workload.dataset, workload.batch_size,
                                          device=workload.device)
    if count == 0:
        return ("not applicable", f"pitstop.train.loader chose num_workers=0 here ({why})")
    return None


def _free_device_memory(device: torch.device) -> None:
    """Hand a failed rung's cached GPU memory back, so an out-of-memory rung does not
    starve the rungs after it."""
    if device.type == "cuda":
        import gc

        gc.collect()
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


def _reset_dynamo() -> None:
    with contextlib.suppress(Exception):
        import torch._dynamo

        torch._dynamo.reset()
