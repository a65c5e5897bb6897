"""GPUs that fail in the ways real machines do: one falls off the bus mid-run, one cannot
be opened (lost before the start, hidden by a container's device rules), a board without
a field, MIG mode, and NVML's per-process utilisation calls refusing or answering with
nothing. Every one degrades to "not available" with NVML's reason; the other GPUs keep
their numbers and nothing raises."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

from monitor_helpers import NVML_SETS, Clock
from rich.console import Console

from pitstop.monitor.collector import GPU_FIELDS_LIVE, GPU_FIELDS_STATIC, Collector
from pitstop.monitor.history import History
from pitstop.monitor.panels import gpu_panel
from pitstop.telemetry.gpm import GpmReader
from pitstop.telemetry.gpu import GpuReader
from pitstop.telemetry.gpu_processes import GpuProcessReader
from pitstop.telemetry.recorded_nvml import RecordedNvml


def _two_h100s() -> dict[str, Any]:
    one = json.loads((NVML_SETS / "h100-sxm-compute.json").read_text())
    data = copy.deepcopy(one)
    data["gpus"] = [copy.deepcopy(one["gpus"][0]), copy.deepcopy(one["gpus"][0])]
    data["gpus"][1]["static"]["uuid"] = "GPU-second"
    for gpu in data["gpus"]:  # no placeholder pids: nothing to bind
        gpu["static"].pop("processes", None)
        for f in gpu["frames"]:
            f.pop("processes", None)
    return data


def _text(renderable: Any, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_a_gpu_that_falls_off_the_bus_says_so_and_the_other_keeps_its_numbers() -> None:
    data = _two_h100s()
    good = data["gpus"][1]["frames"][0]
    data["gpus"][1]["frames"] = [good, {"_error": "GPU is lost"}]
    clock = Clock()
    nv = RecordedNvml(data, clock=clock)
    gpu = GpuReader(nv, fields=GPU_FIELDS_LIVE, static_fields=GPU_FIELDS_STATIC)
    first = gpu.read()["gpus"]
    assert all(g["utilization_gpu_pct"] is not None and "error" not in g for g in first)
    clock.t = 1.0  # GPU 1 is gone (Xid 79)
    g0, g1 = gpu.read()["gpus"]
    assert g0["utilization_gpu_pct"] is not None and g0["power_draw_w"] is not None
    assert g1["error"] == "GPU is lost" and g1["utilization_gpu_pct"] is None
    clock.t = 2.0  # "GPU is lost" is asked again (not cached as "not supported")
    assert gpu.read()["gpus"][1]["utilization_gpu_pct"] is not None
    gpm, procs = GpmReader(nv, gpu.handles, gpu.indices), GpuProcessReader(nv, gpu.handles, gpu.indices)
    clock.t = 3.0
    gpm.read()
    assert procs.read()["gpu_processes"] == []
    assert "GPU is lost" in gpm.read()["gpm"][1]["unavailable"]


def test_the_panel_and_the_snapshot_of_a_lost_gpu() -> None:
    data = _two_h100s()
    data["gpus"][1]["frames"] = [{"_error": "GPU is lost"}]
    collector = Collector(nvml=RecordedNvml(data), interval_s=0.05)
    snap = collector.once(wait_s=0.05)
    g0, g1 = snap["gpus"]
    assert g1["error"] == "GPU is lost" and g0.get("error") is None
    text = _text(gpu_panel(snap, History(), 120))
    assert "cannot read this GPU: GPU is lost (fell off the bus?" in text
    assert "GPU 1  cannot be read: GPU is lost" in _text(gpu_panel(snap, History(), 120, compact=True))
    assert snap["verdicts"]  # the verdict is still computed


def test_a_gpu_that_cannot_be_opened_leaves_the_others_with_a_note() -> None:
    data = _two_h100s()
    data["gpus"][0]["static"]["handle_error"] = "No Permission"
    collector = Collector(nvml=RecordedNvml(data), interval_s=0.05)
    snap = collector.once(wait_s=0.05)
    assert [g["index"] for g in snap["gpus"]] == [1]
    assert "GPU 0 cannot be opened: No Permission" in snap["notes"]
    data["gpus"][1]["static"]["handle_error"] = "GPU is lost"
    none = Collector(nvml=RecordedNvml(data), interval_s=0.05)
    assert none.gpu_unavailable == ("no GPU panels: GPU 0 cannot be opened: No Permission; "
                                    "GPU 1 cannot be opened: GPU is lost")
    none.close()


def test_a_field_one_board_lacks_stays_on_the_others_with_its_reason() -> None:
    data = _two_h100s()
    for f in data["gpus"][0]["frames"]:
        f["power_draw_w"] = {"unavailable": "Not Supported"}
    gpu = GpuReader(RecordedNvml(data), fields=GPU_FIELDS_LIVE, static_fields=GPU_FIELDS_STATIC)
    for _ in range(2):
        g0, g1 = gpu.read()["gpus"]
        assert g0["power_draw_w"] is None and g0["unavailable_fields"]["power_draw_w"] == "Not Supported"
        assert g1["power_draw_w"] is not None and "unavailable_fields" not in g1
    assert (0, "power_draw_w") in gpu.unsupported and (1, "power_draw_w") not in gpu.unsupported
    snap = {"gpus": [dict(g0, gpm=None, clocks_event_names=[])]}
    assert "n/a power: Not Supported" in _text(gpu_panel(snap, History(), 120))


def test_mig_mode_names_itself_as_the_reason_for_no_gpm() -> None:
    data = _two_h100s()
    data["gpus"][0]["static"]["mig_mode"] = 1
    nv = RecordedNvml(data)
    gpu = GpuReader(nv, fields=GPU_FIELDS_LIVE)
    reasons = GpmReader(nv, gpu.handles, gpu.indices).reasons
    assert reasons == {0: "MIG mode is on (GPM per GPU instance is not read yet)"}


class _Err(Exception):
    """nvidia-ml-py's NVMLError: ``value`` is NVML's return code, str its text."""

    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


class _Nvml:
    """Only the calls GpuProcessReader makes, answering as a driver would."""

    def __init__(self, new: Any, old: Any) -> None:
        self._new, self._old = new, old

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return [SimpleNamespace(pid=4242, usedGpuMemory=2**30)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list[Any]:
        return []

    def nvmlDeviceGetProcessesUtilizationInfo(self, h: Any, since: int) -> list[Any]:
        return self._new(since)

    def nvmlDeviceGetProcessUtilization(self, h: Any, since: int) -> list[Any]:
        return self._old(since)


def _raise(err: Exception) -> Any:
    def call(since: int) -> list[Any]:
        raise err
    return call


def _sample(since: int) -> list[Any]:
    return [SimpleNamespace(pid=4242, timeStamp=since + 1, smUtil=61, memUtil=20)]


def test_per_process_utilisation_falls_back_to_the_older_call_and_says_why_when_neither() -> None:
    # The newer call refuses (a driver that has it but not for this board): the older answers.
    reader = GpuProcessReader(_Nvml(_raise(_Err(3, "Not Supported")), _sample), [0], [0])
    row = reader.read()["gpu_processes"][0]
    assert (row["pid"], row["sm_util_pct"], row["memory_bytes"]) == (4242, 61, 2**30)
    # nvidia-ml-py raises NVMLError(NVML_SUCCESS) when there is nothing to size: no samples
    # this time, not "unsupported".
    quiet = GpuProcessReader(_Nvml(_raise(_Err(0, "Success")), _sample), [0], [0])
    out = quiet.read()
    assert out["gpu_processes"][0]["sm_util_pct"] is None and out["process_util_unavailable"] == {}
    neither = GpuProcessReader(_Nvml(_raise(_Err(3, "Not Supported")),
                                     _raise(_Err(3, "Not Supported"))), [0], [0])
    assert neither.read()["process_util_unavailable"] == {0: "Not Supported"}
    lost = GpuProcessReader(_Nvml(_raise(_Err(15, "GPU is lost")), _sample), [0], [0])
    assert lost.read()["process_util_unavailable"] == {}  # asked again next time


def test_nvml_stuck_in_a_call_is_named_instead_of_showing_no_gpu() -> None:
    from pitstop.telemetry.sources import PolledSource

    collector = Collector(nvml=RecordedNvml(_two_h100s()), interval_s=0.05)
    first = collector.sources["gpu"].read_now()
    # The GPU thread never came back from its call: its last reading is past its TTL.
    stuck = PolledSource("gpu", lambda: first or {}, interval_s=0.05, ttl_s=0.1)
    stuck._latest = (first, 0.0, None)
    collector.sources["gpu"] = stuck
    try:
        snap = collector.assemble()
        assert snap["gpus"] == []
        assert "no fresh GPU reading for" in snap["gpu_unavailable"]
        assert "NVML does not answer" in snap["gpu_unavailable"]
    finally:
        collector.close()


def test_older_bindings_name_the_clock_reasons_throttle_reasons() -> None:
    from pitstop.telemetry.nvml import GPU_FIELDS

    old = SimpleNamespace(nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 4)
    assert GPU_FIELDS["clocks_event_reasons"](old, 0) == 4
