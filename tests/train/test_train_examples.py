"""The examples run, for real, as a user would run them (CPU, a few steps)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
VENV_BIN = Path(sys.executable).parent


def run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"OMP_NUM_THREADS": "1", "PITSTOP_LOADER_CONFIG": "", "PYTHONUNBUFFERED": "1"})
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_naive_and_pitstop_examples_train_the_same_model(tmp_path: Path) -> None:
    naive = run([sys.executable, str(EXAMPLES / "train_naive.py"), "--steps", "3", "--batch-size", "8",
                 "--device", "cpu"], tmp_path)
    assert naive.returncode == 0, naive.stderr
    assert "done: 3 steps" in naive.stdout
    fast = run([sys.executable, str(EXAMPLES / "train_pitstop.py"), "--steps", "3", "--batch-size", "8",
                "--device", "cpu", "--accumulate", "2", "--log-every", "1"], tmp_path)
    assert fast.returncode == 0, fast.stderr
    assert "pitstop.train.fast_defaults:" in fast.stdout
    assert "num_workers" in fast.stdout and "precision:" in fast.stdout
    assert fast.stdout.count("loss") >= 3 and "done: 3 steps" in fast.stdout


def test_ddp_example_under_torchrun_with_two_cpu_processes(tmp_path: Path) -> None:
    torchrun = VENV_BIN / "torchrun"
    cmd = ([str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"])
    result = run([*cmd, "--standalone", "--nproc-per-node", "2", str(EXAMPLES / "train_ddp.py"),
                        "--steps", "4", "--batch-size", "8", "--log-every", "2"], tmp_path, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "world 2" in result.stdout
    assert "DistributedSampler(rank 0 of 2" in result.stdout
    assert "(mean over ranks)" in result.stdout and "done: 4 steps" in result.stdout


def test_example_bad_input_is_a_one_line_usage_error(tmp_path: Path) -> None:
    result = run([sys.executable, str(EXAMPLES / "train_pitstop.py"), "--steps", "1",
                  "--device", "cpu", "--precision", "fp16"], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "error: precision='fp16' needs a CUDA GPU" in result.stderr.strip().splitlines()[-1]
