"""Where the UI's snapshots come from: the live collector, or a recording played back.

Both feeds answer :meth:`latest` at once (the UI polls it a few times a second and
never waits on a source) and can be paused: a live feed keeps sampling (and
recording) while the screen holds still; a replay stops its clock.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from pitstop.monitor.collector import Collector
from pitstop.monitor.recording import Recorder, Recording

__all__ = ["Feed", "LiveFeed", "ReplayFeed"]


class Feed(Protocol):
    label: str
    paused: bool

    def latest(self) -> dict[str, Any] | None: ...

    def set_paused(self, paused: bool) -> None: ...

    def close(self) -> None: ...


class LiveFeed:
    """The collector's latest snapshot; records every snapshot when given a recorder."""

    def __init__(self, collector: Collector, recorder: Recorder | None = None,
                 duration_s: float | None = None) -> None:
        self.collector = collector
        self.recorder = recorder
        self.paused = False
        self._held: dict[str, Any] | None = None
        self.label = "live" + (f", recording to {recorder.path.name}" if recorder else "")
        self.deadline = time.monotonic() + duration_s if duration_s else None
        if recorder is not None:
            collector.listeners.append(recorder.write)
        collector.start()

    @property
    def finished(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def latest(self) -> dict[str, Any] | None:
        return self._held if self.paused else self.collector.latest()

    def set_paused(self, paused: bool) -> None:
        self._held = self.collector.latest() if paused else None
        self.paused = paused

    def close(self) -> None:
        self.collector.stop()
        if self.recorder is not None:
            self.recorder.close()


class ReplayFeed:
    """A recording at its own pace (``speed`` times faster), holding on the last sample."""

    def __init__(self, recording: Recording, speed: float = 1.0) -> None:
        self.recording = recording
        self.speed = speed
        self.paused = False
        self._snaps = recording.snapshots
        self._t0 = self._snaps[0]["t"]
        self._elapsed = 0.0
        self._since = time.monotonic()
        self.label = f"replay of {recording.path.name}"
        self._i = 0

    @property
    def finished(self) -> bool:
        return self._i >= len(self._snaps) - 1

    def _position(self) -> float:
        if self.paused:
            return self._elapsed
        return self._elapsed + (time.monotonic() - self._since) * self.speed

    def latest(self) -> dict[str, Any] | None:
        target = self._t0 + self._position()
        while self._i + 1 < len(self._snaps) and self._snaps[self._i + 1]["t"] <= target:
            self._i += 1
        return self._snaps[self._i]

    def set_paused(self, paused: bool) -> None:
        if paused and not self.paused:
            self._elapsed = self._position()
        elif not paused and self.paused:
            self._since = time.monotonic()
        self.paused = paused

    def close(self) -> None:
        pass
