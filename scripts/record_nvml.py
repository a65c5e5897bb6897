"""Record a real GPU's NVML values as a value set the monitor's tests can replay.

    PYTHONPATH=src python3 scripts/record_nvml.py OUT.json [--frames 10] [--every 1.0]
        [--bind-pid PID] [--what "a DataLoader-bound ResNet run"]

Reads every GPU through nvidia-ml-py (the same calls as ``pitstop monitor``): the
fields that do not change once, then ``--frames`` frames of those that do, GPM metrics
in NVML's own units and the processes on each GPU. ``--bind-pid PID`` writes that
process as the placeholder ``"@train"``, so that a test can put its own training
process in its place. The file says in ``_origin`` what GPU, driver and date it was
recorded on (scripts/gpu-check.sh runs this beside a training run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from pitstop.monitor.collector import GPU_FIELDS_LIVE, GPU_FIELDS_STATIC
from pitstop.telemetry.nvml import GPU_FIELDS, NvmlUnavailableError, nvml_session

STATIC_EXTRA = ("temperature_shutdown_c", "power_default_limit_w", "power_max_limit_w",
                "pcie_link_gen_device_max", "compute_capability", "persistence_mode",
                "ecc_mode_current")
GPM_NAMES = ("GRAPHICS_UTIL", "SM_UTIL", "SM_OCCUPANCY", "ANY_TENSOR_UTIL", "DRAM_BW_UTIL",
             "PCIE_TX_PER_SEC", "PCIE_RX_PER_SEC")


def _read(nv: Any, h: Any, name: str) -> Any:
    try:
        value = GPU_FIELDS[name](nv, h)
    except Exception as err:
        return {"unavailable": str(err).strip() or type(err).__name__}
    return list(value) if isinstance(value, tuple) else value


def _gpm(nv: Any, h: Any, samples: list[Any]) -> dict[str, float] | None:
    request = nv.c_nvmlGpmMetricsGet_t()
    request.version = nv.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(GPM_NAMES)
    request.sample1, request.sample2 = samples
    for i, name in enumerate(GPM_NAMES):
        request.metrics[i].metricId = getattr(nv, f"NVML_GPM_METRIC_{name}")
    nv.nvmlGpmMetricsGet(request)
    return {name: round(float(request.metrics[i].value), 2) for i, name in enumerate(GPM_NAMES)
            if int(request.metrics[i].nvmlReturn) == 0}


def _procs(nv: Any, h: Any, bind_pid: int | None) -> list[dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            for p in getattr(nv, getter)(h):
                out.setdefault(int(p.pid), {"pid": int(p.pid), "used_memory_bytes": int(p.usedGpuMemory or 0),
                                            "type": "graphics" if "Graphics" in getter else "compute"})
        except Exception:
            continue
    try:
        for s in nv.nvmlDeviceGetProcessUtilization(h, 0):
            if int(s.pid) in out:
                out[int(s.pid)].update(sm_util=int(s.smUtil), mem_util=int(s.memUtil))
    except Exception:
        pass
    for p in out.values():
        if bind_pid is not None and p["pid"] == bind_pid:
            p["pid"] = "@train"
    return list(out.values())


def record(nv: Any, *, frames: int, every: float, bind_pid: int | None = None,
           sleep: Any = time.sleep) -> list[dict[str, Any]]:
    """The ``gpus`` list of a value set, read from ``nv`` (the pynvml module or a stand-in)."""
    gpus = []
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    for h in handles:
        static = {n: _read(nv, h, n) for n in (*GPU_FIELDS_STATIC, *STATIC_EXTRA)}
        try:
            static["gpm_supported"] = bool(nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
        except Exception:
            static["gpm_supported"] = False
        gpus.append({"static": static, "frames": []})
    pairs = [[nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()] if g["static"]["gpm_supported"]
             else None for g in gpus]
    for h, pair in zip(handles, pairs, strict=True):
        if pair:
            nv.nvmlGpmSampleGet(h, pair[0])
    for _ in range(frames):
        sleep(every)
        for g, h, pair in zip(gpus, handles, pairs, strict=True):
            frame = {n: _read(nv, h, n) for n in GPU_FIELDS_LIVE}
            if pair:
                nv.nvmlGpmSampleGet(h, pair[1])
                frame["gpm"] = _gpm(nv, h, pair)
                pair.reverse()
            frame["processes"] = _procs(nv, h, bind_pid)
            g["frames"].append(frame)
    for pair in pairs:
        for sample in pair or []:
            nv.nvmlGpmSampleFree(sample)
    return gpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--bind-pid", type=int)
    ap.add_argument("--what", default="whatever ran on the GPU while recording")
    args = ap.parse_args()
    try:
        with nvml_session() as nv:
            gpus = record(nv, frames=args.frames, every=args.every, bind_pid=args.bind_pid)
            driver = nv.nvmlSystemGetDriverVersion()
            cuda = int(nv.nvmlSystemGetCudaDriverVersion_v2())
    except NvmlUnavailableError as err:
        print(f"record_nvml: {err}", file=sys.stderr)
        return 2
    names = ", ".join(str(g["static"].get("name")) for g in gpus)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    data = {"_origin": f"Recorded from a real {names} (driver {driver}) by scripts/record_nvml.py "
                       f"on {when}, {args.frames} frames every {args.every:g} s, during {args.what}.",
            "driver_version": str(driver), "cuda_driver_version": cuda, "frame_s": args.every,
            "gpus": gpus}
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"record_nvml: {len(gpus)} GPU(s), {args.frames} frames → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
