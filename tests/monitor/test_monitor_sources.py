"""One thread per source with a TTL cache: a blocked source never blocks the reader,
turns stale, and an erroring one keeps its last value while it ages."""

from __future__ import annotations

import threading
import time

from monitor_helpers import wait_until

from pitstop.telemetry.sources import PolledSource


def test_a_blocked_source_does_not_block_latest_and_turns_stale() -> None:
    release = threading.Event()
    calls = []

    def read() -> dict[str, int]:
        calls.append(1)
        if len(calls) > 1:
            release.wait(30)  # a hung driver call
        return {"n": len(calls)}

    src = PolledSource("slow", read, interval_s=0.05, ttl_s=0.3)
    src.read_now()
    src.start()
    try:
        wait_until(lambda: len(calls) >= 2)
        t0 = time.monotonic()
        r = src.latest()
        assert time.monotonic() - t0 < 0.05  # answered at once
        assert r.value == {"n": 1}
        stale = wait_until(lambda: src.latest().stale and src.latest(), timeout=5)
        assert stale.value == {"n": 1} and stale.age_s >= 0.3
    finally:
        release.set()
        src.stop()


def test_an_erroring_source_keeps_its_value_and_ages() -> None:
    state = {"fail": False}

    def read() -> dict[str, str]:
        if state["fail"]:
            raise OSError("gone")
        return {"ok": "yes"}

    src = PolledSource("flaky", read, interval_s=0.05, ttl_s=0.25)
    src.read_now()
    state["fail"] = True
    src.start()
    try:
        r = wait_until(lambda: src.latest().error and src.latest(), timeout=5)
        assert r.value == {"ok": "yes"} and "OSError: gone" in (r.error or "")
        assert wait_until(lambda: src.latest().stale, timeout=5)
    finally:
        src.stop()
