"""The DDP rung for real: torchrun, 2 processes, gloo on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _bench_helpers import TINY_CLI, cli_env


def test_torchrun_two_ranks_adds_a_ddp_rung(tmp_path: Path) -> None:
    out_json = tmp_path / "ddp.json"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "pitstop", "bench", *TINY_CLI, "--rungs", "0,1", "--data", str(tmp_path / "c"),
         "--json", str(out_json)],
        env=cli_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    ddp = doc["ddp"]
    assert ddp["world_size"] == 2 and ddp["backend"] == "gloo" and ddp["status"] == "measured"
    assert ddp["applied"]["ddp"] is True
    assert ddp["samples_per_s"]["median"] > 0
    single = ddp["single_rank_samples_per_s"]
    assert single and ddp["scaling_efficiency"] == round(
        ddp["samples_per_s"]["median"] / (2 * single), 4)
    assert doc["workload"]["world_size"] == 2
    # only rank 0 prints: one table, one recommendation
    assert proc.stdout.count("recommended for this machine:") == 1
    assert proc.stdout.count("pitstop bench —") == 1
    assert "DDP scaling efficiency" in proc.stdout
