"""``pitstop monitor --prometheus [HOST:]PORT``: the latest snapshot as Prometheus metrics.

A metric that means what a DCGM exporter field means carries that field's name, unit
and scale, so that existing Grafana dashboards for dcgm-exporter show pitstop's
numbers unchanged (``DCGM_FI_PROF_*`` activities are ratios 0-1, framebuffer memory in
MiB, PCIe in bytes/s); every other metric is ``pitstop_*`` with its unit in its name.
GPU metrics have the labels ``gpu``, ``UUID``, ``pci_bus_id``, ``modelName`` and
``Hostname`` as dcgm-exporter's (not its ``device``, the ``nvidiaN`` node name); process metrics ``pid``, ``container``, ``role`` and, for GPU
memory, ``gpu``. The exporter binds 127.0.0.1 unless a host is given.

The values are read from the collector's latest snapshot at scrape time: a scrape
never waits for a sample.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterator
from typing import Any

from pitstop.errors import UsageError

__all__ = ["DCGM_GPU_METRICS", "PITSTOP_GPU_METRICS", "SnapshotCollector", "parse_listen",
           "serve"]

MiB = 2**20

#: DCGM field name -> (help, how to get it from a GPU entry of a snapshot).
DCGM_GPU_METRICS: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %), NVML utilization.gpu",
                             lambda g: g.get("utilization_gpu_pct")),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("Memory utilization (in %)", lambda g: g.get("utilization_memory_pct")),
    # Whole MiB, as dcgm-exporter gives them.
    "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB)",
                            lambda g: None if g.get("memory_used_bytes") is None
                            else g["memory_used_bytes"] // MiB),
    "DCGM_FI_DEV_FB_FREE": ("Framebuffer memory free (in MiB)",
                            lambda g: None if g.get("memory_used_bytes") is None or not g.get("memory_total_bytes")
                            else (g["memory_total_bytes"] - g["memory_used_bytes"]) // MiB),
    "DCGM_FI_DEV_POWER_USAGE": ("Power draw (in W)", lambda g: g.get("power_draw_w")),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("Power management limit (in W)", lambda g: g.get("power_limit_w")),
    "DCGM_FI_DEV_GPU_TEMP": ("GPU temperature (in C)", lambda g: g.get("temperature_c")),
    "DCGM_FI_DEV_SM_CLOCK": ("SM clock frequency (in MHz)", lambda g: g.get("clock_sm_mhz")),
    "DCGM_FI_DEV_MEM_CLOCK": ("Memory clock frequency (in MHz)", lambda g: g.get("clock_mem_mhz")),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("Current clock throttle reasons (NVML bit mask)",
                                           lambda g: g.get("clocks_event_reasons")),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("Ratio of time the graphics engine is active (NVML GPM)",
                                      lambda g: _ratio(g, "graphics_active_pct")),
    "DCGM_FI_PROF_SM_ACTIVE": ("The ratio of cycles an SM has at least 1 warp assigned (NVML GPM)",
                               lambda g: _ratio(g, "sm_active_pct")),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("The ratio of resident warps to the maximum on an SM (NVML GPM)",
                                  lambda g: _ratio(g, "sm_occupancy_pct")),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("Ratio of cycles any tensor pipe is active (NVML GPM)",
                                        lambda g: _ratio(g, "tensor_active_pct")),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("Ratio of DRAM bandwidth in use to the maximum (NVML GPM)",
                                 lambda g: _ratio(g, "dram_bw_util_pct")),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("PCIe bytes transmitted per second (NVML GPM)",
                                   lambda g: (g.get("gpm") or {}).get("pcie_tx_bps")),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("PCIe bytes received per second (NVML GPM)",
                                   lambda g: (g.get("gpm") or {}).get("pcie_rx_bps")),
}

#: GPU values DCGM has no field for (or not with this meaning).
PITSTOP_GPU_METRICS: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "pitstop_gpu_memory_total_bytes": ("GPU memory size", lambda g: g.get("memory_total_bytes")),
    "pitstop_gpu_sm_clock_max_mhz": ("Maximum SM clock", lambda g: g.get("clock_sm_max_mhz")),
    "pitstop_gpu_temperature_slowdown_celsius": ("Temperature at which the GPU slows down",
                                                 lambda g: g.get("temperature_slowdown_c")),
    "pitstop_gpu_pcie_rx_bytes_per_second": ("PCIe receive throughput (NVML, without GPM)",
                                             lambda g: None if g.get("pcie_rx_kbps") is None
                                             else g["pcie_rx_kbps"] * 1000),
    "pitstop_gpu_pcie_tx_bytes_per_second": ("PCIe transmit throughput (NVML, without GPM)",
                                             lambda g: None if g.get("pcie_tx_kbps") is None
                                             else g["pcie_tx_kbps"] * 1000),
}


def _ratio(g: dict[str, Any], key: str) -> float | None:
    v = (g.get("gpm") or {}).get(key)
    return None if v is None else round(v / 100.0, 4)


def dcgm_bus_id(bus_id: Any) -> str:
    """``00000000:0d:00.0`` as dcgm-exporter's ``pci_bus_id`` label spells it
    (``00000000:0D:00.0``)."""
    return str(bus_id or "").upper()


def parse_listen(spec: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port); 127.0.0.1 by default."""
    m = re.fullmatch(r"(?:\[(?P<v6>[0-9a-fA-F:.]+)\]:|(?P<host>[^:\[\]]+):)?(?P<port>\d+)", spec.strip())
    if not m:
        raise UsageError(f"--prometheus {spec}: expected PORT or HOST:PORT (e.g. 9400 or "
                         "0.0.0.0:9400)")
    port = int(m.group("port"))
    if not 1 <= port <= 65535:
        raise UsageError(f"--prometheus {spec}: port {port} is not between 1 and 65535")
    return m.group("v6") or m.group("host") or "127.0.0.1", port


