"""The monitor's snapshot: one versioned, documented JSON object per sample.

Everything downstream reads snapshots only: the live UI, ``--once --json``, the
recorder, replay, ``pitstop plot`` and the Prometheus exporter. :data:`SNAPSHOT_SCHEMA`
is its JSON Schema (committed as ``docs/monitor-snapshot.schema.json``, described field
by field in ``docs/monitor.md``). :data:`SCHEMA_VERSION` goes up when a field changes
meaning or is removed; adding a field keeps the version (readers ignore what they do
not know).

Units are in the names (``_pct`` 0-100, ``_bytes``, ``_bps`` bytes per second,
``_kbps`` KB/s as NVML gives PCIe throughput, ``_w``, ``_c``, ``_mhz``, ``_s``); a value
that could not be measured is ``null``, and the reason is in ``*_unavailable`` or
``notes``.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from pitstop.doctor.data import clock_event_names
from pitstop.telemetry.sources import Reading

__all__ = ["SCHEMA_NAME", "SCHEMA_VERSION", "SNAPSHOT_SCHEMA", "build_snapshot", "check_snapshot"]

SCHEMA_NAME = "pitstop.monitor.snapshot"
SCHEMA_VERSION = 1

_num = {"type": ["number", "null"]}
_int = {"type": ["integer", "null"]}
_str = {"type": ["string", "null"]}
_pcts = {"type": ["array", "null"], "items": {"type": "number"}}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or list(props)}


_PROCESS = _obj({
    "pid": {"type": "integer"}, "ppid": _int,
    "nspid": {**_int, "description": "the pid as the process sees it in its own PID namespace, when it differs"},
    "name": {"type": "string"}, "cmdline": {"type": "string"},
    "role": {"enum": ["training", "launcher", "worker", "child", "other"]},
    "trainer": {**_int, "description": "the training process a worker or child belongs to"},
    "state": {"type": "string"}, "threads": _int, "rss_bytes": _int,
    "cpu_cores": {**_num, "description": "CPU time per second (1.0 = one core busy)"},
    "read_bps": _num,
    "main_thread": {"type": ["object", "null"], "properties": {
        "on_cpu_share": {"type": "number"}, "runqueue_share": {"type": "number"},
        "wchan": {**_str, "description": "kernel function the main thread sleeps in "
                  "(training processes; null while running or hidden)"}}},
    "container": {"type": ["object", "null"], "properties": {
        "runtime": {"type": "string"}, "id": {"type": "string"}, "name": _str}},
    "cpus_allowed": {**_int, "description": "CPUs the process may use: its affinity, capped "
                     "by its cgroup's CPU quota"},
    "followed": {"type": "boolean", "description": "given with --pid (absent otherwise)"},
    "gpus": {"type": "array", "items": _obj({
        "index": {"type": "integer"}, "memory_bytes": _int, "sm_util_pct": _num,
        "mem_util_pct": _num})},
}, ["pid", "name", "role", "state", "cpu_cores", "rss_bytes", "gpus"])

_GPM = _obj({k: _num for k in ("graphics_active_pct", "sm_active_pct", "sm_occupancy_pct",
                               "tensor_active_pct", "dram_bw_util_pct", "pcie_tx_bps",
                               "pcie_rx_bps")})

_GPU = _obj({
    "index": {"type": "integer"}, "name": _str, "uuid": _str, "pci_bus_id": _str,
    "utilization_gpu_pct": _num, "utilization_memory_pct": _num,
    "memory_used_bytes": _int, "memory_total_bytes": _int,
    "power_draw_w": _num, "power_limit_w": _num,
    "temperature_c": _num, "temperature_slowdown_c": _num,
    "clock_sm_mhz": _num, "clock_sm_max_mhz": _num, "clock_mem_mhz": _num,
    "clocks_event_reasons": {**_int, "description": "NVML clock event (throttle) reasons bit mask"},
    "clocks_event_names": {"type": "array", "items": {"type": "string"}},
    "pcie_tx_kbps": _num, "pcie_rx_kbps": _num,
    "pcie_link_gen": _int, "pcie_link_gen_max": _int,
    "pcie_link_width": _int, "pcie_link_width_max": _int,
    "gpm": {"anyOf": [_GPM, {"type": "null"}]},
    "gpm_unavailable": _str,
    "unavailable_fields": {"type": "object", "additionalProperties": {"type": "string"},
                           "description": "field -> why NVML could not give it"},
    "error": {**_str, "description": "why nothing could be read from this GPU this sample "
              "(e.g. 'GPU is lost')"},
    "process_util_unavailable": {**_str, "description": "why per-process utilisation is missing"},
}, ["index", "name", "utilization_gpu_pct", "memory_used_bytes", "memory_total_bytes", "gpm"])

_VERDICT = _obj({
    "pid": _int, "gpus": {"type": "array", "items": {"type": "integer"}},
    "verdict": {**_str, "description": "a name from pitstop.profile.verdict.VERDICTS, or null"},
    "line": {"type": "string"},
}, ["pid", "gpus", "verdict", "line"])

#: JSON Schema (2020-12) of one snapshot.
SNAPSHOT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://pitstop.invalid/schemas/monitor-snapshot-v1.json",
    "title": "pitstop monitor snapshot",
    **_obj({
        "schema": {"const": SCHEMA_NAME}, "version": {"const": SCHEMA_VERSION},
        "t": {"type": "number", "description": "CLOCK_MONOTONIC seconds (lines up with profile's samples)"},
        "time": {"type": "number", "description": "Unix time, seconds"},
        "host": {"type": "string"}, "interval_s": {"type": "number"},
        "cpu": _obj({"count": _int, "busy_pct": _num, "per_core_pct": _pcts,
                     "iowait_pct": _num, "load_avg": _pcts}),
        "memory": {"type": ["object", "null"], "properties": {
            k: _int for k in ("total_bytes", "used_bytes", "available_bytes", "swap_total_bytes",
                              "swap_used_bytes", "shm_total_bytes", "shm_used_bytes")}},
        "disks": {"type": ["array", "null"], "items": _obj({
            "name": {"type": "string"}, "read_bps": _num, "write_bps": _num, "busy_pct": _num})},
        "gpus": {"type": "array", "items": _GPU},
        "gpu_unavailable": {**_str, "description": "why there are no GPU panels"},
        "processes": {"type": "array", "items": _PROCESS},
        "other_processes": {"type": "array", "items": _PROCESS},
        "unmatched_gpu_processes": {"type": "array", "items": {"type": "object"}},
        "verdicts": {"type": "array", "items": _VERDICT},
        "sources": {"type": "object"},
        "notes": {"type": "array", "items": {"type": "string"}},
    }),
}


def _value(readings: dict[str, Reading], name: str) -> dict[str, Any]:
    r = readings.get(name)
    return (r.value or {}) if r is not None and not r.stale else {}


def _gpus(readings: dict[str, Reading]) -> list[dict[str, Any]]:
    gpm = {g["index"]: g for g in _value(readings, "gpm").get("gpm") or []}
    util_refused = _value(readings, "gpu").get("process_util_unavailable") or {}
    out = []
    for g in _value(readings, "gpu").get("gpus") or []:
        g = dict(g)
        g["process_util_unavailable"] = util_refused.get(g["index"])
        mask = g.get("clocks_event_reasons")
        g["clocks_event_names"] = clock_event_names(mask) if isinstance(mask, int) else []
        m = gpm.get(g["index"], {})
        if "unavailable" in m:
            g["gpm"], g["gpm_unavailable"] = None, m["unavailable"]
        elif m and not m.get("priming"):
            g["gpm"] = {k: v for k, v in m.items() if k != "index"}
            g["gpm_unavailable"] = None
        else:
            g["gpm"] = None
            g["gpm_unavailable"] = None if "gpm" in readings else "GPM not read"
        out.append(g)
    return out


def build_snapshot(readings: dict[str, Reading], *, interval_s: float,
                   gpu_unavailable: str | None = None, notes: list[str] | None = None,
                   t: float | None = None) -> dict[str, Any]:
    """One snapshot from the sources' latest readings (verdicts are added by the caller)."""
    cpu = _value(readings, "cpu")
    per_core = cpu.get("cpu_per_core_pct")
    procs = [dict(p, gpus=[]) for p in _value(readings, "processes").get("processes") or []]
    by_pid = {p["pid"]: p for p in procs}
    unmatched = []
    for row in _value(readings, "gpu").get("gpu_processes") or []:
        gpu = {"index": row["gpu"], "memory_bytes": row["memory_bytes"],
               "sm_util_pct": row["sm_util_pct"], "mem_util_pct": row["mem_util_pct"]}
        if row["pid"] in by_pid:
            by_pid[row["pid"]]["gpus"].append(gpu)
        else:
            unmatched.append({"pid": row["pid"], **gpu})
    all_notes = list(notes or [])
    nvml = readings.get("gpu")
    if nvml is not None and nvml.stale and gpu_unavailable is None:
        # NVML stuck in a call (a hung driver): say so rather than show no GPU at all.
        gpu_unavailable = ("no fresh GPU reading yet" if nvml.value is None else
                           f"no fresh GPU reading for {nvml.age_s:.0f} s (NVML does not answer)")
    if unmatched:
        all_notes.append(f"{len(unmatched)} GPU process(es) not visible in this PID namespace "
                         "(NVML reports host PIDs; run pitstop on the host to name them)")
    sources = {}
    for name, r in readings.items():
        sources[name] = {"age_s": round(r.age_s, 2) if r.value is not None else None,
                         "stale": r.stale, "error": r.error}
        if r.stale and r.value is not None:
            all_notes.append(f"{name}: no fresh reading for {r.age_s:.0f} s"
                             + (f" ({r.error})" if r.error else ""))
    return {
        "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
        "t": time.monotonic() if t is None else t, "time": time.time(),
        "host": socket.gethostname(), "interval_s": interval_s,
        "cpu": {"count": len(per_core) if per_core else os.cpu_count(),
                "busy_pct": cpu.get("cpu_pct"), "per_core_pct": per_core,
                "iowait_pct": cpu.get("iowait_pct"), "load_avg": cpu.get("load_avg")},
        "memory": _value(readings, "memory").get("memory"),
        "disks": _value(readings, "disks").get("disks"),
        "gpus": _gpus(readings),
        "gpu_unavailable": gpu_unavailable,
        "processes": procs,
        "other_processes": [dict(p, gpus=[]) for p in
                            _value(readings, "processes").get("other_processes") or []],
        "unmatched_gpu_processes": unmatched,
        "verdicts": [],
        "sources": sources,
        "notes": all_notes,
    }


def check_snapshot(obj: Any) -> str | None:
    """Why ``obj`` is not a snapshot this version can read, or ``None``.

    The name and a version this code knows, then :data:`SNAPSHOT_SCHEMA` in full
    (:func:`pitstop.schema.validate`, about as fast as parsing the line): every reader
    (replay, plot, the exporter) relies on the types it states, and a recording is a
    file anyone can hand in.
    """
    from pitstop.schema import validate

    if not isinstance(obj, dict):
        return "not a JSON object"
    if obj.get("schema") != SCHEMA_NAME:
        return f"not a pitstop monitor snapshot (schema {obj.get('schema')!r})"
    version = obj.get("version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        return f"snapshot version {version!r}; this pitstop reads version 1 to {SCHEMA_VERSION}"
    return validate(obj, SNAPSHOT_SCHEMA, "snapshot")


if __name__ == "__main__":  # python -m pitstop.monitor.snapshot > docs/monitor-snapshot.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(SNAPSHOT_SCHEMA, indent=2) + "\n")
