"""pitstop.tune.model with real torch steps on a CPU: the options it tries and the ones it
says it cannot, the loss guard, batch size search with out-of-memory recovery, models that
compute their own loss; and under real torchrun/gloo, all ranks agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pitstop_testing import pitstop_env
from tune_factories import (
    cancellation_model,
    gpt_style,
    hf_style,
    memory_bound,
    mlp_model,
    slow_under_bf16,
)

import pitstop.tune
from pitstop.tune.config import read_model_config

HERE = Path(__file__).resolve().parent


def test_mlp_on_a_cpu_tries_what_it_can_and_says_what_it_cannot(tmp_path: Path) -> None:
    result = pitstop.tune.model(mlp_model(), device="cpu", budget=20, repeat_seconds=0.1,
                                skip=("compile",))
    assert result.reference is not None and result.reference.measured
    assert result.reference.config.precision == "fp32" and not result.reference.config.tf32
    groups = {t.group for t in result.trials}
    assert {"reference", "precision", "optimizer"} <= groups
    why = dict(result.not_tried)
    assert "no CUDA" in why["fp16+scaler"] and "no CUDA" in why["tf32"]
    assert "no CUDA" in why["cudnn.benchmark"]
    assert "no Conv2d" in why["channels_last"]
    assert all(t.config.precision != "fp16" for t in result.trials)  # never faked
    assert result.config is not None
    path = tmp_path / "pitstop-model.json"
    result.save(path)
    assert read_model_config(path) == result.settings


def test_an_option_whose_losses_drift_from_fp32_is_rejected_with_the_numbers() -> None:
    result = pitstop.tune.model(cancellation_model(), device="cpu", budget=15,
                                repeat_seconds=0.05, tolerance=0.05, skip=("compile",))
    bf16 = next(t for t in result.trials if t.config.precision == "bf16")
    assert bf16.status == "rejected", bf16.as_dict()
    assert "loss drifted" in (bf16.reason or "") and "vs" in (bf16.reason or "")
    assert result.config is not None and result.config.precision == "fp32"
    doc = result.as_dict()
    assert any(t["status"] == "rejected" and t["losses"] for t in doc["trials"])


def test_batch_size_search_recovers_from_out_of_memory() -> None:
    # 20 ms a step whatever the batch, out of memory above 40 samples: larger is faster
    # up to the limit, which the search finds by halving the gap after the failure.
    result = pitstop.tune.model(memory_bound(), batch_size=8, device="cpu", budget=40,
                                repeat_seconds=0.1, skip=("compile", "precision", "optimizer"))
    assert result.batch is not None
    sizes = {t.config.batch_size: t for t in result.batch.trials}
    assert any(t.status == "oom" for t in sizes.values())
    assert 64 in sizes and sizes[64].status == "oom"
    assert result.config is not None and 32 <= result.config.batch_size <= 40
    assert all(t.status != "oom" for t in result.trials if t.config == result.best.config)


@pytest.mark.parametrize("factory", [hf_style, gpt_style])
def test_models_that_compute_their_own_loss(factory) -> None:
    result = pitstop.tune.model(factory(), device="cpu", budget=8, repeat_seconds=0.05,
                                skip=("compile", "batch-size"))
    assert result.reference is not None and result.reference.measured
    assert len(result.reference.losses) == 4
    assert all(loss > 0 for loss in result.reference.losses)


def test_a_trial_that_would_overrun_the_budget_is_cut_off_and_the_run_goes_on() -> None:
    # fp32 steps take milliseconds, a bf16 step 4 s: the bf16 trial's guard steps alone
    # (16 s) do not fit an 8 s budget, so it is cut off where the budget ends, recorded,
    # and the tune still returns its answer with the process state put back.
    before = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32)
    result = pitstop.tune.model(slow_under_bf16(), device="cpu", budget=8, repeat_seconds=0.05,
                                skip=("compile", "optimizer", "batch-size"))
    tried = [t for t in result.trials if t.config.precision == "bf16"]
    assert tried, result.notes
    bf16 = tried[0]
    assert bf16.status == "skipped", bf16.as_dict()
    assert "did not finish within" in (bf16.reason or "")
    assert bf16.measurement is None and bf16.verdict == "skipped"
    assert len(bf16.losses) < 4  # cut off inside the guard steps, not after them
    assert result.config is not None and result.config.precision == "fp32"
    assert result.reference is not None and result.best is result.reference
    assert not torch.is_autocast_enabled("cpu")
    assert (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32) == before
    assert any(t["status"] == "skipped" for t in result.as_dict()["trials"])


# Gloo's C++ threads can abort a rank as its process ends (std::terminate, exit -6), a
# teardown race in torch itself (see pytorch/pytorch#179291); seen once in about ten
# runs of this test in CI. Such a run is done again, whole, once; the second must pass.
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"


def _torchrun(tmp_path: Path, *args: str) -> list[dict]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--standalone", str(HERE / "rank_agreement.py"), str(tmp_path), *args]
    for attempt in (1, 2):
        for r in (0, 1):
            (tmp_path / f"rank{r}.json").unlink(missing_ok=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=pitstop_env(
            {"OMP_NUM_THREADS": "1"}), timeout=240, cwd=tmp_path)
        if proc.returncode == 0 or attempt == 2 or GLOO_TEARDOWN_ABORT not in proc.stderr:
            break
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_torchrun_a_trial_cut_off_on_one_rank_is_cut_off_on_all(tmp_path: Path) -> None:
    # Only rank 1 is slow under bf16 (4 s a step, budget 10 s): its trial is cut off, and
    # rank 0, which finished it, must drop it too (the group runs at its slowest rank's
    # pace).
    answers = _torchrun(tmp_path, "rank_slow_under_bf16")
    assert answers[0]["trials"] and [t[:2] for t in answers[0]["trials"]] == \
        [t[:2] for t in answers[1]["trials"]]
    bf16 = [next(t for t in a["trials"] if t[0].startswith("bf16")) for a in answers]
    assert bf16[0][1] == bf16[1][1] == "skipped", bf16
    assert "another rank" in bf16[0][2] and "did not finish within" in bf16[1][2]
    assert answers[0]["settings"] == answers[1]["settings"]
    assert answers[0]["settings"]["precision"] == "fp32"


def test_torchrun_ranks_agree_on_one_batch_size(tmp_path: Path) -> None:
    # Rank 0 fits 24 samples, rank 1 fits 96: both must settle on what rank 0 fits.
    answers = _torchrun(tmp_path, "rank_memory_bound")
    assert answers[0]["settings"] == answers[1]["settings"]
    assert answers[0]["settings"]["batch_size"] <= 24
    assert answers[0]["oom_sizes"] == answers[1]["oom_sizes"] and answers[0]["oom_sizes"]
    assert answers[0]["world_size"] == 2
    cli = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--standalone", "-m", "pitstop", "tune", "model", "--model",
                          f"{HERE / 'tune_factories.py'}:rank_memory_bound", "--budget", "20s",
                          "--batch-size", "8", "--skip", "compile,precision,optimizer", "--out", str(tmp_path / "cli.json")],
                         capture_output=True, text=True, env=pitstop_env({"OMP_NUM_THREADS": "1"}),
                         timeout=240, cwd=tmp_path)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert cli.stdout.count("pitstop tune model") == 1  # only rank 0 reports
    assert read_model_config(tmp_path / "cli.json")["batch_size"] <= 24


def test_the_shipped_model_factories_are_valid_targets() -> None:
    from pitstop.tune.factory import as_model_target, call_factory
    from pitstop.tune.model_trials import make_batch

    repo = HERE.parents[1]
    for spec in (f"{repo / 'examples' / 'tune_example.py'}:model",
                 "pitstop.tune.bench_workload:model_tiny"):
        target = as_model_target(call_factory(spec, option="--model"), named=spec)
        assert target.batch_fn is not None and target.loss_fn is not None
        x, y = make_batch(target, 3)
        assert x.shape[0] == y.shape[0] == 3
        loss = target.loss_fn(target.model(x), y)
        assert loss.dim() == 0 and torch.isfinite(loss)
