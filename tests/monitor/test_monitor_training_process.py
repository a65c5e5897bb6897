"""A real training process (torch, a real DataLoader with 2 worker processes) seen by the
monitor: the workers grouped under it, and the input-bound verdict, on the CPU and on a
recorded H100 whose process list names the real process."""

from __future__ import annotations

import pytest
from monitor_helpers import NVML_SETS, training, wait_until

from pitstop.monitor.collector import Collector
from pitstop.monitor.panels import process_rows
from pitstop.telemetry.recorded_nvml import load_recorded_nvml

pytestmark = pytest.mark.slow


def _verdict_for(collector: Collector, pid: int, seconds: float) -> dict:
    """The verdict for ``pid`` once the window holds ``seconds`` of samples."""
    def ready() -> dict | None:
        snap = collector.latest()
        if not snap or len(collector.window) < seconds / collector.interval_s:
            return None
        return next((v for v in snap["verdicts"] if v["pid"] == pid and v["verdict"]), None)

    return wait_until(ready, timeout=60)


def _watch(mode: str, nvml_set: str | None = None) -> tuple[int, list[tuple[dict, dict]]]:
    """A real training run watched at once by a host-only collector and, with ``nvml_set``,
    one on a recorded GPU whose process list names the run: (pid, [(verdict, snapshot)])."""
    with training(mode, seconds=90, workers=2) as train:
        pid = train.pid
        collectors = [Collector(interval_s=0.5, window_s=6, gpu=False)]
        if nvml_set:
            nv = load_recorded_nvml(NVML_SETS / nvml_set, bind={"@train": pid})
            collectors.append(Collector(interval_s=0.5, window_s=6, nvml=nv))
        for c in collectors:
            c.start()
        try:
            seen = []
            for c in collectors:
                v = _verdict_for(c, pid, 4)
                snap = c.latest()
                assert snap is not None
                seen.append((v, snap))
        finally:
            for c in collectors:
                c.stop()
    return pid, seen


def test_input_bound_training_with_workers_under_it_on_the_cpu_and_a_recorded_h100() -> None:
    pid, [(v, snap), (gv, gsnap)] = _watch("input", "h100-sxm-input.json")
    mine = [p for p in snap["processes"] if p["pid"] == pid or p.get("trainer") == pid]
    roles = sorted(p["role"] for p in mine)
    assert roles == ["training", "worker", "worker"], mine
    assert all(p["name"] == "pt_data_worker" for p in mine if p["role"] == "worker")
    rows = [r for r in process_rows(snap, width=120) if r.pid in {p["pid"] for p in mine}]
    assert rows[0].pid == pid  # the training process first, its workers right under it
    assert [r.cells["command"] for r in rows[1:]] == ["├ DataLoader worker", "└ DataLoader worker"]
    assert v["verdict"] == "input-bound", v
    assert f"PID {pid} waits for data" in v["line"] and "its 2 loader workers" in v["line"]
    # The same run on a recorded H100: the GPU's idle share is what the line names.
    me = next(p for p in gsnap["processes"] if p["pid"] == pid)
    assert me["gpus"] and me["gpus"][0]["memory_bytes"] == int(22.4 * 2**30)
    assert gv["verdict"] == "input-bound" and gv["gpus"] == [0]
    assert gv["line"].startswith("GPU 0 idle ") and f"the 2 loader workers of PID {pid}" in gv["line"]
    # SM activity (GPM), not utilization.gpu, says how idle the GPU is: 18-30 % busy.
    assert 65 <= 100 - gv["facts"]["gpu_util_pct_mean"] <= 85


def test_compute_bound_training_is_compute_bound() -> None:
    pid, [(v, _)] = _watch("compute")
    assert v["verdict"] == "compute-bound", v
    assert v["line"].startswith(f"PID {pid} computes ")
