"""CUDA-only instrumentation: device time per step (CUDA events) and host-device syncs.

Syncs are found with ``torch.cuda.set_sync_debug_mode("warn")``: every synchronising
CUDA call then raises a warning, which pitstop swallows (the user's output stays
clean), counts per step and maps to the first frame of the user's own code, so the
report can say "``train.py:87``: 50 syncs per step" the way ``pitstop lint`` names
the pattern.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import warnings
from collections import Counter
from typing import Any, cast

__all__ = ["CudaProbe", "user_frame"]

_SYNC_TEXT = "synchronizing CUDA operation"
_LIBRARY_DIRS = tuple({os.path.normpath(p) for p in (
    sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("purelib", ""),
    sysconfig.get_paths().get("platlib", ""), os.path.dirname(os.path.dirname(__file__)),
) if p})


def user_frame(frame: Any) -> tuple[str, int] | None:
    """The innermost frame that belongs to the user's code (not torch, pitstop or stdlib)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            norm = os.path.normpath(filename)
            if not norm.startswith(_LIBRARY_DIRS) and "site-packages" not in norm:
                return filename, frame.f_lineno
        frame = frame.f_back
    return None


class CudaProbe:
    """Records an event at every step boundary and counts syncs while the window is open."""

    def __init__(self, torch: Any, recorder: Any, *, first_boundary: int) -> None:
        self.torch = torch
        self.rec = recorder
        self.first_boundary = first_boundary  # events[i] is recorded at boundary first+i
        self.events: list[Any] = []
        self.syncs_per_step: Counter[int] = Counter()
        self.sync_sites: Counter[str] = Counter()
        self.error: str | None = None
        self._orig_show: Any = None
        self._show: Any = None
        self._filter: Any = None
        self._prev_mode: Any = None
        self._start_sync_detection()

    def _start_sync_detection(self) -> None:
        cuda = self.torch.cuda
        try:
            self._prev_mode = cuda.get_sync_debug_mode()
            cuda.set_sync_debug_mode("warn")
        except Exception as err:
            self.error = f"sync detection unavailable: {err}"
            return
        self._add_filter()
        self._orig_show = warnings.showwarning
        probe = self

        def showwarning(message: Any, category: Any, filename: str, lineno: int,
                        file: Any = None, line: Any = None) -> None:
            if _SYNC_TEXT in str(message):
                step = len(probe.rec.boundaries)
                probe.syncs_per_step[step] += 1
                site = user_frame(sys._getframe(1))
                if site is not None:
                    probe.sync_sites[f"{site[0]}:{site[1]}"] += 1
                return
            probe._orig_show(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        self._show = showwarning

    def _add_filter(self) -> None:
        # "always": every sync reaches showwarning (the default would show each place
        # once). Put first, so a later user filter such as "error" does not turn
        # pitstop's counting into an exception; re-asserted at every step boundary.
        warnings.filterwarnings("always", message=f".*{_SYNC_TEXT}")
        self._filter = warnings.filters[0]

    def _stop_sync_detection(self) -> None:
        if self._orig_show is not None:
            if warnings.showwarning is self._show:  # not replaced by the script since
                warnings.showwarning = self._orig_show
            self._orig_show = None
            with contextlib.suppress(ValueError, AttributeError):
                cast(list, warnings.filters).remove(self._filter)
                warnings._filters_mutated()  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):
                self.torch.cuda.set_sync_debug_mode(self._prev_mode or 0)

    def on_boundary(self, n: int) -> None:
        if self._orig_show is not None and warnings.filters and warnings.filters[0] is not self._filter:
            self._add_filter()
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        self.events.append(ev)

    def finish(self) -> None:
        self._stop_sync_detection()
        self.device_step_ms: list[float] = []
        if len(self.events) >= 2:
            self.events[-1].synchronize()
            self.device_step_ms = [round(a.elapsed_time(b), 3)
                                   for a, b in zip(self.events, self.events[1:], strict=False)]
        self.events = []
        self.memory: dict[str, Any] = {}
        try:
            stats = self.torch.cuda.memory_stats()
            self.memory = {
                "max_allocated_bytes": int(self.torch.cuda.max_memory_allocated()),
                "reserved_bytes": int(self.torch.cuda.memory_reserved()),
                "total_bytes": int(self.torch.cuda.get_device_properties(
                    self.torch.cuda.current_device()).total_memory),
                "alloc_retries": int(stats.get("num_alloc_retries", 0)),
                "ooms": int(stats.get("num_ooms", 0)),
            }
        except Exception as err:
            self.memory = {"error": str(err)}

    def result(self) -> dict[str, Any]:
        return {
            # device_step_ms[i] spans boundaries first+i .. first+i+1: step index first+i
            "first_boundary": self.first_boundary,
            "device_step_ms": getattr(self, "device_step_ms", []),
            "syncs_per_step": {str(k): v for k, v in sorted(self.syncs_per_step.items())},
            "sync_sites": dict(self.sync_sites.most_common(20)),
            "memory": getattr(self, "memory", {}),
            "error": self.error,
            "device_name": self._device_name(),
        }

    def _device_name(self) -> str | None:
        try:
            return str(self.torch.cuda.get_device_name())
        except Exception:
            return None
