"""The live NVML path of the doctor, on a machine without a GPU.

``FakeNvml`` stands in for the third-party ``pynvml`` module only (pitstop's own
telemetry wrapper, probes and checks run for real). It answers with the values of an
A100-SXM4-40GB as `nvidia-smi -q` prints them in public reports (400 W default limit,
1410 MHz max SM clock, see tests/doctor/machines/make_machines.py), under load, with
fields an A100 does not support raising NVMLError("Not Supported") as the real library
does. The test on a real GPU is ``test_real_gpu`` (marked ``cuda``).
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections import namedtuple
from typing import Any

import pytest

from pitstop.doctor.checks import run_checks
from pitstop.doctor.facts import collect
from pitstop.doctor.probes import ProbeContext
from pitstop.sysroot import Sysroot


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


def fake_pynvml() -> types.ModuleType:
    m = types.ModuleType("pynvml")
    mem = namedtuple("mem", "total used free")
    util = namedtuple("util", "gpu memory")
    pci = namedtuple("pci", "busId")
    proc = namedtuple("proc", "pid usedGpuMemory")

    def unsupported(*_: Any) -> Any:
        raise NVMLError("Not Supported")

    values = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "570.172.08",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 12080,
        "nvmlSystemGetNVMLVersion": lambda: "12.570.172.08",
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
        "nvmlDeviceGetName": lambda h: b"NVIDIA A100-SXM4-40GB",
        "nvmlDeviceGetUUID": lambda h: "GPU-a75cda02-62ce-2c30-9150-555ef08935e2",
        "nvmlDeviceGetPciInfo": lambda h: pci(b"00000000:41:00.0"),
        "nvmlDeviceGetMemoryInfo": lambda h: mem(42949672960, 30064771072, 12884901888),
        "nvmlDeviceGetUtilizationRates": lambda h: util(97, 55),
        "nvmlDeviceGetTemperature": lambda h, s: 71,
        "nvmlDeviceGetTemperatureThreshold": lambda h, t: 92 if t == m.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN else 95,
        "nvmlDeviceGetPowerUsage": lambda h: 398000,
        "nvmlDeviceGetPowerManagementLimit": lambda h: 300000,
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: 400000,
        "nvmlDeviceGetPowerManagementLimitConstraints": lambda h: (100000, 400000),
        "nvmlDeviceGetClockInfo": lambda h, c: 1275,
        "nvmlDeviceGetMaxClockInfo": lambda h, c: 1410,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4,
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetGpuMaxPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetPcieThroughput": lambda h, c: 1200000,
        "nvmlDeviceGetPcieReplayCounter": lambda h: 0,
        "nvmlDeviceGetPersistenceMode": lambda h: 0,
        "nvmlDeviceGetEccMode": lambda h: (1, 1),
        "nvmlDeviceGetRetiredPagesPendingStatus": unsupported,
        "nvmlDeviceGetRemappedRows": lambda h: (0, 0, 1, 0),
        "nvmlDeviceGetCudaComputeCapability": lambda h: (8, 0),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [proc(2**22 + 7, 29360128000)],
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
    }
    for name, fn in values.items():
        setattr(m, name, fn)
    for name, val in (("NVML_TEMPERATURE_GPU", 0), ("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
                      ("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1), ("NVML_CLOCK_SM", 1),
                      ("NVML_CLOCK_MEM", 2), ("NVML_PCIE_UTIL_TX_BYTES", 0),
                      ("NVML_PCIE_UTIL_RX_BYTES", 1)):
        setattr(m, name, val)
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound  # type: ignore[attr-defined]
    m.NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded  # type: ignore[attr-defined]
    return m


def test_live_nvml_path_with_an_a100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    facts = collect(ProbeContext(sysroot=Sysroot.of("/"), data_path=os.getcwd(),
                                 environ=os.environ))
    nvml = json.loads(json.dumps(facts["nvml"]))  # JSON-able as collected
    assert nvml["available"] is True
    gpu = nvml["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB" and gpu["pci_bus_id"] == "00000000:41:00.0"
    assert gpu["retired_pages_pending"] == {"unavailable": "Not Supported"}
    assert nvml["system"]["cuda_driver_version"] == "12.8"
    by_code: dict[str, Any] = {}
    for r in run_checks(facts):
        assert "internal error" not in r.summary, (r.code, r.summary)
        by_code.setdefault(r.code, r)
    assert by_code["DR017"].status == "warning"  # 300 W of 400 W, and capped right now
    assert by_code["DR017"].evidence["power_capped_now"] is True
    assert by_code["DR018"].status == "warning"  # persistence off
    assert by_code["DR020"].status == "warning"  # a row remap is pending
    assert by_code["DR019"].status == "warning"  # a process of another PID namespace
    assert "name hidden" in by_code["DR019"].summary
    assert by_code["DR010"].status == "ok"  # Gen4 x16 under load


def test_nvml_library_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    m = fake_pynvml()

    def no_lib() -> None:
        raise NVMLError_LibraryNotFound()

    m.nvmlInit = no_lib  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", m)
    facts = collect(ProbeContext(sysroot=Sysroot.of("/"), data_path=os.getcwd(),
                                 environ=os.environ), only=["nvml"])
    assert facts["nvml"] == {"available": False,
                             "reason": "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"}


@pytest.mark.cuda
def test_real_gpu(pitstop_cli: Any) -> None:
    r = pitstop_cli("doctor", "--json", "--torch", timeout=180)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["facts"]["nvml"]["available"] is True
    status = {c["code"]: c["status"] for c in doc["checks"]}
    assert status["DR001"] == "ok" and status["DR004"] == "ok" and status["DR007"] == "ok"
    # The loaded module, every GPU the process was given, torch's own CUDA wheels: on a
    # working GPU machine none of them may be a finding (issue 15's false alarms).
    assert status["DR009"] == "ok" and status["DR022"] == "ok"
    assert status["DR008"] in ("ok", "unknown"), [c for c in doc["checks"]
                                                   if c["code"] == "DR008"]
    assert all(c["status"] != "unknown" or c.get("not_applicable") or c["code"] in
               ("DR020", "DR034", "DR040", "DR041", "DR042", "DR035")
               for c in doc["checks"] if c["layer"] in ("driver", "gpu")), doc["checks"]