class SnapshotCollector:
    """A prometheus_client collector over ``latest()`` (the collector's newest snapshot)."""

    def __init__(self, latest: Callable[[], dict[str, Any] | None]) -> None:
        self._latest = latest

    def describe(self) -> list[Any]:
        return []  # metric families depend on the machine; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        snap = self._latest()
        if not snap:
            return
        host = str(snap.get("host", ""))
        gpu_labels = ["gpu", "UUID", "pci_bus_id", "modelName", "Hostname"]
        for table in (DCGM_GPU_METRICS, PITSTOP_GPU_METRICS):
            for name, (doc, get) in table.items():
                fam = GaugeMetricFamily(name, doc, labels=gpu_labels)
                for g in snap.get("gpus") or []:
                    v = get(g)
                    if v is not None:
                        fam.add_metric([str(g["index"]), str(g.get("uuid") or ""),
                                        dcgm_bus_id(g.get("pci_bus_id")),
                                        str(g.get("name") or ""), host], float(v))
                yield fam
        yield from self._host(snap, host)
        yield from self._processes(snap, host)
        fam = GaugeMetricFamily("pitstop_verdict", "1 for the current verdict of each training "
                                "process (pitstop profile's rules over the monitor's window)",
                                labels=["pid", "container", "verdict", "Hostname"])
        procs = {p["pid"]: p for p in snap.get("processes") or []}
        for v in snap.get("verdicts") or []:
            if v.get("pid") is not None and v.get("verdict"):
                fam.add_metric([str(v["pid"]), _container(procs.get(v["pid"], {})), v["verdict"], host], 1.0)
        yield fam

    def _host(self, snap: dict[str, Any], host: str) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        cpu = snap.get("cpu") or {}
        mem = snap.get("memory") or {}
        scalars = {
            "pitstop_cpu_busy_percent": ("Host CPU busy (all cores)", cpu.get("busy_pct")),
            "pitstop_cpu_iowait_percent": ("Host CPU time in iowait", cpu.get("iowait_pct")),
            "pitstop_cpu_count": ("CPUs the sampler sees", cpu.get("count")),
            "pitstop_memory_used_bytes": ("Host memory in use (total - available)", mem.get("used_bytes")),
            "pitstop_memory_total_bytes": ("Host memory", mem.get("total_bytes")),
            "pitstop_swap_used_bytes": ("Swap in use", mem.get("swap_used_bytes")),
            "pitstop_shm_used_bytes": ("/dev/shm in use", mem.get("shm_used_bytes")),
            "pitstop_shm_total_bytes": ("/dev/shm size", mem.get("shm_total_bytes")),
        }
        for name, (doc, v) in scalars.items():
            fam = GaugeMetricFamily(name, doc, labels=["Hostname"])
            if v is not None:
                fam.add_metric([host], float(v))
            yield fam
        fam = GaugeMetricFamily("pitstop_load_average", "Load average", labels=["window", "Hostname"])
        for window, v in zip(("1m", "5m", "15m"), cpu.get("load_avg") or [], strict=False):
            fam.add_metric([window, host], float(v))
        yield fam
        fam = GaugeMetricFamily("pitstop_cpu_core_busy_percent", "Busy percent of one core",
                                labels=["cpu", "Hostname"])
        for i, v in enumerate(cpu.get("per_core_pct") or []):
            fam.add_metric([str(i), host], float(v))
        yield fam
        for key, name, doc in (("read_bps", "pitstop_disk_read_bytes_per_second", "Disk reads"),
                               ("write_bps", "pitstop_disk_write_bytes_per_second", "Disk writes"),
                               ("busy_pct", "pitstop_disk_busy_percent", "Disk busy time")):
            fam = GaugeMetricFamily(name, doc, labels=["device", "Hostname"])
            for d in snap.get("disks") or []:
                if d.get(key) is not None:
                    fam.add_metric([d["name"], host], float(d[key]))
            yield fam

    def _processes(self, snap: dict[str, Any], host: str) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["pid", "container", "role", "name", "Hostname"]
        cpu = GaugeMetricFamily("pitstop_process_cpu_cores", "CPU time per second of a training "
                                "process or one of its workers (1 = one core)", labels=labels)
        rss = GaugeMetricFamily("pitstop_process_rss_bytes", "Resident memory", labels=labels)
        gmem = GaugeMetricFamily("pitstop_process_gpu_memory_bytes", "GPU memory of a process",
                                 labels=["gpu", *labels])
        gsm = GaugeMetricFamily("pitstop_process_gpu_sm_util_percent",
                                "SM utilisation of a process (NVML per-process samples)",
                                labels=["gpu", *labels])
        for p in snap.get("processes") or []:
            lab = [str(p["pid"]), _container(p), str(p.get("role")), str(p.get("name")), host]
            if p.get("cpu_cores") is not None:
                cpu.add_metric(lab, float(p["cpu_cores"]))
            if p.get("rss_bytes") is not None:
                rss.add_metric(lab, float(p["rss_bytes"]))
            for g in p.get("gpus") or []:
                if g.get("memory_bytes") is not None:
                    gmem.add_metric([str(g["index"]), *lab], float(g["memory_bytes"]))
                if g.get("sm_util_pct") is not None:
                    gsm.add_metric([str(g["index"]), *lab], float(g["sm_util_pct"]))
        yield from (cpu, rss, gmem, gsm)


def _container(p: dict[str, Any]) -> str:
    c = p.get("container") or {}
    return f"{c.get('runtime')}:{c.get('name') or c.get('id', '')[:12]}" if c else ""


def serve(spec: str, latest: Callable[[], dict[str, Any] | None]) -> tuple[Any, str]:
    """Start the HTTP endpoint on a daemon thread; return (server, URL). A port in use or
    an address that cannot be bound is a :class:`UsageError`."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise UsageError("--prometheus needs prometheus-client: pip install 'pitstop[monitor]' "
                         "(or pip install prometheus-client)") from None
    host, port = parse_listen(spec)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(latest))
    try:
        started = start_http_server(port, addr=host, registry=registry)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise UsageError(f"--prometheus {spec}: port {port} on {host} is already in use; "
                             "choose another port") from None
        raise UsageError(f"--prometheus {spec}: cannot listen on {host}:{port} "
                         f"({err.strerror or err})") from None
    server = started[0] if isinstance(started, tuple) else None
    shown = f"[{host}]" if ":" in host else host
    return server, f"http://{shown}:{port}/metrics"
