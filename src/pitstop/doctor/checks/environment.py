"""Environment layer: variables that slow CUDA/NCCL down or hide GPUs, left set by accident."""

from __future__ import annotations

from typing import Any

from pitstop.doctor.checks.base import Facts, Outcome, check, ok, problem, section, warning
from pitstop.doctor.checks.gpuinfo import nvml_gpus, pci_gpus
from pitstop.findings import Remedy


def _env(facts: Facts) -> dict[str, str]:
    return dict(section(facts, "environment").get("variables") or {})


def _truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() not in ("", "0", "false", "no", "off")


def _unset(names: list[str]) -> Remedy:
    return Remedy.shell(f"unset {' '.join(names)}   # and remove it from ~/.bashrc, the job "
                        "script or the container's ENV")


@check("DR070", "environment", 93)
def launch_blocking(facts: Facts) -> Outcome:
    env = _env(facts)
    v = env.get("CUDA_LAUNCH_BLOCKING")
    if not _truthy(v):
        return ok("CUDA_LAUNCH_BLOCKING not set", CUDA_LAUNCH_BLOCKING=v)
    return problem("CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the GPU (often 2-10x "
                   "slower training)", _unset(["CUDA_LAUNCH_BLOCKING"]), CUDA_LAUNCH_BLOCKING=v)


# name -> (is it on?, what it costs)
DEBUG_SETTINGS: dict[str, tuple[Any, str]] = {
    "TORCH_SHOW_CPP_STACKTRACES": (_truthy, "C++ stack traces on every error"),
    "NCCL_DEBUG": (lambda v: v.upper() in ("INFO", "TRACE"), "NCCL logs every operation"),
    "NCCL_DEBUG_SUBSYS": (lambda v: bool(v.strip()), "extra NCCL logging"),
    "TORCH_DISTRIBUTED_DEBUG": (lambda v: v.upper() in ("INFO", "DETAIL"),
                                "DETAIL checks every collective's shapes (extra syncs)"),
    "TORCH_CPP_LOG_LEVEL": (lambda v: v.upper() == "INFO", "verbose C++ logging"),
    "TORCH_LOGS": (lambda v: bool(v.strip()), "torch.compile/dynamo logging"),
    "TORCHDYNAMO_VERBOSE": (_truthy, "verbose dynamo"),
    "TORCH_COMPILE_DEBUG": (_truthy, "writes debug artefacts for every compiled graph"),
    "TORCH_USE_CUDA_DSA": (_truthy, "device-side assertions (needs a debug build, slows kernels)"),
    "TORCH_NCCL_BLOCKING_WAIT": (_truthy, "host blocks on every collective"),
    "NCCL_BLOCKING_WAIT": (_truthy, "host blocks on every collective"),
    "CUDA_DEVICE_WAITS_ON_EXCEPTION": (_truthy, "debugger hook"),
    "PYTHONDEVMODE": (_truthy, "Python development mode checks"),
    "PYTHONMALLOC": (lambda v: "debug" in v, "debug memory allocator"),
}


@check("DR071", "environment", 40)
def debug_settings(facts: Facts) -> Outcome:
    env = _env(facts)
    on = {k: env[k] for k, (test, _) in DEBUG_SETTINGS.items() if k in env and test(env[k])}
    if not on:
        return ok("no debugging settings left on in the environment")
    costs = "; ".join(f"{k}={v} ({DEBUG_SETTINGS[k][1]})" for k, v in on.items())
    return warning(f"debugging settings left on: {costs}", _unset(sorted(on)), **on)


@check("DR072", "environment", 90)
def caching_allocator_off(facts: Facts) -> Outcome:
    env = _env(facts)
    v = env.get("PYTORCH_NO_CUDA_MEMORY_CACHING")
    if not _truthy(v):
        return ok("CUDA caching allocator enabled", PYTORCH_NO_CUDA_MEMORY_CACHING=v)
    return problem("PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor allocation calls cudaMalloc "
                   "and synchronises", _unset(["PYTORCH_NO_CUDA_MEMORY_CACHING"]),
                   PYTORCH_NO_CUDA_MEMORY_CACHING=v)


NCCL_DISABLES = {
    "NCCL_P2P_DISABLE": "GPU-to-GPU copies go through host memory",
    "NCCL_IB_DISABLE": "InfiniBand/RoCE unused: inter-node traffic over TCP sockets",
    "NCCL_SHM_DISABLE": "intra-node traffic without shared memory",
}


