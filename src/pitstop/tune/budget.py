"""The time budget of a tune run: parsing ``--budget`` and a clock that trials ask.

Kept free of torch so that the command line can reject a malformed ``--budget``
before anything heavy is imported.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
MAX_SECONDS = 24 * 3600.0
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(h|min|m|sec|s)?", re.IGNORECASE)


def parse_budget(text: str, *, option: str = "--budget") -> float:
    """Seconds in ``"90"``, ``"60s"``, ``"2m"``, ``"1m30s"``, ``"1.5min"`` or ``"1h"``.

    Raises ``ValueError`` with a message naming ``option`` and the accepted forms.
    """
    raw = text.strip().lower()
    pos = 0
    total = 0.0
    parts = 0
    while pos < len(raw):
        match = _PART.match(raw, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
        parts += 1
        pos = match.end()
        while pos < len(raw) and raw[pos] == " ":
            pos += 1
    if parts == 0 or pos != len(raw):
        raise ValueError(f"{option} {text!r}: not a duration; use seconds or units, "
                         f"e.g. 90, 60s, 2m, 1m30s")
    if total <= 0:
        raise ValueError(f"{option} {text!r}: must be more than 0 seconds")
    if total > MAX_SECONDS:
        # A bound is armed from it (setitimer): an astronomic one would overflow there.
        raise ValueError(f"{option} {text!r}: must be at most 24h")
    return total


def format_seconds(seconds: float) -> str:
    """``42.0 s``, ``3.5 min``: durations as the tables print them."""
    if seconds < 0.1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


class Budget:
    """Wall-clock seconds a search may spend, started when the object is made.

    ``clock`` is replaceable so that decisions about what still fits can be tested on
    numbers; under torchrun the ranks pass one agreed clock (see ``agree``).
    """

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.perf_counter,
                 agree: Callable[[float], float] = lambda value: value) -> None:
        self.seconds = float(seconds)
        self._clock = clock
        self._agree = agree
        self.started = clock()

    def spent(self) -> float:
        """Seconds used so far (the largest of all ranks' under torchrun)."""
        return self._agree(self._clock() - self.started)

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent())

    def affords(self, estimate: float) -> bool:
        """Whether a piece of work estimated to take ``estimate`` s still fits."""
        return estimate <= self.left()

    def local(self) -> Budget:
        """The same budget read from this process's clock alone: for decisions inside a
        trial, where a rank must not wait for the others (one may have failed)."""
        view = Budget(self.seconds, clock=self._clock)
        view.started = self.started
        return view

    def share(self, fraction: float) -> Budget:
        """A budget for a part of the run: ``fraction`` of what is left now."""
        return Budget(self.left() * fraction, clock=self._clock, agree=self._agree)
