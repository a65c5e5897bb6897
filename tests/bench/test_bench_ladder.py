"""The ladder in-process on a tiny workload: every rung runs and its knob is really applied."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from _bench_helpers import (
    FailsInWorkersTransform,
    PidRecordingTransform,
    make_workload,
    recorded_pids,
)
from torch.utils.data import DataLoader

from pitstop.bench.dataset import DataSource
from pitstop.bench.ladder import Knobs, Trainer, probe_context, run_ideal, run_ladder
from pitstop.bench.rungs import RUNGS


def _no_tick() -> None:
    pass


def test_every_rung_runs_or_says_why(tiny: DataSource) -> None:
    workload = make_workload(tiny)
    ctx = probe_context(workload.device, quick=True)
    result = run_ladder(workload, ctx)
    assert not result.interrupted
    assert [r.index for r in result.rungs] == [r.index for r in RUNGS]
    by_name = {r.name: r for r in result.rungs}
    assert by_name["naive"].status == "baseline"
    for name in ("workers", "no-sync", "channels-last"):
        assert by_name[name].status in ("kept", "slower"), by_name[name]
        assert by_name[name].measurement is not None
    mp = by_name["mixed-precision"]
    if ctx.auto_precision == "fp32":
        assert mp.status == "not applicable" and mp.reason
    else:
        assert mp.measurement is not None and mp.applied["precision"] == ctx.auto_precision
    for name in ("pinned", "cudnn-benchmark"):
        assert by_name[name].status == "not applicable" and by_name[name].reason
    assert by_name["compile"].status == "skipped" and "--quick" in (by_name["compile"].reason or "")
    # each measured rung has exactly the knobs of the kept rungs below it plus its own
    kept: list[str] = []
    for r in result.rungs:
        if r.measurement is None:
            continue
        rung = RUNGS[r.index or 0]
        assert r.knobs == kept + ([rung.knob] if rung.knob else [])
        if r.status in ("baseline", "kept"):
            kept = r.knobs
    assert result.final_knobs.active() == kept
    assert result.ideal is not None and result.ideal.measurement is not None
    assert result.ideal.applied["loader"] is None
    workers = by_name["workers"]
    if workers.applied["num_workers"] < len(os.sched_getaffinity(0)):
        # rung 1 on a CPU measured both thread counts and kept the faster one
        compared = workers.applied["threads_compared"]
        winner = max(compared.values(), key=lambda c: c["median"])
        assert workers.applied["torch_threads"] == winner["threads"]
        assert workers.measurement is not None
        assert round(workers.measurement.median, 3) == winner["median"]
        assert compared["recommended"]["threads"] < compared["torch_default"]["threads"]
        from pitstop.bench.report import detail

        loser = min(compared.values(), key=lambda c: c["median"])
        assert f"{winner['threads']} threads ({loser['threads']}: " in detail(workers)


def test_rung_one_decodes_in_worker_processes(tiny: DataSource, tmp_path: Path) -> None:
    for knobs, in_workers in ((Knobs(), False), (Knobs(workers=True), True)):
        log = tmp_path / f"pids-{in_workers}.txt"
        # enough batches that workers are still decoding after the first step
        workload = make_workload(tiny, steps=10, repeats=3,
                                 transform=PidRecordingTransform(16, log))
        trainer = Trainer(workload, knobs)
        try:
            # pitstop.train.loader decodes dataset[0] once in this process to size a sample
            # when it builds the loader; count only what the training steps decode.
            trainer.run(1, _no_tick)
            log.write_text("")
            trainer.run(12, _no_tick)
            assert trainer.loader is not None
            assert (trainer.loader.num_workers > 0) is in_workers
            assert trainer.applied["num_workers"] == trainer.loader.num_workers
            assert len(psutil.Process().children()) == trainer.loader.num_workers
        finally:
            trainer.close()
        assert psutil.Process().children() == []  # close() ends the worker processes
        pids = recorded_pids(log)
        assert pids, "the transform never ran"
        if in_workers:
            assert os.getpid() not in pids  # decoded only in worker processes
        else:
            assert pids == {os.getpid()}


def test_rung_one_on_cpu_trains_with_the_cpus_the_workers_leave(tiny: DataSource) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: pitstop.train.loader chooses no workers")
    before = torch.get_num_threads()
    seen: dict[str, list[int]] = {"naive": [], "workers": []}
    for name, knobs in (("naive", Knobs()), ("workers", Knobs(workers=True))):
        trainer = Trainer(make_workload(tiny), knobs)
        trainer.model.register_forward_pre_hook(
            lambda module, args, name=name: seen[name].append(torch.get_num_threads()))
        try:
            trainer.run(3, _no_tick)
            assert torch.get_num_threads() == before  # restored after the steps
            workers = trainer.applied["num_workers"]
            cpus = len(os.sched_getaffinity(0))
            if name == "naive":
                assert set(seen[name]) == {before}
                assert trainer.applied["torch_threads"] == before
            else:
                assert workers >= 1 and set(seen[name]) == {max(1, cpus - workers)}
                assert trainer.applied["torch_threads"] == max(1, cpus - workers)
                assert trainer.applied["torch_threads_source"].startswith("computed")
        finally:
            trainer.close()
    own = Trainer(make_workload(tiny), Knobs(workers=True), cut_threads=False)
    own.model.register_forward_pre_hook(
        lambda module, args: seen["naive"].append(torch.get_num_threads()))
    try:
        own.run(2, _no_tick)
        assert set(seen["naive"]) == {before} and own.applied["torch_threads"] == before
        assert "measured faster here" in own.applied["torch_threads_source"]
    finally:
        own.close()


def test_a_failing_rung_is_reported_and_the_ladder_goes_on(tiny: DataSource) -> None:
    workload = make_workload(tiny, transform=FailsInWorkersTransform(16))
    result = run_ladder(workload, probe_context(workload.device, quick=True),
                        selected={0, 1, 4})
    by_name = {r.name: r for r in result.rungs}
    assert by_name["workers"].status == "failed"
    assert "decoding refused in a worker process" in (by_name["workers"].reason or "")
    assert by_name["workers"].measurement is None
    # the rung above it builds on the naive loop, without the failed knob
    assert by_name["no-sync"].measurement is not None
    assert by_name["no-sync"].knobs == ["no_sync"]
    assert result.ideal is not None and result.ideal.measurement is not None
    assert psutil.Process().children() == []


class ItemCounter:
    def __init__(self) -> None:
        self.calls = 0


@pytest.fixture
def item_calls(monkeypatch: pytest.MonkeyPatch) -> ItemCounter:
    """Count Tensor.item() and Tensor.tolist() calls (each a host read, a sync on a GPU)
    made by anything but the DataLoader machinery, whose samplers read CPU index
    tensors with them (host-side index bookkeeping, never a device sync)."""
    counter = ItemCounter()
    loader_code = os.path.join("torch", "utils", "data")
    for name in ("item", "tolist"):
        original = getattr(torch.Tensor, name)

        def counting(self: torch.Tensor, *a: Any, _orig: Any = original, **k: Any) -> Any:
            if loader_code not in sys._getframe(1).f_code.co_filename:
                counter.calls += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counting)
    return counter


def _steps_then_count(trainer: Trainer, counter: ItemCounter, steps: int) -> int:
    """Item calls made by ``steps`` training steps, after one step that starts the loader
    (starting an iterator reads a few CPU seeds with .item(): once, not per step)."""
    try:
        trainer.run(1, _no_tick)
        counter.calls = 0
        trainer.run(steps, _no_tick)
        return counter.calls
    finally:
        trainer.close()


def test_naive_rung_reads_the_loss_every_step(tiny: DataSource, item_calls: ItemCounter) -> None:
    trainer = Trainer(make_workload(tiny), Knobs())
    assert _steps_then_count(trainer, item_calls, 5) >= 5
    assert trainer.loss_reads == 6


def test_no_sync_rung_performs_no_item_per_step(tiny: DataSource, item_calls: ItemCounter) -> None:
    # fewer steps than log_every: not a single host read of the loss
    trainer = Trainer(make_workload(tiny, log_every=50), Knobs(workers=True, no_sync=True))
    assert _steps_then_count(trainer, item_calls, 6) == 0
    assert trainer.loss_reads == 0
    # log_every=3: steps 3 and 6 read the metrics, nothing else does
    trainer = Trainer(make_workload(tiny, log_every=3), Knobs(workers=True, no_sync=True))
    calls = _steps_then_count(trainer, item_calls, 5)
    assert trainer.loss_reads == 2
    assert 1 <= calls <= 2 * 2  # one batched read per log (as item or tolist)


def test_ideal_row_has_no_loader(tiny: DataSource, monkeypatch: pytest.MonkeyPatch) -> None:
    iterations = []
    original = DataLoader.__iter__

    def counting(self: DataLoader[Any]) -> Any:
        iterations.append(self)
        return original(self)

    monkeypatch.setattr(DataLoader, "__iter__", counting)
    workload = make_workload(tiny)
    trainer = Trainer(workload, Knobs(no_sync=True, channels_last=True))
    try:
        before = len(iterations)
        ideal = run_ideal(trainer, workload, _SilentReporter())
    finally:
        trainer.close()
    assert len(iterations) == before == 0
    assert trainer.loader is None
    assert ideal.measurement is not None and ideal.applied["loader"] is None
    assert ideal.applied["memory_format"] == "channels_last"


class _SilentReporter:
    def rung_started(self, label: str, total_steps: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def tick(self) -> None: ...
    def rung_finished(self, result: object) -> None: ...
    def note(self, text: str) -> None: ...


def test_ctrl_c_keeps_the_rungs_measured_so_far(tiny: DataSource,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt in rung 4 ends the climb; rungs 0-3 stay in the result."""
    original = Trainer.run

    def run(self: Trainer, n: int, tick: Any) -> int:
        if self.knobs.no_sync:
            raise KeyboardInterrupt
        return original(self, n, tick)

    monkeypatch.setattr(Trainer, "run", run)
    workload = make_workload(tiny)
    result = run_ladder(workload, probe_context(workload.device, quick=True))
    assert result.interrupted and result.ideal is None
    assert [r.index for r in result.rungs] == [0, 1, 2, 3, 4]
    assert result.rungs[0].measurement is not None and result.rungs[1].measurement is not None
    assert result.rungs[4].status == "interrupted"


