"""`pitstop monitor --once [--json]` for real: the documented, versioned schema; no torch
and no Textual needed for anything but the live screen; options that cannot go together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
from monitor_helpers import NVML_SETS
from pitstop_testing import REPO, pitstop_env, run_pitstop

from pitstop.monitor.snapshot import SCHEMA_VERSION, SNAPSHOT_SCHEMA

SCHEMA_FILE = REPO / "docs" / "monitor-snapshot.schema.json"


def _no_textual(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import textual` fails, as on a machine without it."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['textual'] = None\n")
    return {"PYTHONPATH": f"{REPO / 'src'}:{tmp_path}"}


def test_once_json_follows_the_committed_schema() -> None:
    r = run_pitstop("monitor", "--once", "--json", "--interval", "0.3",
                    "--nvml-recording", str(NVML_SETS / "h100-sxm-compute.json"))
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    jsonschema.validate(snap, SNAPSHOT_SCHEMA)
    assert snap["version"] == SCHEMA_VERSION
    g = snap["gpus"][0]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["gpm"]["sm_active_pct"] > 50
    assert snap["cpu"]["per_core_pct"] and snap["memory"]["total_bytes"] > 0
    assert snap["verdicts"] and snap["verdicts"][0]["line"]


def test_schema_file_in_docs_is_current() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == SNAPSHOT_SCHEMA, (
        "regenerate: python -m pitstop.monitor.snapshot > docs/monitor-snapshot.schema.json")


def test_once_without_a_gpu_says_so_and_shows_the_host() -> None:
    r = run_pitstop("monitor", "--once", "--interval", "0.3", "--no-gpu")
    assert r.returncode == 0, r.stderr
    assert "no GPU panels" in r.stdout and "HOST" in r.stdout and "memory" in r.stdout
    assert "PID" in r.stdout and "COMMAND" in r.stdout
    # Every verdict is printed: none is left to "a taller terminal".
    assert "more: a taller terminal" not in r.stdout and r.stdout.startswith("▶ ")


def test_monitor_imports_neither_torch_nor_textual_without_the_screen(tmp_path: Path) -> None:
    code = ("import sys, io, contextlib\n"
            "from pitstop.cli import main\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    try:\n"
            "        main(['monitor', '--once', '--json', '--interval', '0.2'])\n"
            "    except SystemExit as e:\n"
            "        assert e.code == 0, e.code\n"
            "bad = sorted(m for m in ('torch', 'textual', 'numpy', 'matplotlib') if m in sys.modules)\n"
            "print('loaded:', bad)\n")
    r = subprocess.run([sys.executable, "-c", code], env=pitstop_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("loaded: []"), r.stdout


def test_without_textual_only_the_live_screen_is_refused(tmp_path: Path) -> None:
    env = _no_textual(tmp_path)
    r = run_pitstop("monitor", env=env)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "pip install 'pitstop[monitor]'" in r.stderr
    r = run_pitstop("monitor", "--once", "--json", "--interval", "0.2", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["schema"] == "pitstop.monitor.snapshot"
    out = tmp_path / "r.csv"
    r = run_pitstop("monitor", "--record", str(out), "--interval", "0.2", "--duration", "1", env=env)
    assert r.returncode == 0, r.stderr
    assert out.read_text().count("\n") >= 3
    r = run_pitstop("monitor", "--replay", str(out), env=env)
    assert r.returncode == 2 and "Textual" in r.stderr


def test_options_that_cannot_go_together(tmp_path: Path) -> None:
    for args, words in (
        (["--once", "--prometheus", "9400"], "--once and --prometheus"),
        (["--once", "--record", str(tmp_path / "r.jsonl")], "--once and --record"),
        (["--replay", "x.jsonl", "--record", str(tmp_path / "r.jsonl")], "--replay and --record"),
        (["--prometheus", "notaport"], "expected PORT"),
        (["--prometheus", "70000"], "between 1 and 65535"),
        (["--pid", "4194303"], "--pid 4194303: no such process"),
        ([], "the live screen needs a terminal"),  # run_pitstop's stdout is a pipe
    ):
        r = run_pitstop("monitor", *args)
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "r.jsonl").exists()
