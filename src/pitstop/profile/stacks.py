"""Samples the training loop's main-thread Python stack, to name what runs between hooks.

The recorder times the calls it hooks (DataLoader, forward, backward, optimizer); the
rest of a step (``other``) is the loop's own Python: a ``get_batch`` that slices a
memory-mapped array, a custom prefetcher, a hand-written update rule, logging,
checkpointing. A thread of the training process (pitstop's telemetry
:class:`~pitstop.telemetry.sampler.Sampler`, every :data:`INTERVAL_S`) reads the main
thread's frame (``sys._current_frames``) and the recorder's phase (more often, down to
every :data:`MIN_INTERVAL_S`, when the warm-up shows that the measured window will be
short). In ``other`` it keeps
the user frames of the stack (innermost first, up to 8) and the library function the
innermost one called; in any other phase only the phase. What those samples mean is
decided after the run (:mod:`pitstop.profile.attribution`).

Bounded: at most :data:`MAX_SAMPLES` samples (12 bytes each) and :data:`MAX_CHAINS`
distinct stacks. The thread holds the GIL for a few microseconds per sample.
"""

from __future__ import annotations

import sys
import threading
import time
from array import array
from types import CodeType
from typing import TYPE_CHECKING, Any

from pitstop.profile.frames import FrameClassifier, frame_dict
from pitstop.telemetry.sampler import Sampler

if TYPE_CHECKING:
    from pitstop.profile.recorder import Recorder

__all__ = ["INTERVAL_S", "MAX_CHAINS", "MAX_SAMPLES", "PHASE_CODES", "StackSampler"]

INTERVAL_S = 0.01
MIN_INTERVAL_S = 0.001
TARGET_SAMPLES = 300
MAX_SAMPLES = 60_000
MAX_CHAINS = 5_000
#: Samples outside ``other`` are stored as these negative codes (chains are >= 0).
PHASE_CODES = {"data": -1, "collective": -2, "h2d": -3, "backward": -4, "forward": -5,
               "optimizer": -6}
_OVERFLOW = -7  # an ``other`` sample whose stack did not fit in MAX_CHAINS

_now = time.monotonic_ns


class _MainStackReader:
    """A telemetry reader whose ``read()`` records one stack sample and returns nothing."""

    def __init__(self, sampler: StackSampler) -> None:
        self.s = sampler

    def read(self) -> dict[str, Any]:
        self.s.sample()
        return {}


class StackSampler:
    """Main-thread stack samples for as long as the recorder is active."""

    def __init__(self, rec: Recorder, *, interval_s: float = INTERVAL_S,
                 max_samples: int = MAX_SAMPLES, max_chains: int = MAX_CHAINS) -> None:
        self.rec = rec
        self.interval_s = interval_s
        self.max_samples, self.max_chains = max_samples, max_chains
        if rec.frames is None:
            rec.frames = FrameClassifier()
        self.frames: FrameClassifier = rec.frames
        self.main_id = threading.main_thread().ident
        self.t = array("q")
        self.k = array("i")
        self.dropped = 0
        self._chains: dict[tuple[Any, ...], int] = {}
        self._sampler: Sampler | None = None

    def start(self) -> StackSampler:
        self._sampler = Sampler([_MainStackReader(self)], interval_s=self.interval_s, keep=False)
        self._sampler.start()
        return self

    def fit_interval(self, window_ms: float) -> None:
        """At the end of the warm-up: aim at :data:`TARGET_SAMPLES` samples over the
        measured window, every :data:`MIN_INTERVAL_S` at most often (torch operators
        release the GIL; pure Python holds it for up to the 5 ms switch interval)."""
        if window_ms <= 0 or self._sampler is None:
            return
        interval = max(MIN_INTERVAL_S, min(INTERVAL_S, window_ms / 1e3 / TARGET_SAMPLES))
        if interval >= self.interval_s:
            return
        self.interval_s = interval
        # A new thread, not a new period for the running one: that one is asleep until its
        # next 10 ms tick, which is half of a 20 ms window (30 steps of 0.7 ms).
        old, self._sampler = self._sampler, None
        if threading.current_thread() is not old._thread:
            old.stop()
        self.start()

    def stop(self) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None and threading.current_thread() is not sampler._thread:
            sampler.stop()

    def sample(self) -> None:
        rec = self.rec
        if not rec.active or rec.start_ns is None:
            return
        if len(self.t) >= self.max_samples:
            self.dropped += 1
            return
        phase = rec.current_phase()
        t = _now()
        code = PHASE_CODES.get(phase)
        if code is None:
            frame = sys._current_frames().get(self.main_id)  # type: ignore[arg-type]
            if frame is None:
                return
            key = self.frames.chain(frame)
            code = self._chains.get(key, -100)
            if code == -100:
                code = len(self._chains) if len(self._chains) < self.max_chains else _OVERFLOW
                if code >= 0:
                    self._chains[key] = code
        self.t.append(t)
        self.k.append(code)

    def export(self) -> dict[str, Any]:
        """The samples as JSON: times, codes, and the interned stacks and frames."""
        frames: list[dict[str, Any]] = []
        index: dict[tuple[CodeType, int], int] = {}

        def fid(pair: tuple[CodeType, int]) -> int:
            i = index.get(pair)
            if i is None:
                i = index[pair] = len(frames)
                frames.append(frame_dict(*pair))
            return i

        chains: list[dict[str, Any]] = [{}] * len(self._chains)
        for (user, lib), i in self._chains.items():
            chains[i] = {"user": [fid(u) for u in user], "lib": fid(lib) if lib else None}
        return {"interval_s": self.interval_s, "t": list(self.t), "k": list(self.k),
                "chains": chains, "frames": frames, "dropped": self.dropped,
                "phase_codes": PHASE_CODES, "overflow_code": _OVERFLOW}
