"""NVML GPU Performance Monitoring (GPM): what the SMs actually do, on Hopper and newer.

``utilization.gpu`` only says that *some* kernel ran during the sample period: one
tiny kernel on one SM reads as 100 %. GPM counts, between two samples, the share of
SM cycles with work (SM activity), of warps resident against the maximum (occupancy),
of cycles in tensor cores, of DRAM bandwidth in use, and PCIe bytes; the same
counters as DCGM's ``DCGM_FI_PROF_*`` fields, without a DCGM daemon.

The bindings (``nvmlGpmSampleAlloc``, ``nvmlGpmSampleGet``, ``nvmlGpmMetricsGet``,
``nvmlGpmQueryDeviceSupport`` in nvidia-ml-py ≥ 12.535) need two samples per value, so
the first :meth:`GpmReader.read` only primes them. A GPU without GPM (before Hopper,
MIG slices, old drivers) gets a reason instead of values, once, never an exception.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

__all__ = ["GPM_METRICS", "GpmReader"]

# Our field name -> (nvidia-ml-py constant, scale to our unit). NVML gives percents
# 0-100 and PCIe in MiB/s; we keep percents and turn MiB/s into bytes/s.
GPM_METRICS: dict[str, tuple[str, float]] = {
    "graphics_active_pct": ("NVML_GPM_METRIC_GRAPHICS_UTIL", 1.0),
    "sm_active_pct": ("NVML_GPM_METRIC_SM_UTIL", 1.0),
    "sm_occupancy_pct": ("NVML_GPM_METRIC_SM_OCCUPANCY", 1.0),
    "tensor_active_pct": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 1.0),
    "dram_bw_util_pct": ("NVML_GPM_METRIC_DRAM_BW_UTIL", 1.0),
    "pcie_tx_bps": ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", 1024.0 * 1024.0),
    "pcie_rx_bps": ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", 1024.0 * 1024.0),
}


def _reason(err: BaseException) -> str:
    return str(err).strip() or type(err).__name__


class GpmReader:
    """GPM metrics of each GPU in ``handles`` (``indices`` name them in the output)."""

    def __init__(self, nv: Any, handles: list[Any], indices: list[int]) -> None:
        self._nv = nv
        self._handles = handles
        self.indices = indices
        self.reasons: dict[int, str] = {}
        self._samples: dict[int, list[Any]] = {}
        self._primed: set[int] = set()
        try:
            self._ids = {name: (int(getattr(nv, const)), scale)
                         for name, (const, scale) in GPM_METRICS.items()}
        except AttributeError:
            self._ids = {}
        for index, handle in zip(indices, handles, strict=False):
            reason = self._support(handle)
            if reason:
                self.reasons[index] = reason
                continue
            try:
                self._samples[index] = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
            except Exception as err:
                self.reasons[index] = f"GPM sample allocation failed: {_reason(err)}"

    def _support(self, handle: Any) -> str | None:
        if not self._ids or not hasattr(self._nv, "nvmlGpmQueryDeviceSupport"):
            return "nvidia-ml-py has no GPM bindings (needs 12.535 or newer)"
        try:
            supported = self._nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice
        except Exception as err:
            return f"GPM query failed: {_reason(err)}"
        if not supported:
            return "GPM needs a Hopper or newer GPU"
        try:  # MIG: the whole GPU's counters are not readable; each GPU instance has its own
            mig_on = int(self._nv.nvmlDeviceGetMigMode(handle)[0]) == 1
        except Exception:  # no MIG on this board, or bindings without the call
            mig_on = False
        return "MIG mode is on (GPM per GPU instance is not read yet)" if mig_on else None

    def _metrics(self, index: int, first: Any, second: Any) -> dict[str, Any]:
        nv = self._nv
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self._ids)
        request.sample1, request.sample2 = first, second
        for i, (metric_id, _) in enumerate(self._ids.values()):
            request.metrics[i].metricId = metric_id
        nv.nvmlGpmMetricsGet(request)
        out: dict[str, Any] = {}
        for i, (name, (_, scale)) in enumerate(self._ids.items()):
            m = request.metrics[i]
            out[name] = round(float(m.value) * scale, 2 if scale == 1.0 else 0) \
                if int(m.nvmlReturn) == 0 else None
        return out

    def read(self) -> dict[str, Any]:
        out = []
        for index, handle in zip(self.indices, self._handles, strict=False):
            if index in self.reasons:
                out.append({"index": index, "unavailable": self.reasons[index]})
                continue
            older, newer = self._samples[index]
            try:
                self._nv.nvmlGpmSampleGet(handle, newer)
                if index in self._primed:
                    out.append({"index": index, **self._metrics(index, older, newer)})
                else:
                    out.append({"index": index, "priming": True})
                self._primed.add(index)
                self._samples[index] = [newer, older]  # this sample is next call's first
            except Exception as err:
                self.reasons[index] = f"GPM read failed: {_reason(err)}"
                out.append({"index": index, "unavailable": self.reasons[index]})
        return {"gpm": out}

    def close(self) -> None:
        for pair in self._samples.values():
            for sample in pair:
                with suppress(Exception):
                    self._nv.nvmlGpmSampleFree(sample)
        self._samples.clear()
