"""TrainStep under DDP with two real gloo processes (torch.multiprocessing, spawn).

One launch runs every scenario (see _train_helpers.ddp_worker) to keep the cost of
starting two Python+torch processes to once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from _train_helpers import (
    DDP_ACCUMULATE,
    DDP_BATCH,
    DDP_STEPS,
    ddp_worker,
    train_single,
)

WORLD = 2


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("ddp")
    ctx = mp.start_processes(ddp_worker, args=(WORLD, str(workdir)), nprocs=WORLD, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + 120
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                raise AssertionError("the DDP workers did not finish in 120 s (a hang in a collective?)")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
                proc.join()
    return [torch.load(Path(workdir) / f"rank{r}.pt") for r in range(WORLD)]


def test_ddp_accumulation_matches_single_process_training(ddp_results: list[dict[str, Any]]) -> None:
    reference = train_single(DDP_STEPS, WORLD, DDP_BATCH, accumulate=DDP_ACCUMULATE)
    for rank in range(WORLD):
        for p, r in zip(ddp_results[rank]["A_params"], reference, strict=True):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)


def test_ddp_all_reduces_once_per_optimizer_step_not_per_micro_step(ddp_results: list[dict[str, Any]]) -> None:
    for rank in range(WORLD):
        assert ddp_results[rank]["A_steps"] == DDP_STEPS
        # the model is one gradient bucket: one all-reduce per optimizer step
        assert ddp_results[rank]["A_allreduces"] == DDP_STEPS, (
            f"{ddp_results[rank]['A_allreduces']} all-reduces for {DDP_STEPS} steps of "
            f"{DDP_ACCUMULATE} micro-steps")


def test_compiled_ddp_model_still_skips_sync_on_micro_steps(ddp_results: list[dict[str, Any]]) -> None:
    reference = train_single(DDP_STEPS, WORLD, DDP_BATCH, accumulate=DDP_ACCUMULATE)
    for rank in range(WORLD):
        assert ddp_results[rank]["C_allreduces"] == DDP_STEPS
        for p, r in zip(ddp_results[rank]["C_params"], reference, strict=True):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)


def test_fsdp2_accumulation_matches_single_process_training(ddp_results: list[dict[str, Any]]) -> None:
    reference = train_single(DDP_STEPS, WORLD, DDP_BATCH, accumulate=DDP_ACCUMULATE)
    for rank in range(WORLD):
        assert ddp_results[rank]["D_reduces"] == DDP_STEPS  # one reduce-scatter per step
        for p, r in zip(ddp_results[rank]["D_params"], reference, strict=True):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)


def test_auto_microbatch_ranks_agree_and_train_like_one_process(ddp_results: list[dict[str, Any]]) -> None:
    # Rank 0 fits 4 samples, rank 1 all 16: both must settle on 4.
    assert [r["B_micro"] for r in ddp_results] == [4, 4]
    assert ddp_results[0]["B_attempts"][:3] == [16, 8, 4]
    assert ddp_results[1]["B_attempts"][:4] == [16, 8, 8, 4]  # ran 8+8, then dropped them
    reference = train_single(DDP_STEPS, WORLD, DDP_BATCH, accumulate=1)
    for rank in range(WORLD):
        for p, r in zip(ddp_results[rank]["B_params"], reference, strict=True):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)
