"""``pitstop bench`` for real, in a subprocess, with tiny sizes through its options."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest
from _bench_helpers import TINY_CLI, cli_env
from PIL import Image
from pitstop_testing import fill, tiny_tmpfs

from pitstop.bench.report import JSON_SCHEMA
from pitstop.bench.rungs import RUNGS


def _rows(doc: dict) -> dict[str, dict]:
    return {row["name"]: row for row in doc["rungs"]}


def test_full_ladder_writes_valid_json_and_plot(tmp_path: Path, pitstop_cli: Any) -> None:
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = pitstop_cli("bench", *TINY_CLI, "--data", str(tmp_path / "cache"),
                       "--compile-timeout", "0.01", "--json", str(out_json),
                       "--plot", str(out_png), env={"COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out_json.read_text())
    jsonschema.validate(doc, JSON_SCHEMA)
    assert [r["name"] for r in doc["rungs"]] == [r.name for r in RUNGS]
    machine = doc["machine"]
    for key in ("cpu_model", "cpu_cores_logical", "cpu_cores_physical", "gpus", "torch"):
        assert key in machine
    assert machine["torch"] and machine["cpu_cores_logical"] >= 1
    rows = _rows(doc)
    assert rows["naive"]["status"] == "baseline" and rows["naive"]["speedup"] == 1.0
    naive = rows["naive"]["applied"]
    assert naive["num_workers"] == 0 and naive["loss_reads_per_step"] == 1.0
    assert naive["precision"] == "fp32" and naive["cudnn_benchmark"] is False
    assert rows["workers"]["applied"]["num_workers"] >= 1
    assert rows["no-sync"]["applied"]["loss_reads_per_step"] < 1
    # compile cannot finish in 10 ms: the bound skips the rung and says why
    assert rows["compile"]["status"] == "skipped"
    assert "did not finish within" in rows["compile"]["reason"]
    for name in ("pinned", "cudnn-benchmark"):
        assert rows[name]["status"] == "not applicable" and rows[name]["reason"]
    for row in doc["rungs"]:
        if row["samples_per_s"] is not None:
            rate = row["samples_per_s"]
            assert rate["min"] <= rate["median"] <= rate["max"]
            assert len(rate["repeats"]) == 2
            assert row["share_of_ideal"] is not None
        else:
            assert row["reason"]
    ideal = doc["ideal"]
    assert ideal["applied"]["loader"] is None and ideal["share_of_ideal"] == 1.0
    assert doc["recommended"]["snippet"].startswith("import torch")
    assert doc["interrupted"] is False
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the table and the recommendation went to stdout
    assert "0 naive" in proc.stdout and "ideal" in proc.stdout and "7 compile" in proc.stdout
    assert "recommended for this machine:" in proc.stdout
    assert "from pitstop.train import" in proc.stdout
    # piped output keeps every snippet line whole (copyable), however narrow the console
    for line in doc["recommended"]["snippet"].splitlines():
        assert line in proc.stdout.splitlines(), line
    # on an 80-column terminal the table wraps inside its cells and loses no word
    from rich.console import Console

    from pitstop.bench.report import table

    title = "pitstop bench — a title long enough that it has to wrap at eighty columns, twice over"
    wide = json.loads(json.dumps(doc))  # five-digit rates: the widest the columns get
    for row in [*wide["rungs"], wide["ideal"]]:
        if row["samples_per_s"] is not None:
            row["samples_per_s"].update(median=12345.6, min=10000.1, max=20000.2)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(table(wide, title=title))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    assert "wrap at eighty columns, twice over" in flat
    for row in [*doc["rungs"], doc["ideal"]]:
        assert row["status"] in flat or row["status"] == "measured", row["status"]


def test_quick_skips_compile_then_a_truncated_jpeg_is_rebuilt(tmp_path: Path,
                                                              pitstop_cli: Any) -> None:
    cache = tmp_path / "cache"
    out_json = tmp_path / "quick.json"
    first = pitstop_cli("bench", *TINY_CLI, "--quick", "--rungs", "0,1,7", "--data", str(cache),
                        "--json", str(out_json))
    assert first.returncode == 0, first.stderr
    assert "wrote 24 synthetic JPEGs" in first.stderr
    rows = _rows(json.loads(out_json.read_text()))
    assert rows["compile"]["status"] == "skipped" and "--quick" in rows["compile"]["reason"]
    assert rows["no-sync"]["reason"] == "not selected (--rungs)"
    assert rows["workers"]["samples_per_s"] is not None
    # a truncated JPEG in the cache: detected, rebuilt, and the run goes on
    victim = sorted(cache.rglob("*.jpg"))[3]
    good = victim.read_bytes()
    victim.write_bytes(good[:200])
    second = pitstop_cli("bench", *TINY_CLI, "--quick", "--rungs", "0", "--data", str(cache))
    assert second.returncode == 0, second.stderr
    assert "cache was rebuilt" in second.stderr and "truncated" in second.stderr
    assert victim.read_bytes() == good


def test_user_image_folder_with_a_truncated_jpeg(tmp_path: Path, pitstop_cli: Any) -> None:
    root = tmp_path / "photos"
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (60, 50), (30 * i, 90, 160)).save(root / label / f"{i}.jpg")
    bad = root / "a" / "2.jpg"
    bad.write_bytes(bad.read_bytes()[:100])
    out_json = tmp_path / "mine.json"
    proc = pitstop_cli("bench", *TINY_CLI, "--rungs", "0", "--data", str(root),
                       "--json", str(out_json))
    assert proc.returncode == 0, proc.stderr
    assert "skipping unreadable image" in proc.stderr and "2.jpg" in proc.stderr
    dataset = json.loads(out_json.read_text())["workload"]["dataset"]
    assert dataset["kind"] == "imagefolder" and dataset["images"] == 12
    assert sorted(p.name for p in root.rglob("*")) == sorted(
        ["a", "b"] + [f"{i}.jpg" for i in range(6)] * 2)  # nothing written into the user's folder


@pytest.mark.parametrize("args, message", [
    (["--rungs", "0,warp"], "--rungs"),
    (["--plot", "chart.svg"], "--plot"),
    (["--device", "cuda"], "--device cuda"),
    (["--data", "afile.txt"], "not a folder"),
    (["--json", "afile.txt/out.json"], "afile.txt is not a folder"),
    (["--rungs", ""], "names no rung"),
    (["--compile-timeout", "nan"], "'nan' is not a finite number"),
    (["--data", "typo/dir"], "folder typo does not exist"),
    (["--json", "typo/x.json"], "folder typo does not exist"),
    (["--plot", "typo/x.png"], "folder typo does not exist"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, pitstop_cli: Any, args: list[str], message: str) -> None:
    if "--device" in args and _cuda():
        pytest.skip("a GPU is present")
    (tmp_path / "afile.txt").write_text("x")
    proc = pitstop_cli("bench", *args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pitstop: error:") and message in lines[0]
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["afile.txt"]  # nothing created from the typo


def test_an_output_that_cannot_be_written_fails_before_the_run(tmp_path: Path,
                                                               pitstop_cli: Any) -> None:
    # /proc accepts no new files: the real write probe says so before any work
    proc = pitstop_cli("bench", *TINY_CLI, "--rungs", "0", "--data", str(tmp_path / "cache"),
                       "--json", "/proc/pitstop-bench-test.json")
    assert proc.returncode == 2
    assert proc.stdout == ""  # nothing measured
    assert proc.stderr.strip().splitlines() == [
        "pitstop: error: --json /proc/pitstop-bench-test.json: cannot write there (No such file "
        "or directory); choose another path for the JSON results"]
    assert not (tmp_path / "cache").exists()  # not even the image cache was made


def test_an_output_that_cannot_be_written_after_the_run_is_one_line(tmp_path: Path,
                                                                     pitstop_cli: Any) -> None:
    # A real disk that is full by the time the results are written (the probe fits).
    with tiny_tmpfs(tmp_path / "full", size_kib=16) as full:
        fill(full)
        proc = pitstop_cli("bench", *TINY_CLI, "--rungs", "0", "--data",
                           str(tmp_path / "cache"), "--json", str(full / "bench.json"))
    assert proc.returncode == 2
    assert "0 naive" in proc.stdout  # the table was printed before the write failed
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"pitstop: error: --json {full / 'bench.json'}: cannot write it (No space left")
    assert "Traceback" not in proc.stderr


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_ctrl_c_prints_the_rungs_measured_so_far(tmp_path: Path, pitstop_cli: Any) -> None:
    out_json = tmp_path / "partial.json"
    long_run = [*TINY_CLI, "--steps", "60", "--repeats", "3", "--rungs", "0-6"]
    # As a terminal's Ctrl-C: SIGINT to the whole process group (bench and its DataLoader
    # workers), in a session of its own so that pytest is not in it. SIGINT starts at
    # its default: a suite run as a background job inherits it ignored, and Python
    # then never installs its KeyboardInterrupt handler.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pitstop", "bench", *long_run, "--data", str(tmp_path / "c"),
         "--json", str(out_json)],
        env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workers: set[int] = set()
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # block until rung 0 has been measured
            seen.append(line)
            if line.startswith("rung 0 naive:"):
                break
        else:
            pytest.fail("bench ended before rung 0 finished:\n" + "".join(seen))
        os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(psutil.Error):
            workers = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(seen) + stderr
    assert proc.returncode == 130, stderr
    assert "naive loop" in stdout and "interrupted (Ctrl-C)" in stdout
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert not [p for p in workers if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]  # workers ended
    doc = json.loads(out_json.read_text())
    assert doc["interrupted"] is True
    rows = doc["rungs"]
    assert rows[0]["status"] == "baseline" and rows[0]["samples_per_s"] is not None
    assert len(rows) < len(RUNGS)  # the climb stopped where Ctrl-C landed
    # Ctrl-C lands in a rung (marked interrupted) or between two (nothing half-done)
    assert all(r["status"] != "interrupted" for r in rows[:-1])


@pytest.mark.slow
def test_compile_rung_really_compiles(tmp_path: Path, pitstop_cli: Any) -> None:
    out_json = tmp_path / "compile.json"
    proc = pitstop_cli("bench", *TINY_CLI, "--rungs", "0,7", "--data", str(tmp_path / "c"),
                       "--json", str(out_json), timeout=400)
    assert proc.returncode == 0, proc.stderr
    row = _rows(json.loads(out_json.read_text()))["compile"]
    if row["status"] in ("kept", "slower"):
        assert row["applied"]["compiled"] is True and row["samples_per_s"]["median"] > 0
    else:  # a machine where it cannot work must say why
        assert row["status"] in ("not applicable", "skipped") and row["reason"], row