@pytest.mark.cuda
def test_cuda_ladder_pins_prefetches_and_autotunes(tiny: DataSource) -> None:
    """On a GPU: rungs 2 and 3 apply, the prefetcher is used, numbers come after a sync."""
    workload = make_workload(tiny)
    workload.device = torch.device("cuda")
    ctx = probe_context(workload.device, quick=True)
    result = run_ladder(workload, ctx)
    rows = {r.name: r for r in result.rungs}
    assert rows["pinned"].measurement is not None
    assert rows["pinned"].applied["pin_memory"] is True
    assert rows["pinned"].applied["device_prefetcher"] is True
    assert rows["cudnn-benchmark"].measurement is not None
    assert rows["cudnn-benchmark"].applied["cudnn_benchmark"] is True
    assert rows["mixed-precision"].applied["precision"] in ("bf16", "fp16")
    assert torch.backends.cudnn.benchmark is False  # the global switch was put back
    assert result.ideal is not None and result.ideal.applied["loader"] is None
    # rung 2 on top of a ladder without workers (left out as slower, or none chosen) pins too
    trainer = Trainer(workload, Knobs(pinned=True))
    try:
        trainer.run(2, _no_tick)
        assert trainer.applied["pin_memory"] is True and trainer.applied["num_workers"] == 0
    finally:
        trainer.close()


