"""--record for real (a headless `pitstop monitor` subprocess), surviving kill -9 in both
formats, the CSV round trip, and every bad input of --record / --replay / plot: one
line, exit 2, before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from monitor_helpers import wait_until
from pitstop_testing import pitstop_env, run_cli_in_process, run_pitstop

from pitstop.errors import UsageError
from pitstop.monitor.recording import Recorder, read_recording


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("ext", [".jsonl", ".csv"])
def test_recording_survives_kill_9(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"run{ext}"
    proc = subprocess.Popen([sys.executable, "-m", "pitstop", "monitor", "--record", str(out),
                             "--interval", "0.2"], env=pitstop_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _lines(out) >= 8, timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    written = _lines(out)
    rec = read_recording(out)
    # Every line written before the kill parses (jsonl: a header; csv: the column names).
    assert len(rec.snapshots) == written - 1
    assert rec.notes == []
    assert all(s["cpu"]["busy_pct"] is not None for s in rec.snapshots)
    ts = [s["t"] for s in rec.snapshots]
    assert ts == sorted(ts) and ts[-1] - ts[0] > 0.5


def test_headless_record_for_a_duration_then_readable_for_replay_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "short.jsonl"
    r = run_pitstop("monitor", "--record", str(out), "--interval", "0.2", "--duration", "1.5")
    assert r.returncode == 0, r.stderr
    assert "samples written to" in r.stderr
    # What `pitstop plot` and `--replay` read (test_monitor_plot draws a recorder's file).
    rec = read_recording(out)
    assert rec.header["snapshot_version"] == 1 and len(rec.snapshots) >= 4


def test_a_line_cut_by_a_full_disk_is_left_out_with_a_note(tmp_path: Path) -> None:
    from pitstop.monitor.collector import Collector

    out = tmp_path / "cut.jsonl"
    rec = Recorder(out, interval_s=0.2)
    snap = Collector(interval_s=0.2, gpu=False).once(0.2)
    rec.write(snap)
    rec.write(snap)
    rec.close()
    data = out.read_bytes()
    out.write_bytes(data[:-40])  # the last line loses its tail and its newline
    got = read_recording(out)
    assert len(got.snapshots) == 1 and "cut short" in got.notes[0]


def test_csv_round_trip_keeps_the_numbers(tmp_path: Path) -> None:
    from pitstop.monitor.collector import Collector
    from pitstop.monitor.recording import flatten, unflatten
    from pitstop.telemetry.recorded_nvml import load_recorded_nvml

    nv = load_recorded_nvml(Path(__file__).parent / "nvml" / "h100-sxm-compute.json")
    snap = Collector(interval_s=0.2, nvml=nv).once(0.2)
    back = unflatten({k: "" if v is None else str(v) for k, v in flatten(snap).items()})
    g, b = snap["gpus"][0], back["gpus"][0]
    for key in ("utilization_gpu_pct", "memory_used_bytes", "power_draw_w", "clocks_event_reasons"):
        assert b[key] == g[key], key
    assert b["gpm"] == g["gpm"] and b["clocks_event_names"] == g["clocks_event_names"]
    assert back["cpu"]["per_core_pct"] == snap["cpu"]["per_core_pct"]
    assert back["verdicts"][0]["line"] == snap["verdicts"][0]["line"]
    assert [d["name"] for d in back["disks"]] == [d["name"] for d in snap["disks"]]


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    code, out, err = run_cli_in_process(list(args))
    return subprocess.CompletedProcess(list(args), code, out, err)


def _one_line_exit_2(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pitstop: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_bad_record_paths(tmp_path: Path) -> None:
    _one_line_exit_2(run_pitstop("monitor", "--record", str(tmp_path / "nope" / "r.jsonl")),
                     "does not exist")
    assert not (tmp_path / "nope").exists()
    _one_line_exit_2(run_pitstop("monitor", "--record", str(tmp_path / "r.txt")), "unknown extension", ".txt")
    _one_line_exit_2(run_pitstop("monitor", "--record", "/proc/r.jsonl"), "cannot write")
    existing = tmp_path / "old.jsonl"
    existing.write_text("precious\n")
    _one_line_exit_2(run_pitstop("monitor", "--record", str(existing)), "exists", "--overwrite")
    assert existing.read_text() == "precious\n"


def test_corrupt_recordings_for_replay_and_plot(tmp_path: Path) -> None:
    cases = {
        "garbage.jsonl": "this is not json\n",
        "notours.jsonl": json.dumps({"hello": 1}) + "\n",
        "badline.jsonl": json.dumps({"schema": "pitstop.monitor.recording", "version": 1}) + "\n{oops\n"
                         + json.dumps({"schema": "pitstop.monitor.recording"}) + "\n",
        "empty.jsonl": "",
        "notours.csv": "a,b\n1,2\n",
        "binary.jsonl": "\udcff",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        # The first case as real subprocesses, the others through the same main() in this
        # process (a Python start each would cost seconds, and check nothing more).
        run = run_pitstop if name == "garbage.jsonl" else _in_process
        _one_line_exit_2(run("monitor", "--replay", str(path)), name)
        _one_line_exit_2(run("plot", str(path), "-o", str(tmp_path / "x.png")), name)
        assert not (tmp_path / "x.png").exists()
    _one_line_exit_2(_in_process("monitor", "--replay", str(tmp_path / "missing.jsonl")), "no such file")
    _one_line_exit_2(_in_process("plot", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.png")),
                     "no such file")
    _one_line_exit_2(_in_process("plot", str(tmp_path / "garbage.jsonl"), "-o", str(tmp_path / "x.svg")),
                     "unknown extension")


def test_reader_refuses_a_newer_recording(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"schema": "pitstop.monitor.recording", "version": 9}) + "\n")
    with pytest.raises(UsageError, match="newer"):
        read_recording(path)