@check("DR073", "environment", 65)
def nccl_disables(facts: Facts) -> Outcome:
    env = _env(facts)
    off = {k: env[k] for k in ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE")
           if _truthy(env.get(k))}
    if env.get("NCCL_P2P_LEVEL", "").upper() in ("LOC", "0"):
        off["NCCL_P2P_LEVEL"] = env["NCCL_P2P_LEVEL"]
    if env.get("NCCL_NET", "").lower() == "socket":
        off["NCCL_NET"] = env["NCCL_NET"]
    if not off:
        return ok("no NCCL transport disabled", **{k: v for k, v in env.items()
                                                  if k.startswith("NCCL_")})
    why = "; ".join(f"{k}={v}" + (f" ({NCCL_DISABLES[k]})" if NCCL_DISABLES.get(k) else "")
                    for k, v in off.items())
    return warning(f"NCCL transports disabled: {why}",
                   Remedy.shell(f"unset {' '.join(sorted(off))}   # keep only if a measured "
                                "hang/corruption needs it; check with nccl-tests all_reduce_perf"),
                   **off)


@check("DR074", "environment", 85)
def visible_devices(facts: Facts) -> Outcome:
    env = _env(facts)
    v = env.get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return ok("CUDA_VISIBLE_DEVICES not set: every GPU visible")
    pci = pci_gpus(facts) or []
    ev = {"CUDA_VISIBLE_DEVICES": v, "gpus_on_pci": len(pci)}
    items = [x.strip() for x in v.split(",") if x.strip()]
    if pci and (not items or items[0] in ("-1", "NoDevFiles") or items[0].startswith("-")):
        return problem(f"CUDA_VISIBLE_DEVICES={v!r} hides every GPU: torch runs on the CPU",
                       _unset(["CUDA_VISIBLE_DEVICES"]), **ev)
    try:
        count = len(nvml_gpus(facts))
    except Exception:
        count = len(pci)
    bad = [x for x in items if x.isdigit() and int(x) >= count] if count else []
    if bad:
        return problem(f"CUDA_VISIBLE_DEVICES={v!r} names GPU index(es) {', '.join(bad)} but "
                       f"there are {count}: CUDA stops at the first invalid entry",
                       Remedy.shell(f"export CUDA_VISIBLE_DEVICES={','.join(str(i) for i in range(count))}"),
                       **ev)
    return ok(f"CUDA_VISIBLE_DEVICES={v} ({len(items)} GPU(s) visible)", **ev)


# Options of the CUDA caching allocator (c10/cuda/CUDAAllocatorConfig.cpp); an unknown
# one makes the first CUDA allocation raise.
ALLOC_KEYS = {"max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
              "expandable_segments", "backend", "release_lock_on_cudamalloc",
              "pinned_use_cuda_host_register", "pinned_num_register_threads",
              "pinned_use_background_threads", "max_non_split_rounding_mb",
              "per_process_memory_fraction", "graph_capture_record_stream_reuse",
              "pinned_reserve_segment_size_mb"}


@check("DR075", "environment", 30)
def alloc_conf(facts: Facts) -> Outcome:
    env = _env(facts)
    name = "PYTORCH_CUDA_ALLOC_CONF" if "PYTORCH_CUDA_ALLOC_CONF" in env else "PYTORCH_ALLOC_CONF"
    v = env.get(name)
    if v is None:
        return ok("no allocator configuration set (defaults)")
    keys = []
    bad = []
    for part in v.split(","):
        key, sep, val = part.partition(":")
        key = key.strip()
        keys.append(key)
        if key not in ALLOC_KEYS or not sep or not val.strip():
            bad.append(part.strip())
    ev = {name: v}
    if bad:
        return warning(f"{name} has entries torch does not know: {', '.join(bad)} (the first CUDA "
                       "allocation raises 'Unrecognized CachingAllocator option')",
                       Remedy.shell(f"export {name}=expandable_segments:True   # format "
                                    "key:value,key:value"), **ev)
    if "backend" in keys and "cudaMallocAsync" in v:
        return ok(f"{name}={v} (cudaMallocAsync backend)", **ev)
    return ok(f"{name}={v}", **ev)