def test_ctrl_c_while_the_workers_are_joined_is_not_lost(tiny: DataSource,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The cause of the flaky Ctrl-C test: dropping the loader runs the DataLoader
    iterator's __del__, which joins the workers (seconds on a loaded machine). A SIGINT
    landing there raised KeyboardInterrupt inside __del__, which Python swallows
    ("Exception ignored in ..."): the ladder climbed on. Here the SIGINT lands there on
    purpose, sent by the process to itself at the start of the shutdown."""
    import signal

    from torch.utils.data import dataloader

    original = dataloader._MultiProcessingDataLoaderIter._shutdown_workers
    landed: list[bool] = []

    def shutdown_with_ctrl_c(self: Any) -> None:
        if not landed:
            landed.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        original(self)

    monkeypatch.setattr(dataloader._MultiProcessingDataLoaderIter, "_shutdown_workers",
                        shutdown_with_ctrl_c)
    trainer = Trainer(make_workload(tiny, steps=10, repeats=3), Knobs(workers=True))
    try:
        trainer.run(2, _no_tick)
        assert psutil.Process().children()  # the workers run
        with pytest.raises(KeyboardInterrupt):
            trainer.close_loader()
        assert landed
    finally:
        trainer.close()
    assert psutil.Process().children() == []  # and they were ended all the same
