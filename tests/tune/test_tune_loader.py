"""pitstop.tune.loader with real DataLoader workers: what it picks on datasets whose best
settings are known, memory safety, the config it writes, no worker left behind."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import torch
import torch.nn.functional as F
from tune_factories import CorruptInWorkers, Ragged, Records, SlowInWorkers

import pitstop.tune
from pitstop.errors import UsageError
from pitstop.train import loader as train_loader
from pitstop.train.loader import MachineFacts, gather_machine_facts
from pitstop.tune.budget import Budget
from pitstop.tune.calibration import LimitedIO, SleepIO, SleepStep
from pitstop.tune.factory import as_dataset_target, as_model_target
from pitstop.tune.loader_trials import CountingConsumer, LoaderConfig, LoaderTrials
from pitstop.tune.measure import TrialPlan
from pitstop.tune.model_trials import BuiltStep, ModelConfig, StepConsumer
from pitstop.tune.search import LoaderSearch, SearchDomain


def children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    before = {p.pid for p in children()}
    yield
    left = [p for p in children() if p.pid not in before]
    assert left == [], f"worker processes left behind: {left}"


def test_the_fewest_workers_that_keep_a_step_fed() -> None:
    # The step takes 0.1 s; a worker makes a batch (one sample) in 0.14 s. One worker
    # feeds the step 71 % of what it could take, two 141 %: two keep up, more buy
    # nothing (margins as wide as two neighbouring counts allow; long sleeps, so that
    # the scheduling delays of a busy machine are a small part of each).
    model = {"model": SleepStep(0.1), "loss_fn": F.cross_entropy}
    result = pitstop.tune.loader(SleepIO(4096, 0.14), 1, device="cpu", model=model,
                                 budget=40, max_workers=4, repeat_seconds=0.35)
    assert result.step is not None and result.choice is not None
    assert result.choice.config.num_workers == 2, [t.as_dict() for t in result.trials]
    measured = {t.config.num_workers for t in result.trials if t.measured}
    assert {1, 2} <= measured
    # Whether the sweep also tries 4 is not asserted: 2 workers stop it only if their
    # whole-step rate reaches 95 % of the step's best rate alone, a 5 % margin that a
    # load average of 5 on 2 CPUs ate in one run of three (docs/tune.md, "What does not
    # work yet"). The choice above must hold either way, and a count that misses the
    # threshold and is then called fed (measured again in turns with one that passes)
    # must be one that does keep up: never 1 worker, 29 % short.
    assert not any(t.fed_in_turns and t.config.num_workers < 2 for t in result.trials)
    assert all(t.rounds >= 2 for t in result.trials if t.fed_in_turns)
    assert result.consumer.startswith("the training step")


def test_sleep_bound_io_is_swept_past_the_cpu_count() -> None:
    facts = gather_machine_facts()
    result = pitstop.tune.loader(LimitedIO(4096, 0.004, concurrency=3), 8, device="cpu",
                                 budget=20, repeat_seconds=0.2,
                                 facts=MachineFacts(1, "test: one CPU", 1, facts.ram_available,
                                                    facts.shm_free))
    assert result.choice is not None
    # One CPU, but the workers wait on a store that serves 3 reads at once.
    assert result.choice.config.num_workers >= 3
    assert any("past the CPU count" in n for n in result.notes)
    assert result.untried > 0 and len(result.trials) < result.grid_size


def test_a_trial_that_would_not_fit_in_memory_is_never_started() -> None:
    facts = gather_machine_facts()
    batch = 8 * 3 * 16 * 16 * 4 + 8 * 8  # the collated batch: images and labels
    tiny_shm = MachineFacts(2, "test", 1, facts.ram_available, shm_free=int(batch * 4.5) * 2)
    result = pitstop.tune.loader(SleepIO(2048, 0.002), 8, device="cpu", budget=15,
                                 repeat_seconds=0.15, facts=tiny_shm)
    assert result.preflight.batch_bytes == batch
    for t in result.trials:
        if t.status == "measured":
            assert t.config.in_flight * batch <= tiny_shm.shm_free / 2  # type: ignore[operator]
            assert t.memory is not None and t.memory.fits
    skipped = [t for t in result.trials if t.status == "skipped"]
    assert skipped and all("would not fit memory" in (t.reason or "") for t in skipped)
    assert all(t.startup_s is None for t in skipped)  # never started


def test_written_config_is_read_by_pitstop_train_loader(tmp_path: Path) -> None:
    data = {"dataset": Records(1024), "batch_size": 8, "num_workers": 2,
            "persistent_workers": False}
    result = pitstop.tune.loader(data, device="cpu", budget=12, repeat_seconds=0.15,
                                 max_workers=2)
    assert result.yours is not None and result.yours.measured
    assert result.yours.config == LoaderConfig(2, 2, False, False)
    path = tmp_path / "pitstop-loader.json"
    result.save(path)
    doc = json.loads(path.read_text())
    assert doc["settings"] == result.settings
    dl = train_loader(Records(64), 8, shuffle=True, device="cpu", config=path)
    assert dl.num_workers == result.settings["num_workers"]
    assert dl.pitstop_settings["num_workers"][1] == f"config file {path}"
    del dl


def test_the_epoch_boundary_costs_a_restart_only_without_persistent_workers() -> None:
    # Each worker start costs 0.3 s (worker_init_fn): without persistent workers every
    # epoch boundary pays it again. (Lower bounds only: a busy machine adds time.)
    target = as_dataset_target({"dataset": Records(512, wait=0.0), "batch_size": 8,
                                "worker_init_fn": _slow_worker_start})
    trials = LoaderTrials(target, 8, consumer=CountingConsumer(torch.device("cpu"), 8),
                          facts=gather_machine_facts(), plan=TrialPlan(repeat_seconds=0.1),
                          budget=Budget(60))
    persistent = trials.measure(LoaderConfig(1, 2, False, True), "test")
    assert persistent.measured and persistent.startup_s is not None
    assert persistent.startup_s >= 0.3
    restart = trials.boundary_only(LoaderConfig(1, 2, False, False), persistent, "persistent")
    assert restart.measured and restart.derived_from == 1
    assert restart.boundary_s is not None and restart.boundary_s >= 0.25
    assert restart.effective is not None and persistent.effective is not None
    assert restart.measurement is persistent.measurement  # same steady state, not re-measured


def _slow_worker_start(worker_id: int) -> None:
    import time

    time.sleep(0.3)  # a worker that opens files, connects to a store, ...


def test_a_dataset_error_in_a_worker_names_the_index_and_leaves_no_worker() -> None:
    with pytest.raises(UsageError) as err:
        pitstop.tune.loader(CorruptInWorkers(2048, wait=0.0), 64, device="cpu", budget=20,
                            repeat_seconds=0.1, max_workers=1)
    text = err.value.message
    assert "raised ValueError: corrupt record" in text and "worker process" in text
    index = int(text.split("dataset[", 1)[1].split("]", 1)[0])
    assert index >= 1000


def test_a_loader_trial_cut_off_by_the_budget_is_recorded_and_leaves_no_worker() -> None:
    # In the main process an item is instant; in a worker it takes 3 s, so a batch of 4
    # from one worker takes 12 s, past the 6 s budget: that trial is cut off where the
    # budget ends, its workers are shut down (the fixture checks), and the run answers.
    result = pitstop.tune.loader(SlowInWorkers(256), 4, device="cpu", budget=6,
                                 repeat_seconds=0.1, max_workers=2)
    cut = [t for t in result.trials if t.status == "skipped"
           and "did not finish within" in (t.reason or "")]
    assert cut, [t.as_dict() for t in result.trials]
    assert all(t.config.num_workers >= 1 and not t.measured for t in cut)
    assert result.choice is not None and result.choice.config.num_workers == 0


def test_uncollatable_batches_and_empty_datasets_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="cannot be collated"):
        pitstop.tune.loader(Ragged(), 4, device="cpu", budget=5)
    with pytest.raises(UsageError, match="empty"):
        pitstop.tune.loader(torch.utils.data.TensorDataset(torch.zeros(0, 3)), 4, budget=5)


def test_full_grid_measures_every_configuration() -> None:
    result = pitstop.tune.loader(Records(512, wait=0.0), 8, device="cpu", budget=60,
                                 repeat_seconds=0.05, max_workers=1, strategy="grid")
    assert len(result.trials) == result.grid_size == 1 + 1 * 4 * 2
    assert result.untried == 0 and result.choice is not None


def test_measured_in_turns_a_fed_count_ties_with_more_workers_a_starved_one_does_not() -> None:
    # The rule that keeps a hard "fed" threshold from letting noise pick 8 workers over
    # 4: two counts measured again in turns, compared pooled. The step waits 60 ms per
    # batch; a worker makes one in 96 ms: 1 worker feeds 62 % of the step, 2 and 4
    # workers 125 % and 250 % (both fed: the same rate, the step's). The margins are
    # 5 % (the rule) against 0 % and 38 %: a busy machine delays each sleep by a
    # millisecond or two, and both sides of a comparison alike.
    model = as_model_target({"model": SleepStep(0.06), "loss_fn": F.cross_entropy})
    consumer = StepConsumer(BuiltStep(model, ModelConfig(1, precision="fp32"),
                                      torch.device("cpu")), 1)
    runner = LoaderTrials(as_dataset_target(SleepIO(4096, 0.096)), 1, consumer=consumer,
                          facts=gather_machine_facts(), plan=TrialPlan(repeat_seconds=0.3),
                          budget=Budget(600))
    search = LoaderSearch(runner, SearchDomain.for_machine(2, cuda=False, max_workers=4),
                          budget=Budget(600), step_rate=1 / 0.06)
    try:
        one, two, four = (runner.measure(LoaderConfig(w, 2, False, True), "test")
                          for w in (1, 2, 4))
        assert search.as_fast_in_turns(two, four), [t.as_dict() for t in (two, four)]
        assert not search.as_fast_in_turns(one, four), [t.as_dict() for t in (one, four)]
    finally:
        consumer.close()
    assert one.rounds == 2 and two.rounds == 2 and four.rounds == 3
    assert len(runner.trials) == 3  # measured again in place: pooled, not new trials

