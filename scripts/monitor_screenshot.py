"""Make docs/monitor-screenshot.svg: the live screen, drawn by Textual's own screenshot.

    PYTHONPATH=src python3 scripts/monitor_screenshot.py [OUT.svg] [--size 120x40]

What is on it: a real training process (tests/monitor/train_loop.py: a CNN fed by a
real DataLoader with 2 worker processes whose samples cost ~40 ms of CPU each), this
machine's real CPU cores, memory, disks and processes, and a GPU panel replayed from
the recorded H100 value set tests/monitor/nvml/h100-sxm-input.json (this machine has
no GPU; the value set's _origin says where its numbers come from), whose process list
names the training process. The process table is filtered to the training process,
as a user would with `/`, so that unrelated processes of the machine stay out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pitstop.monitor.app import MonitorApp
from pitstop.monitor.collector import Collector
from pitstop.monitor.feeds import LiveFeed
from pitstop.telemetry.recorded_nvml import load_recorded_nvml

REPO = Path(__file__).resolve().parents[1]


async def shoot(app: MonitorApp, size: tuple[int, int], out: Path, settle_s: float) -> None:
    async with app.run_test(size=size) as pilot:
        app.filter_text = "train_loop"
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
        app.save_screenshot(out.name, path=str(out.parent))
        await pilot.press("q")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, default=REPO / "docs" / "monitor-screenshot.svg")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds of samples before the shot")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    train = subprocess.Popen([sys.executable, str(REPO / "tests" / "monitor" / "train_loop.py"),
                              "input", "600", "2"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, start_new_session=True)
    try:
        assert train.stdout is not None and train.stdout.readline().strip() == "ready"
        nv = load_recorded_nvml(REPO / "tests" / "monitor" / "nvml" / "h100-sxm-input.json",
                                bind={"@train": train.pid})
        feed = LiveFeed(Collector(interval_s=1.0, nvml=nv))
        try:
            asyncio.run(shoot(MonitorApp(feed), (w, h), args.out, args.settle))
        finally:
            feed.close()
    finally:
        os.killpg(train.pid, signal.SIGKILL)  # the training process and its workers
        train.wait()
    print(f"monitor_screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
