"""The samplers against the real machine: a real busy child process, real /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

from pitstop.telemetry.gpu import open_gpu_reader
from pitstop.telemetry.host import CpuReader, DiskReader, ProcessTreeReader
from pitstop.telemetry.sampler import Sampler, default_readers

BUSY_PARENT = """
import multiprocessing as mp, time
def spin():
    end = time.time() + 30
    while time.time() < end:
        pass
if __name__ == "__main__":
    ctx = mp.get_context("fork")
    p = ctx.Process(target=spin); p.start()
    print("started", flush=True)
    p.join()
"""


def test_process_tree_sees_a_busy_child_and_its_cpu() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BUSY_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        busy_seen = threading.Event()

        def watch(sample: dict[str, Any]) -> None:
            # Waits for the event (the child seen burning CPU), not for a fixed time.
            if any(p["ppid"] == parent.pid and (p["cpu"] or 0) > 0.2
                   for p in sample["procs"].values()):
                busy_seen.set()

        sampler = Sampler([ProcessTreeReader([parent.pid], rescan_s=0.0)], interval_s=0.05,
                          on_sample=watch).start()
        busy_seen.wait(timeout=25)
        samples = sampler.stop()
    finally:
        for kid in psutil.Process(parent.pid).children(recursive=True):  # the spinner
            kid.kill()
        parent.kill()
        parent.wait()
    last = samples[-1]["procs"]
    children = {pid: p for pid, p in last.items() if p["ppid"] == parent.pid}
    assert str(parent.pid) in last and len(children) == 1
    child = next(iter(children.values()))
    # The spinning child uses CPU; the waiting parent hardly any. (CPU share, not speed:
    # on a loaded machine the child may get less than a full core.)
    busy = [s["procs"][pid]["cpu"] for s in samples for pid in children
            if pid in s["procs"] and s["procs"][pid]["cpu"] is not None]
    assert busy and max(busy) > 0.2
    assert child["rss"] > 0 and child["state"] in ("running", "sleeping", "disk-sleep")


def test_cpu_and_disk_readers_give_rates_from_the_second_call() -> None:
    cpu, disk = CpuReader(), DiskReader()
    first = cpu.read()
    assert first["cpu_per_core_pct"] is None
    disk.read()
    time.sleep(0.05)
    second = cpu.read()
    assert len(second["cpu_per_core_pct"]) == os.cpu_count()
    assert all(0.0 <= v <= 100.0 for v in second["cpu_per_core_pct"])
    assert 0.0 <= second["iowait_pct"] <= 100.0
    d = disk.read()
    assert set(d) == {"disk_read_bps", "disk_busy_pct", "disk_busiest"}


def test_default_readers_say_why_gpu_is_missing() -> None:
    readers, missing = default_readers([os.getpid()])
    reader, reason = open_gpu_reader()
    if reader is None:
        assert missing["gpu"] == reason and reason
    else:
        reader.close()
        assert "gpu" not in missing
    sampler = Sampler(readers, interval_s=0.02)
    sample = sampler.sample_once()
    assert str(os.getpid()) in sample["procs"] and "cpu_pct" in sample
    sampler.stop()


def test_sampler_survives_a_broken_reader_and_calls_on_sample() -> None:
    class Broken:
        def read(self) -> dict[str, object]:
            raise RuntimeError("boom")

    seen: list[dict[str, Any]] = []
    two = threading.Event()

    def on_sample(sample: dict[str, Any]) -> None:
        seen.append(sample)
        if len(seen) >= 2:
            two.set()

    sampler = Sampler([Broken(), CpuReader()], interval_s=0.01, on_sample=on_sample, keep=False)
    sampler.start()
    assert two.wait(timeout=20)
    sampler.stop()
    assert seen and sampler.samples == []
    assert "boom" in sampler.errors["Broken"]


FORK_ON_REQUEST = """
import multiprocessing as mp, sys, time
def wait():
    time.sleep(60)
if __name__ == "__main__":
    sys.stdin.readline()
    p = mp.get_context("fork").Process(target=wait, daemon=True); p.start()
    print(p.pid, flush=True)
    sys.stdin.readline()
"""


def test_a_child_started_after_the_last_rescan_is_seen_at_the_next_read() -> None:
    parent = subprocess.Popen([sys.executable, "-c", FORK_ON_REQUEST], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    child = ""
    try:
        assert parent.stdin is not None and parent.stdout is not None
        reader = ProcessTreeReader([parent.pid], rescan_s=3600.0)  # no periodic rescan
        assert set(reader.read()["procs"]) == {str(parent.pid)}
        parent.stdin.write("fork\n")
        parent.stdin.flush()
        child = parent.stdout.readline().strip()
        procs = reader.read()["procs"]
        assert child in procs and procs[child]["ppid"] == parent.pid
    finally:
        if child.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child), signal.SIGKILL)
        parent.kill()
        parent.wait()
