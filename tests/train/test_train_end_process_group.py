"""end_process_group with two real gloo processes: the last barrier waits for the late
rank, is skipped on an error path, and gives up on a rank that is gone."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from _train_helpers import end_worker

from pitstop.train import end_process_group


def run_ranks(tmp_path: Path, mode: str) -> dict[str, Any]:
    ctx = mp.start_processes(end_worker, args=(2, str(tmp_path), mode), nprocs=2, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + 150
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                raise AssertionError(f"the ranks did not finish in 150 s ({mode})")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
                proc.join()
    result: dict[str, Any] = json.loads((tmp_path / "result.json").read_text())
    return result


def test_without_a_process_group_it_does_nothing() -> None:
    assert not dist.is_initialized()
    end_process_group()
    end_process_group(wait_for_peers=False)
    assert not dist.is_initialized()


def test_the_first_rank_at_the_end_waits_for_the_last(tmp_path: Path) -> None:
    result = run_ranks(tmp_path, "wait")
    assert result == {"peer_arrived_before_return": True, "initialized_after": False}


def test_on_an_error_path_it_does_not_wait(tmp_path: Path) -> None:
    result = run_ranks(tmp_path, "no-wait")
    assert result == {"initialized_after": False}
    assert (tmp_path / "r1_saw_r0_done_True").exists()


@pytest.mark.timeout(120)
def test_a_rank_that_is_gone_is_given_up_on(tmp_path: Path) -> None:
    result = run_ranks(tmp_path, "missing")
    assert result == {"initialized_after": False}
