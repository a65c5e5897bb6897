"""One DataLoader configuration, run for real and timed: a *loader trial*.

A trial builds a real ``DataLoader`` (real worker processes) over the user's dataset
and measures, in this order:

1. **start-up**: ``iter(loader)`` to the first batch (workers forked or spawned);
2. **warm-up**: enough batches to drain what the workers prepared during start-up
   (``workers x prefetch_factor``) and reach the steady state; its rate sizes the
   timed repeats;
3. **steady rate**: timed repeats (:mod:`pitstop.tune.measure`), samples/s consumed by
   the *consumer*: a counter (loader alone), a copy to the GPU (``--device cuda``), or
   the user's training step (``--model``: the objective is the whole step);
4. **epoch boundary**: the epoch is ended, the last batches consumed, and a new epoch
   started; the time from the last batch of one epoch to the first of the next, less
   one steady batch time, is what the boundary costs. Without ``persistent_workers``
   that is a shutdown and a fresh start of every worker, each epoch.

The *effective* rate spreads the boundary over a real epoch
(``len(dataset) / batch_size`` batches); searches compare effective rates.

Batches are drawn by a controlled sampler from one fixed random order of the
dataset that continues from trial to trial, so no two trials read the same samples
until the dataset is used up (a later trial does not get a warmer page cache), and
so that an epoch ends exactly when the measurement is done.

Every trial shuts its workers down and waits for them to exit, whatever happened.
An exception the dataset raises, in a worker or not, comes back as
:class:`DatasetItemError` naming the index; a batch that cannot be collated as
:class:`BatchCollateError`.
"""

from __future__ import annotations

import contextlib
import math
import pickle
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import psutil
import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data._utils.collate import default_collate

from pitstop.bench.ladder import CompileTimeout as TrialTimeout
from pitstop.bench.ladder import time_bound as time_limit
from pitstop.bench.measure import Measurement, device_sync
from pitstop.train.loader import MachineFacts, nbytes_of
from pitstop.train.microbatch import batch_size_of
from pitstop.train.prefetch import DevicePrefetcher
from pitstop.tune import interrupt
from pitstop.tune.budget import Budget, format_seconds
from pitstop.tune.factory import DatasetTarget
from pitstop.tune.measure import TrialPlan, overall_rate, timed_repeats, warm_up
from pitstop.tune.memory import DEFAULT_WORKER_BYTES, MemoryEstimate, estimate
from pitstop.tune.progress import Reporter, SilentReporter
from pitstop.tune.reasons import first_line

# Seconds to wait for a worker process to exit after shutdown before killing it.
REAP_TIMEOUT = 10.0
# A trial may run past the budget by this share of it before it is cut off.
GRACE = 0.1


# ---------------------------------------------------------------- configurations

@dataclass(frozen=True)
class LoaderConfig:
    """The DataLoader settings a trial measures (the keys of a loader config file)."""

    num_workers: int
    prefetch_factor: int | None = None
    pin_memory: bool = False
    persistent_workers: bool = False
    multiprocessing_context: str | None = None

    def normalised(self) -> LoaderConfig:
        """Without workers, the worker-only options are meaningless: drop them."""
        if self.num_workers == 0:
            return LoaderConfig(0, None, self.pin_memory, False, None)
        return replace(self, prefetch_factor=self.prefetch_factor or 2)

    @property
    def in_flight(self) -> int:
        return self.num_workers * (self.prefetch_factor or 0) if self.num_workers else 1

    def settings(self) -> dict[str, Any]:
        """As ``pitstop.train.loader`` reads them from ``pitstop-loader.json``."""
        out: dict[str, Any] = {"num_workers": self.num_workers,
                               "prefetch_factor": self.prefetch_factor,
                               "pin_memory": self.pin_memory,
                               "persistent_workers": self.persistent_workers}
        if self.multiprocessing_context is not None:
            out["multiprocessing_context"] = self.multiprocessing_context
        return out

    def label(self) -> str:
        if self.num_workers == 0:
            text = "workers=0"
        else:
            text = (f"workers={self.num_workers} prefetch={self.prefetch_factor} "
                    f"{'persistent' if self.persistent_workers else 'not-persistent'}")
        if self.pin_memory:
            text += " pinned"
        if self.multiprocessing_context:
            text += f" {self.multiprocessing_context}"
        return text

    def cost(self) -> tuple[int, int, int, int, int]:
        """Sort key, cheapest first: fewer workers, fewer batches in flight, no pinned
        copies, persistent (no restart each epoch), this Python's own start method."""
        return (self.num_workers, self.in_flight if self.num_workers else 0,
                int(self.pin_memory), int(not self.persistent_workers),
                int(self.multiprocessing_context is not None))


