"""`pitstop monitor --prometheus` for real: a subprocess serving HTTP, scraped with
urllib, the text parsed by prometheus_client's own parser; DCGM names and units where
they mean the same; a port in use is one line and exit 2."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from monitor_helpers import NVML_SETS, wait_until
from pitstop_testing import pitstop_env, run_pitstop
from prometheus_client.parser import text_string_to_metric_families


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def exporter(*args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pitstop", "monitor", "--prometheus", str(port),
                             "--interval", "0.3", *args], env=pitstop_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _scrape(port: int) -> dict[str, list]:
    def get() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return None
        # Ready once a sample with rates is out (the first scrape may come before it).
        return text if "pitstop_cpu_busy_percent{" in text else None

    text = wait_until(get, timeout=60, every=0.3)
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


# A real process tree shaped like a DataLoader's: a parent and two children that name
# themselves pt_data_worker as torch's workers do (prctl via /proc/self/comm). The label
# test needs the roles, not torch: the real DataLoader is in test_monitor_training_process.
LOADER_TREE = """\
import os, sys, time
for _ in range(2):
    if os.fork() == 0:
        with open('/proc/self/comm', 'w') as f:
            f.write('pt_data_worker')
        time.sleep(120)
        os._exit(0)
print('ready', flush=True)
time.sleep(120)
"""


@pytest.fixture(scope="module")
def scraped() -> Iterator[tuple[dict[str, list], int, int | None, int | None]]:
    """One exporter (a recorded H100, following a loader-shaped process tree) scraped
    over HTTP: (families, the tree's pid, the exporter's code while running and after
    SIGTERM)."""
    tree = subprocess.Popen([sys.executable, "-c", LOADER_TREE], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert tree.stdout is not None and tree.stdout.readline().strip() == "ready"
        with exporter("--nvml-recording", str(NVML_SETS / "h100-sxm-compute.json"),
                      "--pid", str(tree.pid)) as (proc, port):
            def has_tree() -> dict | None:
                fams = _scrape(port)
                cpu = fams.get("pitstop_process_cpu_cores", [])
                roles = [x.labels["role"] for x in cpu if x.labels["pid"] == str(tree.pid)
                         or x.labels["role"] == "worker"]
                return fams if "training" in roles and roles.count("worker") >= 2 else None

            families = wait_until(has_tree, timeout=60, every=0.3)
            code_while_running = proc.poll()
        yield families, tree.pid, code_while_running, proc.returncode
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(tree.pid, signal.SIGKILL)
        tree.wait(timeout=30)


def test_endpoint_scraped_over_http_with_dcgm_names(scraped: Any) -> None:
    families, _, code_while_running, code_after = scraped
    assert code_while_running is None
    # dcgm-exporter's names, units and labels where the meaning is the same
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
                 "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_SM_ACTIVE",
                 "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                 "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_RX_BYTES"):
        assert families.get(name), name
    sm = families["DCGM_FI_PROF_SM_ACTIVE"][0]
    assert sm.labels["gpu"] == "0" and sm.labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert sm.labels["pci_bus_id"] == "00000000:18:00.0"  # dcgm-exporter's spelling
    assert 0.5 < sm.value < 1.0  # a ratio, as DCGM's, not a percent
    fb = families["DCGM_FI_DEV_FB_USED"][0].value
    assert fb == int(61.3 * 1024)  # whole MiB
    for name in ("pitstop_cpu_busy_percent", "pitstop_memory_used_bytes", "pitstop_load_average",
                 "pitstop_cpu_core_busy_percent", "pitstop_gpu_memory_total_bytes"):
        assert families.get(name), name
    assert code_after == 0  # SIGTERM is a clean stop
    documented = _documented_names()
    assert len(documented) > 30
    missing = sorted(documented - set(families))
    assert not missing, f"documented in docs/monitor.md but not exported: {missing}"


def _documented_names() -> set[str]:
    import re

    from pitstop_testing import REPO

    doc = (REPO / "docs" / "monitor.md").read_text()
    section = doc.split("## Prometheus exporter", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`((?:DCGM_FI|pitstop)_[A-Za-z0-9_]*[A-Za-z0-9])[`{ ]", section))


def test_process_metrics_carry_pid_and_container_labels(scraped: Any) -> None:
    families, pid, _, _ = scraped
    sample = next(s for s in families["pitstop_process_cpu_cores"] if s.labels["pid"] == str(pid))
    assert set(sample.labels) >= {"pid", "container", "role"} and sample.labels["role"] == "training"
    workers = [s for s in families["pitstop_process_cpu_cores"] if s.labels["role"] == "worker"]
    assert len(workers) >= 2
    verdict = [s for s in families["pitstop_verdict"] if s.labels["pid"] == str(pid)]
    assert verdict and verdict[0].value == 1.0  # followed with --pid: judged, even idle


def test_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = run_pitstop("monitor", "--prometheus", f"127.0.0.1:{port}", "--no-gpu")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"pitstop: error: --prometheus 127.0.0.1:{port}: port {port} on "
                                "127.0.0.1 is already in use; choose another port")
