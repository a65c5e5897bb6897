"""`pitstop tune` for real, in a subprocess: bad input (one line, exit 2), a short run that
writes a config pitstop.train.loader reads, Ctrl-C (a real SIGINT) writing what was
measured, and no worker process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from pitstop_testing import pitstop_env, run_cli_in_process

HERE = Path(__file__).resolve().parent
# See conftest.py: one intra-op thread keeps step times steady on a shared machine.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
FACTORIES = HERE / "tune_factories.py"


def target(name: str) -> str:
    return f"{FACTORIES}:{name}"


def assert_usage_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    # Progress lines of the trials that finished may come first; the error is one line.
    lines = [line for line in proc.stderr.splitlines()
             if line.strip() and not line.startswith(("trial ", "step alone"))]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pitstop: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(("args", "needles"), [
    (["loader", "--dataset", "no_such_module_xyz:make"], ["no module named 'no_such_module_xyz'"]),
    (["loader", "--dataset", "missing_file.py:make"], ["does not exist"]),
    (["loader", "--dataset", f"{FACTORIES}:no_such_factory"], ["has no attribute 'no_such_factory'"]),
    (["loader", "--dataset", "just_a_name"], ["expected MODULE:FACTORY"]),
    (["loader", "--dataset", target("empty")], ["empty (len 0)"]),
    (["loader", "--dataset", target("ragged"), "--batch-size", "4"], ["cannot be collated"]),
    (["loader", "--dataset", target("not_a_dataset")], ["not a Dataset"]),
    (["loader", "--dataset", target("raising_factory")], ["the factory raised RuntimeError",
                                                          "/data/train.lmdb"]),
    (["loader", "--dataset", target("slow_items"), "--budget", "1s", "--batch-size", "2"],
     ["too small for one trial", "--budget"]),
    (["model", "--model", target("slow_model"), "--budget", "1s"],
     ["too small for one trial", "--budget", "did not finish within"]),
    (["loader", "--dataset", target("quick"), "--budget", "soon"], ["--budget 'soon'"]),
    (["loader", "--dataset", target("quick"), "--budget", "0s"], ["more than 0 seconds"]),
    (["loader", "--dataset", target("quick"), "--out", "/nonexistent-dir/x.json"],
     ["does not exist"]),
    (["loader"], ["needs --dataset"]),
    (["model"], ["needs --model"]),
    ([], ["needs what to tune"]),
    (["model", "--model", target("quick")], ["unknown key 'dataset'"]),
    (["model", "--model", target("ragged")], ["returned Ragged"]),
    (["model", "--model", target("mlp_model"), "--dataset", target("quick")], ["--dataset is for"]),
    (["loader", "--dataset", target("quick"), "--device", "cuda"], ["--device cuda"]),
    (["model", "--model", target("mlp_model"), "--skip", "everything"], ["--skip everything"]),
    (["loader", "--dataset", target("quick"), "--skip", "compile"], ["--skip names model"]),
    (["model", "--model", target("mlp_model"), "--grid"], ["--grid"]),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needles: list[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if "--device" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    # In this process (the CLI's main(), as the console script runs it): one import of
    # torch for all the cases; the worker and import failures below run in subprocesses.
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli_in_process(["tune", *args])
    assert_usage_error(subprocess.CompletedProcess(args, code, out, err), *needles)
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing created


def test_module_that_fails_to_import_is_a_usage_error(tmp_path: Path, pitstop_cli) -> None:
    broken = tmp_path / "broken_data.py"
    broken.write_text("import torch\ndef make(:\n    pass\n")
    proc = pitstop_cli("tune", "loader", "--dataset", f"{broken}:make", cwd=tmp_path)
    assert_usage_error(proc, "importing", "SyntaxError", "broken_data.py:2")
    missing_dep = tmp_path / "needs_dep.py"
    missing_dep.write_text("import a_dependency_that_is_not_installed\n")
    proc = pitstop_cli("tune", "loader", "--dataset", "needs_dep:make", cwd=tmp_path)
    assert_usage_error(proc, "importing needs_dep failed", "a_dependency_that_is_not_installed")


def test_dataset_raising_in_a_worker_names_the_index_and_the_error(tmp_path: Path,
                                                                    pitstop_cli) -> None:
    proc = pitstop_cli("tune", "loader", "--dataset", target("corrupt_in_workers"),
                       "--budget", "20s", "--out", str(tmp_path / "cfg.json"), cwd=tmp_path)
    assert_usage_error(proc, "raised ValueError: corrupt record at offset", "worker process")
    line = proc.stderr.strip()
    index = int(line.split("dataset[", 1)[1].split("]", 1)[0])
    assert index >= 1000  # the index of the record that really is corrupt
    assert f"offset {index * 4096}" in line
    assert not (tmp_path / "cfg.json").exists()


def test_tune_loader_writes_a_config_that_pitstop_train_reads(tmp_path: Path, pitstop_cli) -> None:
    out, report = tmp_path / "pitstop-loader.json", tmp_path / "tune.json"
    proc = pitstop_cli("tune", "loader", "--dataset", target("quick_with_user_settings"),
                       "--budget", "8s", "--max-workers", "2", "--out", str(out),
                       "--json", str(report), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "chosen:" in proc.stdout and "search:" in proc.stdout
    assert "your settings" in proc.stdout or '"yours"' in report.read_text()
    doc = json.loads(out.read_text())
    assert doc["pitstop"] == "loader-config"
    settings = doc["settings"]
    trials = doc["measured"]["trials"]
    assert trials and any(t["role"] == "yours" for t in trials)
    assert doc["measured"]["choice"]["config"] == settings
    full = json.loads(report.read_text())
    assert full["schema"] == "pitstop.tune/1" and full["loader"]["trials"] == trials
    code = "\n".join([
        "import json, sys",
        f"sys.path.insert(0, {str(HERE)!r})",
        "from tune_factories import Records",
        "from pitstop.train import loader",
        f"dl = loader(Records(64), 8, shuffle=True, device='cpu', config={str(out)!r})",
        "keys = ('num_workers', 'prefetch_factor', 'persistent_workers')",
        "print(json.dumps({k: [v, s] for k, (v, s) in dl.pitstop_settings.items() if k in keys}))",
    ])
    read = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=pitstop_env(), timeout=120)
    assert read.returncode == 0, read.stderr
    seen = json.loads(read.stdout)
    assert seen["num_workers"][0] == settings["num_workers"]
    assert seen["num_workers"][1] == f"config file {out}"


def test_ctrl_c_writes_what_was_measured_and_leaves_no_worker(tmp_path: Path) -> None:
    out = tmp_path / "pitstop-loader.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pitstop", "tune", "loader", "--dataset", target("slow_io"),
         "--budget", "30s", "--out", str(out)],
        cwd=tmp_path, env=pitstop_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    seen_workers: set[int] = set()
    finished = 0
    try:
        assert proc.stderr is not None
        # Trial lines arrive on stderr as each trial ends: wait for two (the second has
        # worker processes), then interrupt the third while it runs.
        for line in proc.stderr:
            if line.startswith("trial "):
                finished += 1
            if finished >= 2:
                break
        for child in psutil.Process(proc.pid).children(recursive=True):
            seen_workers.add(child.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "interrupted" in stdout
    doc = json.loads(out.read_text())
    assert doc["measured"]["interrupted"] is True
    measured = [t for t in doc["measured"]["trials"] if t["status"] == "measured"]
    assert len(measured) >= 2
    assert doc["settings"] == doc["measured"]["choice"]["config"]
    leftovers = [p for p in seen_workers if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert leftovers == []


def test_tune_model_on_a_cpu_says_what_it_could_not_try(tmp_path: Path, pitstop_cli) -> None:
    out = tmp_path / "pitstop-model.json"
    proc = pitstop_cli("tune", "model", "--model", target("mlp_model"), "--budget", "10s",
                       "--out", str(out), "--device", "cpu", "--skip", "compile", cwd=tmp_path,
                       env=ONE_THREAD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for option in ("fp16+scaler", "tf32", "cudnn.benchmark"):
        assert option in proc.stdout
    assert "no CUDA device here" in proc.stdout
    assert "channels_last: not applicable" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["pitstop"] == "model-config"
    from pitstop.tune.config import read_model_config

    assert read_model_config(out) == doc["settings"]
    assert doc["measured"]["trials"][0]["group"] == "reference"


def test_tune_both_states_expected_rate_against_the_ideal(tmp_path: Path, pitstop_cli) -> None:
    proc = pitstop_cli("tune", "--dataset", target("quick"), "--model", target("sleep_model"),
                       "--budget", "16s", "--max-workers", "2", "--device", "cpu",
                       "--skip", "compile,batch-size", cwd=tmp_path, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "expected:" in proc.stdout and "of the ideal" in proc.stdout
    assert "the training step alone" in proc.stdout


def test_help_does_not_import_torch() -> None:
    code = ("import sys, pitstop.cli\n"
            "for argv in (['--help'], ['tune', '--help']):\n"
            "    try:\n"
            "        pitstop.cli.main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=pitstop_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "tune" in proc.stdout and "--dataset MODULE:FACTORY" in proc.stdout
    assert proc.stdout.strip().endswith("False")


@pytest.mark.parametrize(("blocked", "needle"), [
    ("torch,numpy,PIL", "pitstop tune needs torch >= 2.4, which is not installed"),
    ("numpy,PIL", "pitstop tune needs Pillow, numpy, not installed in this Python; install "
                  "them with: pip install 'pitstop[tune]'"),
])
def test_missing_libraries_are_named_with_what_to_install(tmp_path: Path, blocked: str,
                                                          needle: str) -> None:
    from test_packaging import BLOCKER

    proc = subprocess.run([sys.executable, "-c", BLOCKER, blocked, "tune", "model", "--model",
                           target("mlp_model")], cwd=tmp_path, env=pitstop_env(ONE_THREAD),
                          capture_output=True, text=True, timeout=120)
    assert_usage_error(proc, needle)
    assert list(tmp_path.iterdir()) == []
