"""The monitor on a real NVIDIA GPU (scripts/gpu-check.sh runs these; skipped without one)."""

from __future__ import annotations

import time

import pytest

from pitstop.monitor.collector import Collector
from pitstop.telemetry.nvml import NvmlUnavailableError, nvml_session

pytestmark = pytest.mark.cuda


def _nvml_or_skip() -> None:
    try:
        with nvml_session() as nv:
            if int(nv.nvmlDeviceGetCount()) == 0:
                pytest.skip("NVML sees no GPU")
    except NvmlUnavailableError as err:
        pytest.skip(f"no NVML: {err}")


def test_real_gpu_panels_and_gpm_on_hopper() -> None:
    _nvml_or_skip()
    collector = Collector(interval_s=0.5)
    collector.prime()
    time.sleep(0.6)
    collector.prime()
    snap = collector.assemble()
    collector.close()
    assert snap["gpu_unavailable"] is None and snap["gpus"]
    g = snap["gpus"][0]
    assert g["name"] and g["memory_total_bytes"] > 0 and g["utilization_gpu_pct"] is not None
    assert g["power_draw_w"] is not None and g["clock_sm_max_mhz"]
    with nvml_session() as nv:
        major = nv.nvmlDeviceGetCudaComputeCapability(nv.nvmlDeviceGetHandleByIndex(0))[0]
    if major >= 9:  # Hopper and newer have GPM (unless in MIG mode)
        assert g["gpm"] is not None, g["gpm_unavailable"]
        assert 0.0 <= g["gpm"]["sm_active_pct"] <= 100.0