# ---------------------------------------------------------------- errors

class DatasetItemError(RuntimeError):
    """``dataset[i]`` raised; the message names ``i`` and the original exception.

    One message argument only: the DataLoader re-creates a worker's exception in the
    main process as ``type(message)``."""


class BatchCollateError(RuntimeError):
    """The collate function could not make a batch of the samples."""


class StepError(RuntimeError):
    """The consumer (the user's training step) failed on a batch from the loader."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original


def user_error_text(err: BaseException) -> str | None:
    """The one-line reason of a dataset or collate error, wherever it was raised
    (a worker's comes back wrapped in the worker's traceback text); else None."""
    if not isinstance(err, (DatasetItemError, BatchCollateError)):
        return None
    text = str(err)
    name = type(err).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = lines[-1] if lines else text
    marker = f"{name}: "
    if marker in reason:
        reason = reason.rsplit(marker, 1)[1]
    worker = ""
    if lines and lines[0].startswith("Caught ") and "worker process" in lines[0]:
        worker = " in DataLoader worker process " + lines[0].rsplit("worker process", 1)[1].strip(" .")
    return f"{reason}{worker}"


# ---------------------------------------------------------------- dataset plumbing

class GuardedDataset(Dataset[Any]):
    """The user's dataset, with any exception from ``__getitem__`` re-raised as a
    :class:`DatasetItemError` that names the index. Other attributes pass through, so
    a ``worker_init_fn`` that reads ``get_worker_info().dataset.x`` still works."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        try:
            return self.dataset[index]
        except Exception as err:
            raise DatasetItemError(f"dataset[{index}] raised {type(err).__name__}: "
                                   f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}"
                                   .rstrip(": ")) from err

    def __getattr__(self, name: str) -> Any:
        if name == "dataset" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dataset, name)


class GuardedCollate:
    """The collate function, with its failure re-raised as :class:`BatchCollateError`."""

    def __init__(self, collate_fn: Callable[[list[Any]], Any] | None) -> None:
        self.collate_fn = collate_fn or default_collate

    def __call__(self, samples: list[Any]) -> Any:
        try:
            return self.collate_fn(samples)
        except Exception as err:
            kinds = sorted({type(s).__name__ for s in samples})
            raise BatchCollateError(
                f"a batch of {len(samples)} samples ({', '.join(kinds)}) cannot be collated: "
                f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
                f"; give a collate_fn (return a dict with 'dataset' and 'collate_fn') or make "
                f"samples the same shape") from err


class IndexStream:
    """Dataset indices in one fixed random order (or the user's sampler's order),
    continued across trials and wrapping around when the dataset is used up."""

    def __init__(self, length: int, *, sampler: Any = None, seed: int = 0) -> None:
        self.length = length
        self.sampler = sampler
        self.seed = seed
        self.passes = 0
        self._it: Iterator[int] = iter(())

    def _refill(self) -> None:
        if self.sampler is not None:
            self._it = iter(self.sampler)
        else:
            g = torch.Generator().manual_seed(self.seed + self.passes)
            self._it = iter(torch.randperm(self.length, generator=g).tolist())
        self.passes += 1

    def take(self) -> int:
        for _ in range(2):
            try:
                return int(next(self._it))
            except StopIteration:
                self._refill()
        raise RuntimeError("the sampler yields no indices")

    def peek_batch(self, n: int) -> list[int]:
        """The next ``n`` indices, consumed (for the pre-flight batch)."""
        return [self.take() for _ in range(n)]


class ControlledSampler(Sampler[int]):
    """Yields indices from an :class:`IndexStream` until :meth:`stop` is called: the
    trial, not the dataset's length, decides when an epoch ends."""

    def __init__(self, stream: IndexStream) -> None:
        self.stream = stream
        self.stopped = False

    def __iter__(self) -> Iterator[int]:
        while not self.stopped:
            yield self.stream.take()

    def stop(self) -> None:
        self.stopped = True

    def restart(self) -> None:
        self.stopped = False


