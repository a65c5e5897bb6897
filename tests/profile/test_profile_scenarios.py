"""Planted scenarios, each run for real under ``pitstop profile`` on CPU, verdict asserted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"
SRC = Path(__file__).resolve().parents[2] / "src"
PROFILE = ("profile", "--steps", "8", "--warmup", "3")


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """``python -m pitstop ARGS`` for real, in a subprocess."""
    env_all = dict(os.environ)
    env_all["PYTHONPATH"] = str(SRC) + os.pathsep + env_all.get("PYTHONPATH", "")
    env_all["COLUMNS"] = "200"
    env_all["PYTHONUNBUFFERED"] = "1"
    if env:
        env_all.update(env)
        if "PYTHONPATH" in env:
            env_all["PYTHONPATH"] = str(SRC) + os.pathsep + env["PYTHONPATH"]
    return subprocess.run([sys.executable, "-m", "pitstop", *args], cwd=cwd, env=env_all,
                          capture_output=True, text=True, timeout=150)


def _profile(tmp_path: Path, *command: str, extra: tuple[str, ...] = ()) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "out"
    proc = _run(*PROFILE, *extra, "--out", str(out), "--", *command, cwd=tmp_path)
    doc_path = out / "profile.json"
    assert doc_path.exists(), proc.stderr
    doc = json.loads(doc_path.read_text())
    html = (out / "report.html").read_text()
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    return proc, doc


def _codes(doc: dict[str, Any]) -> set[str]:
    return {f["code"] for f in doc["findings"]}


def _bottleneck(doc: dict[str, Any]) -> str:
    """The verdict the step's shares show. This machine is shared: when other processes
    starve the run, the verdict is ``contention`` and names the shares' verdict as
    ``underlying``, which is then what a scenario is checked against."""
    if doc["verdict"] == "contention":
        assert "PF013" in _codes(doc)
        return str(doc["evidence"]["underlying"])
    return str(doc["verdict"])


def test_input_bound(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "input_bound.py"), "14")
    assert proc.returncode == 0, proc.stderr
    assert _bottleneck(doc) == "input-bound", doc["headline"]
    assert "PF001" in _codes(doc)
    assert doc["ranks"][0]["phase_share"]["data"] >= 0.3
    assert doc["status"] == "complete"
    assert len([s for s in doc["ranks"][0]["steps"] if s["kind"] == "measured"]) == 8
    assert any("pitstop bench" in f["text"] for f in doc["fixes"])
    assert doc["verdict"].upper() in proc.stderr


def test_io_bound(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "io_bound.py"),
                         str(tmp_path / "data"), "14")
    assert proc.returncode == 0, proc.stderr
    assert _bottleneck(doc) == "io-bound", (doc["headline"], doc["facts"])
    assert {"PF001", "PF002"} <= _codes(doc)
    assert doc["facts"]["workers"] == 2


def test_compute_bound(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "compute_bound.py"), "14")
    assert proc.returncode == 0, proc.stderr
    assert _bottleneck(doc) == "compute-bound", (doc["headline"], doc["facts"].get("probe"))
    assert doc["facts"]["probe"]["matmul_share_of_op_time"] >= 0.5


def test_host_bound(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "host_bound.py"), "14")
    assert proc.returncode == 0, proc.stderr
    assert _bottleneck(doc) == "host-bound", (doc["headline"], doc["facts"].get("probe"))
    probe = doc["facts"]["probe"]
    assert probe["ops_per_step"] >= 1000
    assert probe["host_overhead_share"] >= 0.5
    assert "PF003" in _codes(doc)


def test_torchrun_straggler(tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed next to this python")
    proc, doc = _profile(tmp_path, str(torchrun), "--standalone", "--nproc-per-node", "2",
                         str(SCRIPTS / "ddp_straggler.py"), "14")
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["rank"] for r in doc["ranks"]) == [0, 1]
    assert [s["rank"] for s in doc["stragglers"]] == [1], doc["ranks"]
    assert "PF007" in _codes(doc)
    assert "rank 1" in proc.stderr


def test_passthrough(tmp_path: Path) -> None:
    script = SCRIPTS / "passthrough.py"
    proc, doc = _profile(tmp_path, sys.executable, str(script), "12", "7", "--flag=x y")
    assert proc.returncode == 7
    seen = json.loads(proc.stdout.strip().splitlines()[0])
    assert seen["argv"] == [str(script), "12", "7", "--flag=x y"]
    assert seen["name"] == "__main__"
    assert seen["file"] == str(script)
    assert seen["sitecustomize_dirs"] == []  # pitstop's folder is hidden from sys.path
    assert "to stderr" in proc.stderr
    assert doc["exit_code"] == 7
    assert doc["status"] == "complete"  # 3 + 8 steps of the 12 run


def test_script_that_raises_keeps_partial_profile(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "raises.py"), "6")
    assert proc.returncode == 1
    assert "planted failure" in proc.stderr  # the script's traceback passes through
    assert doc["status"] == "partial"
    assert doc["script_exit"] == {"kind": "exception", "type": "RuntimeError",
                                  "message": "planted failure after some steps"}
    assert len(doc["ranks"][0]["steps"]) == 6
    assert doc["exit_code"] == 1


def test_script_without_torch(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint('hello')\nsys.exit(4)\n")
    proc, doc = _profile(tmp_path, sys.executable, str(script))
    assert proc.returncode == 4
    assert proc.stdout.strip() == "hello"
    assert doc["verdict"] == "unknown"
    assert "PF011" in _codes(doc)


def test_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    script = tmp_path / "show.py"
    script.write_text("import os, sitecustomize\nprint(os.environ.get('CHAINED'), "
                      "sitecustomize.__file__)\n")
    out = tmp_path / "out"
    proc = _run(*PROFILE, "--out", str(out), "--", sys.executable, str(script),
                       cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["yes", str(site / "sitecustomize.py")]


def test_bad_command_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run("profile", "--out", str(tmp_path / "o"), "--", "no-such-command-xyz",
                       cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("pitstop: error: no-such-command-xyz")
    assert "Traceback" not in proc.stderr
    proc = _run("profile", "--", sys.executable, "missing_script.py", cwd=tmp_path)
    assert proc.returncode == 2 and "missing_script.py" in proc.stderr
    assert not (tmp_path / "pitstop-profile" / "profile.json").exists()


def test_api_context_manager(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "api_user.py"), str(tmp_path / "o")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"verdict": seen["verdict"], "steps": 8, "unpatched": True}
    assert seen["verdict"] in ("input-bound", "io-bound", "host-bound", "compute-bound", "contention",
                               "memory-bound", "unknown")
    doc = json.loads((tmp_path / "o" / "profile.json").read_text())
    assert doc["status"] == "complete" and doc["verdict"] == seen["verdict"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_long_run(tmp_path: Path, *, new_session: bool = False) -> subprocess.Popen[str]:
    """``pitstop profile`` over a script that trains until a signal; returns once the
    script has printed "ready" (a few steps done)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "pitstop", "profile", "--steps", "1000000",
                             "--warmup", "1", "--out", str(tmp_path / "out"), "--", sys.executable,
                             str(SCRIPTS / "runs_until_killed.py")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=new_session,
                            # A suite started in the background by a non-interactive shell
                            # inherits SIGINT ignored, as a terminal's foreground job never is.
                            preexec_fn=_default_sigint)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise AssertionError(proc.communicate(timeout=60)[1])
    return proc


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        return proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_keeps_partial_profile_and_signal_exit(tmp_path: Path) -> None:
    proc = _start_long_run(tmp_path)
    proc.send_signal(signal.SIGTERM)  # pitstop passes it on to the script
    err = _finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err
    doc = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert doc["status"] == "partial"
    assert doc["script_exit"] == {"kind": "signal", "signal": "SIGTERM"}
    assert len(doc["ranks"][0]["steps"]) >= 4


