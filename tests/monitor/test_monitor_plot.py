"""`pitstop plot` on recordings made by the recorder: PNG and HTML, with each change of
the verdict marked, from .jsonl and .csv alike."""

from __future__ import annotations

import copy
from pathlib import Path

from monitor_helpers import NVML_SETS
from pitstop_testing import run_pitstop

from pitstop.monitor.collector import Collector
from pitstop.monitor.plot import primary_pid, verdict_changes
from pitstop.monitor.recording import Recorder, read_recording
from pitstop.telemetry.recorded_nvml import load_recorded_nvml


def _recording(path: Path) -> None:
    """Twelve samples of a recorded H100 whose verdict turns input-bound half way."""
    collector = Collector(interval_s=0.2, nvml=load_recorded_nvml(NVML_SETS / "h100-sxm-compute.json"))
    base = collector.once(0.2)
    rec = Recorder(path, interval_s=1.0)
    for i in range(12):
        s = copy.deepcopy(base)
        s["t"] = base["t"] + i
        verdict = "compute-bound" if i < 6 else "input-bound"
        s["verdicts"] = [{"pid": 4242, "gpus": [0], "verdict": verdict, "line": f"PID 4242 → {verdict}"}]
        rec.write(s)
    rec.close()


def test_verdict_changes_are_found() -> None:
    snaps = [{"t": 10.0 + i, "verdicts": [{"verdict": v, "line": v or "none"}]}
             for i, v in enumerate([None, "compute-bound", "compute-bound", "input-bound", "input-bound"])]
    assert [(t, v) for t, v, _ in verdict_changes(snaps)] == [
        (0.0, None), (1.0, "compute-bound"), (3.0, "input-bound")]


def test_the_verdicts_of_one_process_not_of_whichever_is_busiest() -> None:
    """Two processes trading the top place is no verdict change; the one followed with
    --pid is the one the plot is about, even when it is never the busiest."""
    def v(pid: int, verdict: str) -> dict:
        return {"pid": pid, "verdict": verdict, "line": f"PID {pid} → {verdict}"}

    snaps = [{"t": float(i), "processes": [{"pid": 2, "role": "training", "followed": True}],
              "verdicts": [v(1, "compute-bound"), v(2, "input-bound")] if i % 2 else
              [v(2, "input-bound"), v(1, "compute-bound")]} for i in range(6)]
    assert primary_pid(snaps) == 2
    assert [(t, name) for t, name, _ in verdict_changes(snaps, 2)] == [(0.0, "input-bound")]
    for s in snaps:
        s["processes"] = []
    # Nobody followed: the one judged first most often (ties: the first seen).
    assert primary_pid(snaps) == 2 and primary_pid(snaps[1:4]) == 1


def test_png_and_html_with_the_verdict_changes(tmp_path: Path) -> None:
    # .jsonl drawn as PNG, .csv as HTML (each format read, each output written).
    for ext, out_ext in ((".jsonl", ".png"), (".csv", ".html")):
        src = tmp_path / f"run{ext}"
        _recording(src)
        out = tmp_path / f"run{out_ext}"
        out.write_bytes(b"old")  # an existing output is replaced whole
        r = run_pitstop("plot", str(src), "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert "12 samples" in r.stderr
        assert len(read_recording(src).snapshots) == 12
        if out_ext == ".png":
            assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
        else:
            text = out.read_text()
            assert "<svg" in text and "</html>" in text
            assert text.count("<tr><td>") == 2  # the first verdict, and the one change
            assert "compute-bound" in text and "input-bound" in text and "6 s" in text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