# ---------------------------------------------------------------- consumers

class Consumer(Protocol):
    """What takes the loader's batches in a trial."""

    device: torch.device

    def consume(self, batch: Any) -> int: ...
    def sync(self) -> None: ...
    def describe(self) -> str: ...


class CountingConsumer:
    """The loader alone: counts the samples (on a GPU target, after the copy to it)."""

    def __init__(self, device: torch.device, batch_size: int) -> None:
        self.device = device
        self.batch_size = batch_size
        self._sync = device_sync(device)

    def consume(self, batch: Any) -> int:
        return samples_in(batch, self.batch_size)

    def sync(self) -> None:
        self._sync()

    def describe(self) -> str:
        return ("the loader alone" if self.device.type == "cpu"
                else f"the loader and the copy to {self.device}")


def samples_in(batch: Any, default: int) -> int:
    try:
        return batch_size_of(batch)
    except ValueError:
        return len(batch) if hasattr(batch, "__len__") else default


class _Given:
    """An iterable over an iterator that already exists (for DevicePrefetcher)."""

    def __init__(self, it: Iterator[Any]) -> None:
        self.it = it

    def __iter__(self) -> Iterator[Any]:
        return self.it


# ---------------------------------------------------------------- the trial record

@dataclass
class LoaderTrial:
    """One configuration as measured (or why it was not)."""

    config: LoaderConfig
    role: str
    status: str  # measured | skipped | failed | interrupted
    reason: str | None = None
    measurement: Measurement | None = None
    batches_per_s: float | None = None
    startup_s: float | None = None
    boundary_s: float | None = None
    effective: float | None = None
    worker_cpu: float | None = None
    worker_bytes: int | None = None
    memory: MemoryEstimate | None = None
    seconds: float = 0.0
    derived_from: int | None = None  # index of the trial whose steady rate this reuses
    step_alone: float | None = None  # the step's own rate, measured right after this trial
    rounds: int = 1  # times measured (a decision taken on a close call measures again)
    # Keeps the step fed by the in-turns rule (as fast as a fed count with more workers,
    # both measured again in turns), not by reaching the threshold on its own numbers.
    fed_in_turns: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        return self.status == "measured" and self.effective is not None

    @property
    def score(self) -> float:
        return self.effective if self.effective is not None else 0.0

    def as_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {
            "config": self.config.settings(), "label": self.config.label(), "role": self.role,
            "status": self.status, "reason": self.reason,
            "samples_per_s": m.summary() if m is not None else None,
            "batches_per_s": _r(self.batches_per_s), "startup_s": _r(self.startup_s),
            "epoch_boundary_s": _r(self.boundary_s), "effective_samples_per_s": _r(self.effective),
            "worker_cpu_cores": _r(self.worker_cpu), "worker_bytes": self.worker_bytes,
            "memory": self.memory.as_dict() if self.memory is not None else None,
            "seconds": _r(self.seconds), "derived_from": self.derived_from,
            "step_alone_samples_per_s": _r(self.step_alone), "rounds": self.rounds,
            "fed_in_turns": self.fed_in_turns, "notes": self.notes,
        }


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


# ---------------------------------------------------------------- running trials

@dataclass
class Preflight:
    """One batch made in this process before any trial: it proves the dataset and
    the collate function work, and gives the batch's size and cost."""

    batch_bytes: int
    bytes_how: str
    seconds: float
    samples: int
    batch: Any = None


