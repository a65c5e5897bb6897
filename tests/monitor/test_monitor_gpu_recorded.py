"""The GPU readers (NVML fields, GPM, per-process use) on NVML values recorded from real
GPUs (tests/monitor/nvml/*.json, origins in make_value_sets.py), and the value sets
being what their generator writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_helpers import NVML_SETS, Clock

from pitstop.errors import UsageError
from pitstop.monitor.collector import GPU_FIELDS_LIVE, GPU_FIELDS_STATIC
from pitstop.telemetry.gpm import GpmReader
from pitstop.telemetry.gpu import GpuReader
from pitstop.telemetry.gpu_processes import GpuProcessReader
from pitstop.telemetry.recorded_nvml import RecordedNvml, load_recorded_nvml


def test_value_sets_match_their_generator(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_value_sets", NVML_SETS / "make_value_sets.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(tmp_path)
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == sorted(p.name for p in NVML_SETS.glob("*.json"))
    for name in written:
        assert (tmp_path / name).read_text() == (NVML_SETS / name).read_text(), name
        assert json.loads((tmp_path / name).read_text())["_origin"]


def _readers(name: str, clock: Clock, bind: dict[str, int] | None = None
             ) -> tuple[GpuReader, GpmReader, GpuProcessReader]:
    nv = load_recorded_nvml(NVML_SETS / f"{name}.json", bind=bind, clock=clock)
    gpu = GpuReader(nv, fields=GPU_FIELDS_LIVE, static_fields=GPU_FIELDS_STATIC)
    return gpu, GpmReader(nv, gpu.handles, gpu.indices), GpuProcessReader(nv, gpu.handles, gpu.indices)


def test_h100_fields_and_gpm_metrics_in_our_units() -> None:
    clock = Clock()
    gpu, gpm, procs = _readers("h100-sxm-compute", clock, bind={"@train": 4242})
    g = gpu.read()["gpus"][0]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["memory_total_bytes"] == 81559 * 2**20
    assert g["clock_sm_max_mhz"] == 1980 and g["power_limit_w"] == 700.0
    assert g["utilization_gpu_pct"] == 100 and g["pcie_link_gen"] == 5
    assert gpm.read()["gpm"] == [{"index": 0, "priming": True}]  # GPM needs two samples
    clock.t = 1.0  # next frame: the power cap engaged
    m = gpm.read()["gpm"][0]
    assert m["sm_active_pct"] == 86.7 and m["tensor_active_pct"] == 58.0
    assert m["pcie_rx_bps"] == round(584.0 * 2**20)  # NVML's MiB/s in bytes/s
    assert gpu.read()["gpus"][0]["clocks_event_reasons"] == 0x4
    rows = procs.read()["gpu_processes"]
    assert rows == [{"gpu": 0, "pid": 4242, "memory_bytes": int(61.3 * 2**30),
                     "sm_util_pct": 99, "mem_util_pct": 43}]


def test_no_gpm_before_hopper_and_no_per_process_util_on_a_geforce() -> None:
    clock = Clock()
    _, gpm, _ = _readers("a100-sxm4-idle", clock)
    out = gpm.read()["gpm"][0]
    assert "Hopper" in out["unavailable"]
    _, _, procs = _readers("rtx4090-busy", clock, bind={"@train": 77})
    rows = procs.read()["gpu_processes"]
    assert rows[0]["pid"] == 77 and rows[0]["memory_bytes"] > 0 and rows[0]["sm_util_pct"] is None
    assert procs.util_unsupported == {0: "Not Supported"}


def test_unbound_placeholder_pids_are_left_out() -> None:
    _, _, procs = _readers("h100-sxm-compute", Clock())
    assert procs.read()["gpu_processes"] == []


def test_a_value_set_without_its_origin_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"gpus": []}))
    with pytest.raises(UsageError, match="_origin"):
        load_recorded_nvml(bad)
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="not a JSON"):
        load_recorded_nvml(bad)


def test_record_script_round_trips_through_the_replayer() -> None:
    """scripts/record_nvml.py (run on GPU machines) writes what RecordedNvml replays."""
    import importlib.util

    from pitstop_testing import REPO

    spec = importlib.util.spec_from_file_location("record_nvml", REPO / "scripts" / "record_nvml.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    clock = Clock()
    source = load_recorded_nvml(NVML_SETS / "h100-sxm-compute.json", bind={"@train": 999}, clock=clock)

    def sleep(s: float) -> None:
        clock.t += s

    gpus = script.record(source, frames=3, every=1.0, bind_pid=999, sleep=sleep)
    assert gpus[0]["static"]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["static"]["gpm_supported"]
    frames = gpus[0]["frames"]
    assert [f["clocks_event_reasons"] for f in frames] == [0x4, 0, 0]  # frames 1..3 of the set
    assert frames[0]["gpm"]["SM_UTIL"] == 86.7 and frames[0]["processes"][0]["pid"] == "@train"
    replay = RecordedNvml({"_origin": "round trip", "gpus": gpus}, bind={"@train": 5}, clock=Clock())
    g = GpuReader(replay, fields=GPU_FIELDS_LIVE, static_fields=GPU_FIELDS_STATIC).read()["gpus"][0]
    assert g["clocks_event_reasons"] == 0x4 and g["memory_total_bytes"] == 81559 * 2**20
