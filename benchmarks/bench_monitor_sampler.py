"""What does `pitstop monitor`'s sampling cost, next to nvitop's ResourceMetricCollector?

Two measurements, in one run of this script:

1. **CPU at 1 Hz.** A real training process runs (tests/monitor/train_loop.py: torch,
   a DataLoader with 2 worker processes) so that pitstop has a process tree to follow
   and a verdict to compute. Child processes then sample for ``--seconds`` each,
   alternating (pitstop, nvitop, pitstop, nvitop, …) so that drifting machine load
   hits both alike:

   - pitstop: ``pitstop.monitor.collector.Collector`` at 1 s, every source on its own
     thread (per-core CPU, iowait, load, memory, swap, /dev/shm, per-disk I/O, the
     process scan with the training process and its workers, container ids, the
     verdict over a 30 s window), and NVML when the machine has it;
   - nvitop: ``nvitop.ResourceMetricCollector(interval=1.0)`` started in the
     background (host CPU, memory, swap, load; GPU and GPU-process metrics when NVML
     is there), its documented use; nvitop is installed for this benchmark only
     (``pip install nvitop``), never a pitstop dependency; without it the pitstop
     figures are printed alone.

   Each child reports its process CPU time (all threads, ``getrusage``) over the
   window after a 3 s warm-up, as a percent of one core; the medians and their ratio
   are printed with the load average.

2. **Memory over a 1-hour recording, simulated.** In this process, 3600 samples with
   simulated time 1 s apart (sources read back to back; a recorded H100 value set
   stands in for NVML so the GPU and GPM paths run) go through the collector, the
   verdict window, the screen's sparkline history and the recorder (to a temp file);
   traced Python memory is printed every 600 samples: it must level off.

    .venv/bin/python benchmarks/bench_monitor_sampler.py             # 60 s per child, 2 rounds
    .venv/bin/python benchmarks/bench_monitor_sampler.py --quick     # 20 s per child, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "tests" / "monitor" / "train_loop.py"
H100 = REPO / "tests" / "monitor" / "nvml" / "h100-sxm-compute.json"

CHILD = r"""
import json, resource, sys, time
which, seconds, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if which == "pitstop":
    from pitstop.monitor.collector import Collector
    c = Collector(interval_s=1.0).start()
    stop = c.stop
    check = lambda: any(p["pid"] == pid for p in (c.latest() or {}).get("processes", []))
else:
    from nvitop import ResourceMetricCollector
    c = ResourceMetricCollector(interval=1.0, root_pids=[pid])
    c.start("bench")
    stop = c.stop
    check = lambda: True
time.sleep(3.0)
t0, c0 = time.monotonic(), cpu()
time.sleep(seconds)
t1, c1 = time.monotonic(), cpu()
seen = check()
stop()
print(json.dumps({"which": which, "cpu_pct": 100 * (c1 - c0) / (t1 - t0), "seen_trainer": seen}))
"""


def child(which: str, seconds: float, pid: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(seconds), str(pid)], env=env,
                         capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(f"{which} child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_over_an_hour() -> list[tuple[int, float, float]]:
    from pitstop.monitor.collector import Collector
    from pitstop.monitor.history import History
    from pitstop.monitor.recording import Recorder
    from pitstop.telemetry.recorded_nvml import load_recorded_nvml

    clock = {"t": 0.0}
    nv = load_recorded_nvml(H100, clock=lambda: clock["t"])
    collector = Collector(interval_s=1.0, window_s=30.0, nvml=nv)
    history = History(240)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(Path(tmp) / "hour.jsonl", interval_s=1.0)
        tracemalloc.start()
        t0 = time.monotonic()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(1, 3601):
            clock["t"] = float(i)
            collector.prime()
            snap = collector.assemble(t=1e6 + i)
            history.push(snap)
            recorder.write(snap)
            if i % 600 == 0:
                current, peak = tracemalloc.get_traced_memory()
                rows.append((i, current / 2**20, peak / 2**20))
        wall = time.monotonic() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        tracemalloc.stop()
        recorder.close()
        size = (Path(tmp) / "hour.jsonl").stat().st_size
        collector.close()
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    print(f"  3600 samples in {wall:.1f} s wall, {cpu:.1f} s CPU with tracemalloc on "
          f"({1000 * cpu / 3600:.1f} ms per sample, tracing included); window holds "
          f"{len(collector.window)} snapshots; recording {size / 2**20:.1f} MiB")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--rounds", type=int)
    args = ap.parse_args()
    seconds = args.seconds or (20.0 if args.quick else 60.0)
    rounds = args.rounds or (1 if args.quick else 2)
    try:
        import nvitop  # noqa: F401

        others = ["nvitop"]
    except ImportError:
        others = []
        print("nvitop is not installed (pip install nvitop): pitstop alone")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs")
    train = subprocess.Popen([sys.executable, str(TRAIN), "input", str(10_000), "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, start_new_session=True)
    try:
        assert train.stdout is not None and train.stdout.readline().strip() == "ready"
        results: dict[str, list[float]] = {"pitstop": [], **{o: [] for o in others}}
        for r in range(rounds):
            for which in ["pitstop", *others] if r % 2 == 0 else [*others, "pitstop"]:
                res = child(which, seconds, train.pid)
                results[which].append(res["cpu_pct"])
                print(f"  round {r + 1} {which:8s} {res['cpu_pct']:.3f} % of one core"
                      + ("" if res["seen_trainer"] else "  (did not see the training process!)"))
    finally:
        os.killpg(train.pid, signal.SIGKILL)  # the training process and its workers
        train.wait()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    med = {k: statistics.median(v) for k, v in results.items()}
    print("\nsampler CPU at 1 Hz (median, % of one core):")
    for k, v in med.items():
        print(f"  {k:8s} {v:.3f} %")
    if "nvitop" in med and med["nvitop"] > 0:
        print(f"  pitstop / nvitop = {med['pitstop'] / med['nvitop']:.2f}x")
    print("\nmemory over a simulated 1-hour recording (traced Python heap):")
    for i, cur, peak in memory_over_an_hour():
        print(f"  after {i:5d} samples: {cur:6.2f} MiB now, {peak:6.2f} MiB peak")


if __name__ == "__main__":
    main()
