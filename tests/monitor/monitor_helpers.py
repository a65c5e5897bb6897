"""Helpers for the monitor's tests: a real training process, waiting without sleeping
blindly, and the recorded NVML value sets."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NVML_SETS = HERE / "nvml"
TRAIN_LOOP = HERE / "train_loop.py"


@contextlib.contextmanager
def training(mode: str = "input", seconds: float = 60, workers: int = 2,
             timeout: float = 90) -> Iterator[subprocess.Popen[str]]:
    """A real ``train_loop.py`` process, yielded once its DataLoader workers deliver."""
    proc = subprocess.Popen([sys.executable, str(TRAIN_LOOP), mode, str(seconds), str(workers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            if line.strip() == "ready":
                break
        assert line.strip() == "ready", f"training did not start: {proc.stderr.read() if proc.stderr else ''}"
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextlib.contextmanager
def busy_process(seconds: float = 120) -> Iterator[subprocess.Popen[bytes]]:
    """A real process spinning on one core, so that a quiet machine (CI, where nothing
    else runs) still has a busy process for the table's "other processes" rows."""
    proc = subprocess.Popen([sys.executable, "-c",
                             f"import time\nend = time.monotonic() + {seconds}\n"
                             "while time.monotonic() < end: pass"],
                            start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def wait_until(what: Callable[[], Any], timeout: float = 30.0, every: float = 0.1) -> Any:
    """Poll ``what`` until it returns something truthy; fail with a clear message."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)


class Clock:
    """A clock a test moves by hand (RecordedNvml plays one frame per ``frame_s``)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t