def test_import_is_cheap() -> None:
    code = ("import sys, pitstop, pitstop.profile; "
            "assert 'torch' not in sys.modules; assert callable(pitstop.profile)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


@pytest.mark.cuda
def test_cuda_syncs_copies_and_device_time(tmp_path: Path) -> None:
    script = SCRIPTS / "cuda_syncs.py"
    proc, doc = _profile(tmp_path, sys.executable, str(script), "20")
    assert proc.returncode == 0, proc.stderr
    assert doc["facts"]["device"] == "cuda"
    measured = [s for s in doc["ranks"][0]["steps"] if s["kind"] == "measured"]
    assert all(s["syncs"] >= 1 for s in measured)
    assert all(s["device_ms"] is not None and s["device_ms"] > 0 for s in measured)
    assert all(s["phases_ms"]["h2d"] > 0 for s in measured)
    sync = next(f for f in doc["findings"] if f["code"] == "PF004")
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if "SYNC-LINE" in text)
    assert sync["location"] == {"path": str(script), "line": line, "column": 0}
    assert "synchronizing" not in proc.stderr  # the sync warnings are swallowed
    assert doc["facts"]["probe"]["kernels_per_step"] > 0


@pytest.mark.parametrize("args", [
    ("profile",),
    ("profile", "--"),
    ("profile", "--out", "{file}", "--", "true"),
    ("profile", "--out", "{file}/sub", "--", "true"),
])
def test_usage_errors_are_one_line_and_run_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "a-file").write_text("")
    marker = tmp_path / "ran"
    argv = [a.replace("{file}", str(tmp_path / "a-file")) for a in args]
    if argv[-1] == "true":
        argv[-1:] = ["touch", str(marker)]
    proc = _run(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pitstop: error: "), proc.stderr
    assert not marker.exists()
    assert not (tmp_path / "pitstop-profile").exists()


def test_non_python_command_keeps_its_exit_code(tmp_path: Path) -> None:
    proc, doc = _profile(tmp_path, "bash", "-c", "echo out; exit 4")
    assert proc.returncode == 4
    assert proc.stdout.strip() == "out"
    assert doc["exit_code"] == 4 and doc["verdict"] == "unknown"
    assert "the command exited with status 4" in proc.stderr


def test_sigkilled_script_exit_137_and_says_the_capture_is_lost(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text("import os, signal, torch\n"
                      "m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for _ in range(3):\n"
                      "    m(torch.randn(2, 4)).sum().backward(); opt.step()\n"
                      "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc, doc = _profile(tmp_path, sys.executable, str(script))
    assert proc.returncode == 128 + signal.SIGKILL
    assert doc["exit_code"] == 137 and doc["ranks"] == []
    assert "killed by SIGKILL" in proc.stderr
    assert any("SIGKILL cannot be caught" in n for n in doc["notes"])


def test_ctrl_c_reaches_the_script_and_the_partial_profile_is_written(tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group."""
    proc = _start_long_run(tmp_path, new_session=True)
    os.killpg(proc.pid, signal.SIGINT)
    err = _finish(proc)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "KeyboardInterrupt" in err  # the script's own traceback passes through
    doc = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert doc["status"] == "partial" and doc["exit_code"] == 130
    assert len(doc["ranks"][0]["steps"]) >= 4


def test_api_with_an_unwritable_out_fails_before_the_block_runs(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    code = ("import pitstop.profile\n"
            "try:\n"
            "    with pitstop.profile.profile(out='a-file/x'):\n"
            "        print('block ran')\n"
            "except NotADirectoryError:\n"
            "    print('refused')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["refused"], proc.stderr


def test_report_cosmetics_cores_ticks_and_means(tmp_path: Path) -> None:
    """No sample shows more cores than the machine has; the step plot's ticks are whole
    steps; the terminal says which figures are means and which the median."""
    proc, doc = _profile(tmp_path, sys.executable, str(SCRIPTS / "compute_bound.py"), "14")
    cores = os.cpu_count() or 1
    for sample in doc["samples"]:
        for entry in (sample.get("procs") or {}).values():
            assert entry.get("cpu") is None or entry["cpu"] <= cores * 1.05, sample
    assert "median" in proc.stderr and "mean per step" in proc.stderr
    from pitstop.profile.svg import line_chart

    svg = line_chart([("rank 0", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0],
                       [1.0] * 12)], integer_x=True, xlabel="")
    ticks = re.findall(r'text-anchor="middle" font-size="11">([^<]*)</text>', svg)
    assert ticks and all(t.isdigit() for t in ticks), ticks
