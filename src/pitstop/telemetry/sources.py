"""One background thread per source, each keeping only its latest reading (a TTL cache).

A monitor must never wait on a slow source: ``nvmlDeviceGetPcieThroughput`` sleeps
about 20 ms per call, a hung driver or NFS-backed ``/proc`` file can block for
seconds. Each :class:`PolledSource` calls its reader on its own daemon thread every
``interval_s``; :meth:`PolledSource.latest` returns at once with the newest reading
and its age, and marks it *stale* once it is older than ``ttl_s``, so that a consumer
shows a gap (and why) instead of freezing or showing old numbers as new.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PolledSource", "Reading"]


@dataclass(frozen=True)
class Reading:
    """One source's latest value; ``value`` is ``None`` before the first read finished."""

    source: str
    value: dict[str, Any] | None
    t: float  # time.monotonic() when the read finished
    error: str | None
    stale: bool

    @property
    def age_s(self) -> float:
        return time.monotonic() - self.t


class PolledSource:
    """Runs ``read()`` every ``interval_s`` on a daemon thread (see the module docstring)."""

    def __init__(self, name: str, read: Callable[[], dict[str, Any]], *, interval_s: float,
                 ttl_s: float | None = None, close: Callable[[], None] | None = None) -> None:
        self.name = name
        self._read = read
        self._close = close
        self.interval_s = interval_s
        self.ttl_s = ttl_s if ttl_s is not None else max(3.0 * interval_s, interval_s + 2.0)
        self._latest: tuple[dict[str, Any] | None, float, str | None] = (None, 0.0, None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reads = 0

    def read_now(self) -> dict[str, Any] | None:
        """One read in the caller's thread (``--once``, and the priming read)."""
        try:
            value = self._read()
            self._latest = (value, time.monotonic(), None)
        except Exception as err:  # a broken source must not take the others down
            # The old value keeps its old time, so that it turns stale.
            self._latest = (self._latest[0], self._latest[1], f"{type(err).__name__}: {err}")
        self.reads += 1
        return self._latest[0]

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.read_now()
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (a slow read): start a fresh schedule
                next_t = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def start(self) -> PolledSource:
        self._thread = threading.Thread(target=self._run, name=f"pitstop-{self.name}", daemon=True)
        self._thread.start()
        return self

    def latest(self) -> Reading:
        value, t, error = self._latest  # one tuple swap by the reader thread: never torn
        stale = value is None or (time.monotonic() - t) > self.ttl_s
        return Reading(self.name, value, t, error, stale)

    def request_stop(self) -> None:
        """Ask the thread to stop after its current read (returns at once)."""
        self._stop.set()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread; a reader stuck in a call is left behind (it is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._close is not None and (self._thread is None or not self._thread.is_alive()):
            with contextlib.suppress(Exception):
                self._close()