class LoaderTrials:
    """Runs loader trials over one dataset for one consumer."""

    def __init__(self, target: DatasetTarget, batch_size: int, *, consumer: Consumer,
                 facts: MachineFacts, plan: TrialPlan, budget: Budget,
                 reporter: Reporter | None = None, seed: int = 0,
                 step_probe: Callable[[], float] | None = None) -> None:
        self.target = target
        # With a training step as the consumer: the step's own rate, measured again
        # after every trial, so that "fed" compares two rates of the same moment.
        self.step_probe = step_probe
        self.batch_size = batch_size
        self.consumer = consumer
        self.facts = facts
        self.plan = plan
        self.budget = budget
        self.reporter = reporter or SilentReporter()
        self.dataset = GuardedDataset(target.dataset)
        self.collate = GuardedCollate(target.loader_kwargs.get("collate_fn"))
        self.stream = IndexStream(len(self.dataset), sampler=target.loader_kwargs.get("sampler"),
                                  seed=seed)
        self.worker_bytes = DEFAULT_WORKER_BYTES
        self.worker_bytes_measured = False
        self.trials: list[LoaderTrial] = []
        drop_last = bool(target.loader_kwargs.get("drop_last", False))
        n = len(self.dataset)
        self.epoch_batches = max(1, n // batch_size if drop_last else math.ceil(n / batch_size))
        self.preflight = self._preflight()

    # -- before any trial
    def _preflight(self) -> Preflight:
        indices = self.stream.peek_batch(self.batch_size)
        t0 = time.perf_counter()
        samples = [self.dataset[i] for i in indices]
        batch = self.collate(samples)
        seconds = time.perf_counter() - t0
        size = nbytes_of(batch)
        how = "tensors in the collated batch"
        if size is None:
            try:
                size, how = len(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)), "pickled size"
            except Exception:
                size, how = 0, "unknown (batch cannot be sized)"
        return Preflight(int(size), how, seconds, samples_in(batch, self.batch_size), batch)

    def min_trial_seconds(self) -> float:
        """The least a trial can cost here: start-up, warm-up and three short repeats
        of batches made as fast as one process makes them."""
        per_batch = self.preflight.seconds
        return 0.1 + (2 + self.plan.repeats * self.plan.min_steps) * per_batch

    def memory(self, config: LoaderConfig) -> MemoryEstimate:
        return estimate(workers=config.num_workers, prefetch=config.prefetch_factor,
                        pin_memory=config.pin_memory, batch_bytes=self.preflight.batch_bytes,
                        worker_bytes=self.worker_bytes, facts=self.facts)

    def estimated_seconds(self, config: LoaderConfig) -> float:
        """What a trial of ``config`` should cost, from the trials so far."""
        done = [t.seconds for t in self.trials if t.status == "measured" and t.derived_from is None]
        if done:
            return float(sorted(done)[len(done) // 2])
        return self.plan.expected_seconds(warmup_seconds=1.0)

    # -- the trial
    def _loader(self, config: LoaderConfig, sampler: Sampler[int]) -> DataLoader[Any]:
        kwargs = {k: v for k, v in self.target.loader_kwargs.items()
                  if k not in ("shuffle", "sampler", "batch_sampler", "batch_size", "collate_fn",
                               "num_workers", "prefetch_factor", "pin_memory",
                               "persistent_workers", "multiprocessing_context")}
        cfg = config.normalised()
        extra: dict[str, Any] = {}
        if cfg.num_workers > 0:
            extra["prefetch_factor"] = cfg.prefetch_factor
            extra["persistent_workers"] = cfg.persistent_workers
            if cfg.multiprocessing_context is not None:
                extra["multiprocessing_context"] = cfg.multiprocessing_context
        with warnings.catch_warnings():
            # More workers than CPUs is tried on purpose when they wait on I/O.
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            return DataLoader(self.dataset, batch_size=self.batch_size, sampler=sampler,
                              collate_fn=self.collate, num_workers=cfg.num_workers,
                              pin_memory=cfg.pin_memory and self.consumer.device.type == "cuda",
                              **extra, **kwargs)

    def _batches(self, it: Iterator[Any]) -> Iterator[Any]:
        if self.consumer.device.type == "cuda":
            return iter(DevicePrefetcher(_Given(it), self.consumer.device))
        return it

    def skip(self, config: LoaderConfig, role: str, reason: str,
             memory: MemoryEstimate | None = None) -> LoaderTrial:
        trial = LoaderTrial(config, role, "skipped", reason, memory=memory)
        self.trials.append(trial)
        return trial

    def measure(self, config: LoaderConfig, role: str) -> LoaderTrial:
        """Run ``config`` for real: start-up, warm-up, timed repeats, epoch boundary."""
        config = config.normalised()
        mem = self.memory(config)
        if not mem.fits:
            return self.skip(config, role, f"not started: would not fit memory ({mem.why})", mem)
        trial = LoaderTrial(config, role, "measured", memory=mem)
        return self._trial(trial, self.estimated_seconds(config), self._steady)

    def remeasure(self, trial: LoaderTrial) -> LoaderTrial:
        """Measure ``trial``'s configuration again and merge the two: its repeats and
        boundary costs pooled, its effective rate recomputed over both rounds. Used when
        a decision compares two trials taken at different moments of a busy machine:
        measured again in the opposite order (A B, then B A), drift hits both alike."""
        again = self.measure(trial.config, trial.role)
        self.trials.remove(again)
        if not again.measured or not trial.measured:
            return trial
        assert trial.measurement is not None and again.measurement is not None
        m, n = trial.measurement, again.measurement
        merged = Measurement(rates=m.rates + n.rates, samples=m.samples + n.samples,
                             timed_seconds=m.timed_seconds + n.timed_seconds,
                             warmup_seconds=m.warmup_seconds + n.warmup_seconds,
                             steps=m.steps + n.steps)
        rounds = trial.rounds + 1
        trial.boundary_s = ((trial.boundary_s or 0.0) * trial.rounds
                            + (again.boundary_s or 0.0)) / rounds
        trial.measurement = merged
        trial.batches_per_s = merged.steps / merged.timed_seconds
        trial.effective = self.effective(overall_rate(merged), trial.batches_per_s,
                                         trial.boundary_s)
        if again.step_alone is not None:
            trial.step_alone = max(trial.step_alone or 0.0, again.step_alone)
        trial.seconds += again.seconds
        trial.rounds = rounds
        trial.notes.append(f"measured {rounds} times; rates pooled")
        return trial

    def boundary_only(self, config: LoaderConfig, steady: LoaderTrial, role: str) -> LoaderTrial:
        """Measure only start-up and the epoch boundary of ``config``, a variant of the
        measured ``steady`` that differs in what happens at the boundary (persistence,
        start method); its steady rate is ``steady``'s."""
        config = config.normalised()
        mem = self.memory(config)
        if not mem.fits:
            return self.skip(config, role, f"not started: would not fit memory ({mem.why})", mem)
        assert steady.measurement is not None and steady.batches_per_s is not None
        trial = LoaderTrial(config, role, "measured", memory=mem, measurement=steady.measurement,
                            batches_per_s=steady.batches_per_s, worker_cpu=steady.worker_cpu,
                            derived_from=self.trials.index(steady) + 1)
        return self._trial(trial, 2 * (steady.startup_s or 0.5),
                           lambda session, t: self._restart_only(session, t, steady))

    def _trial(self, trial: LoaderTrial, planned: float,
               body: Callable[[_Session, LoaderTrial], None]) -> LoaderTrial:
        """The life of one trial: start the loader (timing it to the first batch), run
        ``body``, and whatever happens shut every worker down and report the trial."""
        self.trials.append(trial)
        index = len(self.trials)
        self.reporter.trial_started(f"trial {index} {trial.role}: {trial.config.label()}",
                                    planned)
        started = time.perf_counter()
        bound = self.budget.left() + GRACE * self.budget.seconds
        sampler = ControlledSampler(self.stream)
        session = _Session(self._loader(trial.config, sampler), sampler)
        quiet = False
        try:
            with time_limit(bound):
                t0 = time.perf_counter()
                session.start(self._batches)
                self._consume(next(session.src))
                self.consumer.sync()
                trial.startup_s = time.perf_counter() - t0
                body(session, trial)
        except KeyboardInterrupt:
            trial.status, trial.reason = "interrupted", "Ctrl-C while this trial ran"
            raise
        except TrialTimeout:
            trial.status = "skipped"
            trial.reason = f"did not finish within the {bound:.0f} s the budget had left"
        except (DatasetItemError, BatchCollateError, StepError):
            trial.status, trial.reason = "failed", "the dataset, collate function or step raised"
            quiet = True  # the usage error that follows says it all
            raise
        except Exception as err:
            # Workers killed by the same Ctrl-C make the loader raise first: the
            # interrupt, not the failure, is what happened.
            trial.status, trial.reason = "interrupted", "Ctrl-C while this trial ran"
            interrupt.check()
            trial.status, trial.reason = "failed", first_line(err)
        finally:
            _shutdown(session.loader, session.iterators, session.pids)
            if self.step_probe is not None and trial.measured and trial.derived_from is None \
                    and not quiet:
                trial.step_alone = self.step_probe()
            trial.seconds = time.perf_counter() - started
            if not quiet:
                self.reporter.trial_finished(self.describe(index, trial))
        return trial

    def _steady(self, session: _Session, trial: LoaderTrial) -> None:
        """Warm-up, timed repeats (with the workers' CPU use), then the epoch boundary."""
        config = trial.config

        def run(n: int, tick: Callable[[], None]) -> int:
            samples = 0
            for _ in range(n):
                samples += self._consume(next(session.src))
                tick()
                interrupt.check()
            return samples

        # Drain what the workers prepared during start-up (in flight, plus a batch each),
        # but no longer than a couple of repeats: a slow consumer keeps the queue full.
        t0 = time.perf_counter()
        run(2, self.reporter.tick)
        self.consumer.sync()
        first = 2 / max(1e-9, time.perf_counter() - t0)
        backlog = config.in_flight + config.num_workers
        warm = max(2, min(backlog, math.ceil(first * 2 * self.plan.repeat_seconds)))
        rate = warm_up(run, steps=warm, sync=self.consumer.sync, tick=self.reporter.tick)
        # A repeat shorter than what is in flight could be served from a queue that
        # filled while this process was descheduled: twice as long, within 3 repeats' time.
        steps = max(self.plan.steps_for(rate),
                    min(2 * config.in_flight, math.ceil(rate * 3 * self.plan.repeat_seconds)))
        pids = session.pids
        cpu0, c0 = _cpu_seconds(pids), time.perf_counter()
        timed = timed_repeats(run, steps=steps, plan=self.plan, sync=self.consumer.sync,
                              tick=self.reporter.tick, budget=self.budget)
        elapsed = time.perf_counter() - c0
        m = timed.measurement
        trial.measurement = m
        trial.notes.extend(timed.notes)
        trial.batches_per_s = m.steps / m.timed_seconds
        if config.num_workers and cpu0 is not None:
            cpu1 = _cpu_seconds(pids)
            if cpu1 is not None and elapsed > 0:
                trial.worker_cpu = (cpu1 - cpu0) / elapsed / config.num_workers
        if pids:
            trial.worker_bytes = _worker_uss(pids)
            if trial.worker_bytes and (not self.worker_bytes_measured
                                       or trial.worker_bytes > self.worker_bytes):
                self.worker_bytes = trial.worker_bytes
                self.worker_bytes_measured = True
        trial.boundary_s = self._boundary(session, trial.batches_per_s)
        trial.effective = self.effective(overall_rate(m), trial.batches_per_s, trial.boundary_s)

    def _restart_only(self, session: _Session, trial: LoaderTrial, steady: LoaderTrial) -> None:
        """Fill the pipeline, then time the epoch boundary; the steady rate is borrowed."""
        assert steady.measurement is not None and steady.batches_per_s is not None
        for _ in range(max(2, trial.config.in_flight + trial.config.num_workers)):
            self._consume(next(session.src))
            self.reporter.tick()
            interrupt.check()
        trial.boundary_s = self._boundary(session, steady.batches_per_s)
        trial.effective = self.effective(overall_rate(steady.measurement),
                                         steady.batches_per_s, trial.boundary_s)
        trial.notes.append(f"steady rate from trial {trial.derived_from} (same settings within "
                           f"an epoch)")

    def _consume(self, batch: Any) -> int:
        try:
            return self.consumer.consume(batch)
        except KeyboardInterrupt:
            raise
        except Exception as err:
            raise StepError(err) from err

    def _boundary(self, session: _Session, batches_per_s: float) -> float:
        """End the epoch, consume what is in flight, start the next; the gap's excess
        over one steady batch interval."""
        session.sampler.stop()
        last = time.perf_counter()
        for batch in session.src:
            self._consume(batch)
            last = time.perf_counter()
        interrupt.check()
        session.sampler.restart()
        session.start(self._batches)
        self._consume(next(session.src))
        self.consumer.sync()
        gap = time.perf_counter() - last
        session.sampler.stop()
        return max(0.0, gap - 1.0 / batches_per_s)

    def effective(self, samples_per_s: float, batches_per_s: float, boundary_s: float) -> float:
        """Samples/s over a whole epoch of this dataset, boundary included."""
        epoch = self.epoch_batches / batches_per_s
        return samples_per_s * epoch / (epoch + boundary_s)

    def describe(self, index: int, trial: LoaderTrial) -> str:
        head = f"trial {index} {trial.role}: {trial.config.label()}: "
        if trial.status != "measured" or trial.measurement is None:
            return head + f"{trial.status} ({trial.reason})"
        m = trial.measurement
        parts = [f"{m.median:,.1f} samples/s (min {m.min:,.1f}, max {m.max:,.1f})"]
        if trial.derived_from is not None:
            parts = [f"steady rate of trial {trial.derived_from}"]
        if trial.boundary_s is not None:
            parts.append(f"epoch boundary {format_seconds(trial.boundary_s)}")
        if trial.effective is not None:
            parts.append(f"effective {trial.effective:,.1f}/s")
        if trial.worker_cpu is not None:
            parts.append(f"{trial.worker_cpu:.2f} CPU per worker")
        if trial.step_alone is not None and trial.effective is not None:
            parts.append(f"{trial.effective / trial.step_alone:.0%} of the step alone "
                         f"({trial.step_alone:,.1f}/s)")
        return head + ", ".join(parts) + f" [{format_seconds(trial.seconds)}]"


# ---------------------------------------------------------------- worker processes

class _Session:
    """One trial's loader, its iterators (one per epoch without persistent workers) and
    the worker processes they started."""

    def __init__(self, loader: DataLoader[Any], sampler: ControlledSampler) -> None:
        self.loader = loader
        self.sampler = sampler
        self.iterators: list[Any] = []
        self.pids: list[int] = []
        self.src: Iterator[Any] = iter(())

    def start(self, batches: Callable[[Iterator[Any]], Iterator[Any]]) -> None:
        """Begin an epoch: ``iter(loader)``, its workers noted, batches from ``batches``."""
        it = _start(self.loader)
        if it not in self.iterators:
            self.iterators.append(it)
        self.pids.extend(p for p in _worker_pids(it) if p not in self.pids)
        self.src = batches(it)


def _start(loader: DataLoader[Any]) -> Iterator[Any]:
    """``iter(loader)``, without PyTorch's warning about more workers than CPUs: the
    search tries that on purpose when the workers wait on I/O."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        return iter(loader)


def _worker_pids(it: Any) -> list[int]:
    workers = getattr(it, "_workers", None) or []
    return [int(w.pid) for w in workers if getattr(w, "pid", None)]


def _cpu_seconds(pids: list[int]) -> float | None:
    """Seconds the processes ran on a CPU *or waited in a run queue for one*: what they
    wanted of the CPUs. On a busy machine a computing worker waits for its turn, and
    its CPU time alone would make it look idle, as if it were waiting on I/O; the run
    queue wait (``/proc/PID/schedstat``) tells the two apart. Without schedstat, CPU
    time only (psutil)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", encoding="ascii") as fh:
                ran, waited = fh.read().split()[:2]
            total += (int(ran) + int(waited)) / 1e9
            continue
        except (OSError, ValueError):
            pass
        try:
            times = psutil.Process(pid).cpu_times()
        except (psutil.Error, OSError):
            return None
        total += times.user + times.system
    return total


def _worker_uss(pids: list[int]) -> int | None:
    """The largest private memory (USS) of the workers, in bytes."""
    sizes: list[int] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error, OSError, AttributeError):
            sizes.append(int(psutil.Process(pid).memory_full_info().uss))
    return max(sizes) if sizes else None


def _shutdown(loader: DataLoader[Any], iterators: list[Any], pids: list[int]) -> None:
    """Stop every worker of ``loader`` and wait until the processes are gone (a Ctrl-C
    meanwhile waits until they are)."""
    with interrupt.deferred():
        _stop_workers(loader, iterators, pids)


def _stop_workers(loader: DataLoader[Any], iterators: list[Any], pids: list[int]) -> None:
    for it in iterators:
        stop = getattr(it, "_shutdown_workers", None)
        if callable(stop):
            with contextlib.suppress(Exception):
                stop()
    with contextlib.suppress(AttributeError):
        loader._iterator = None  # a persistent loader keeps its iterator (and workers)
    iterators.clear()
    reap(pids)


def reap(pids: list[int]) -> None:
    """Wait for the processes ``pids`` to exit; kill what is left after the timeout."""
    procs: list[psutil.Process] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    if not procs:
        return
    _gone, alive = psutil.wait_procs(procs, timeout=REAP_TIMEOUT)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if alive:
        psutil.wait_procs(alive, timeout=REAP_TIMEOUT)
