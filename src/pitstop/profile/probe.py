"""The operator probe: one step under ``torch.profiler`` to count operators and time them.

This is how pitstop tells *host overhead* from *compute* on any device, CPU included:
a step made of thousands of microsecond-sized operators spends its time in Python and
in the dispatcher, not in arithmetic. From one profiled step it keeps

- ``ops``: how many top-level operators ran (``aten::*`` calls not nested in another
  ``aten::*`` call, in forward, in backward (inside autograd nodes) and in the
  optimizer; DataLoader work excluded),
- ``ops_us``: their summed duration, ``tiny_ops_us``: the part spent in *tiny*
  operators: shorter than :data:`TINY_OP_US`, or whose largest input has fewer than
  :data:`SMALL_NUMEL` elements. The second test does not depend on how fast this
  machine is or how busy it is right now: an operator over a few thousand numbers
  costs its dispatch, whatever the clock says,
- ``matmul_us``: the part in matmul/convolution/attention operators (the rest of the
  operator time moves memory more than it computes: element-wise ops, norms, copies),
- on CUDA, ``kernel_us`` and ``kernels``: device kernel time and count,
- ``top``: the ten operators with the most total time.

The profiler slows the probed step itself, which is why the probe runs during warm-up
and its step is never part of the timing statistics.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

__all__ = ["SMALL_NUMEL", "TINY_OP_US", "OpProbe", "is_matmul_like", "largest_input", "summarize_events"]

TINY_OP_US = 20.0
SMALL_NUMEL = 16384

_MATMUL_MARKERS = ("conv", "addmm", "bmm", "matmul", "linear", "einsum", "attention",
                   "aten::mm", "mmbackward", "lstm", "gru", "rnn_", "gemm", "cutlass", "xmma",
                   "flash", "wgrad", "dgrad", "fprop", "sm80_", "sm90_")


def is_matmul_like(name: str) -> bool:
    """Operators (or kernels) whose work grows faster than the bytes they touch."""
    low = name.lower()
    return any(m in low for m in _MATMUL_MARKERS)


def largest_input(shapes: Any) -> int | None:
    """Elements of the largest tensor among an op's recorded input shapes (``None`` if
    no shapes were recorded). Tensor lists (``_foreach_*`` ops) arrive nested."""
    best: int | None = None

    def walk(item: Any) -> None:
        nonlocal best
        if not isinstance(item, (list, tuple)):
            return
        if item and all(isinstance(d, int) for d in item):
            n = 1
            for d in item:
                n *= d
            best = n if best is None else max(best, n)
        elif not item:
            return
        else:
            for sub in item:
                walk(sub)

    walk(shapes)
    return best


def _is_op(name: str) -> bool:
    # Autograd nodes (``autograd::engine::evaluate_function: MulBackward0``) are not
    # counted themselves: the aten ops inside them are, and the node's own time outside
    # them is engine overhead, i.e. host overhead.
    return name.startswith("aten::")


def summarize_events(events: list[Any]) -> dict[str, Any]:
    """Reduce profiler ``FunctionEvent``s of one step to the probe's figures."""
    ops = 0
    ops_us = tiny_us = matmul_us = 0.0
    kernels = 0
    kernel_us = 0.0
    kernel_matmul_us = 0.0
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for ev in events:
        device = str(getattr(ev, "device_type", "")).rsplit(".", 1)[-1]
        dur = float(ev.time_range.end - ev.time_range.start)
        name = str(ev.name)
        if device == "CUDA":
            kernels += 1
            kernel_us += dur
            if is_matmul_like(name):
                kernel_matmul_us += dur
            continue
        if not _is_op(name):
            continue
        parent = ev.cpu_parent
        nested = False
        while parent is not None:
            pname = str(parent.name)
            if _is_op(pname) or pname.startswith("enumerate(DataLoader)"):
                nested = True
                break
            parent = parent.cpu_parent
        if nested:
            continue
        ops += 1
        ops_us += dur
        numel = largest_input(getattr(ev, "input_shapes", None))
        if dur < TINY_OP_US or (numel is not None and numel < SMALL_NUMEL):
            tiny_us += dur
        elif is_matmul_like(name):
            matmul_us += dur
        entry = by_name[name]
        entry[0] += 1
        entry[1] += dur
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:10]
    return {
        "ops": ops,
        "ops_us": round(ops_us, 1),
        "tiny_ops_us": round(tiny_us, 1),
        "matmul_us": round(matmul_us, 1),
        "kernels": kernels,
        "kernel_us": round(kernel_us, 1),
        "kernel_matmul_us": round(kernel_matmul_us, 1),
        "top": [{"name": n, "count": int(c), "total_us": round(t, 1)} for n, (c, t) in top],
    }


@contextlib.contextmanager
def _quiet_kineto() -> Iterator[None]:
    """Kineto prints ``USDT: profiler_start/stop`` lines to stderr, into the user's output,
    unless ``KINETO_LOG_LEVEL`` is above 5 when it initialises. Set it (if the user has
    not) only around the start, so the script's environment is left as it was.

    (Redirecting fd 2 for the moment instead made a torchrun rank abort at exit.)"""
    added = "KINETO_LOG_LEVEL" not in os.environ
    if added:
        os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        yield
    finally:
        if added:
            os.environ.pop("KINETO_LOG_LEVEL", None)


class OpProbe:
    """Starts ``torch.profiler`` at one step boundary and stops it at the next."""

    def __init__(self, *, cuda: bool) -> None:
        self.cuda = cuda
        self.error: str | None = None
        self._prof: Any = None
        self._window: tuple[int, int] | None = None
        self._result: dict[str, Any] | None = None

    def start(self) -> bool:
        try:
            import torch.profiler as tp

            activities = [tp.ProfilerActivity.CPU]
            if self.cuda:
                activities.append(tp.ProfilerActivity.CUDA)
            self._prof = tp.profile(activities=activities, record_shapes=True,
                                    profile_memory=False, with_stack=False)
            with _quiet_kineto():
                self._prof.__enter__()
            return True
        except Exception as err:  # e.g. the script runs its own profiler already
            self.error = f"{type(err).__name__}: {err}"
            self._prof = None
            return False

    def stop(self, start_ns: int, end_ns: int) -> None:
        if self._prof is None:
            return
        try:
            self._prof.__exit__(None, None, None)
            self._window = (start_ns, end_ns)
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
            self._prof = None

    def abandon(self) -> None:
        """The process ends before the probed step did: stop the profiler, keep nothing."""
        if self._prof is not None and self._window is None:
            with contextlib.suppress(Exception):
                self._prof.__exit__(None, None, None)
            self._prof = None
            self.error = "the probed step did not finish"

    def result(self) -> dict[str, Any] | None:
        """Summarise (expensive, so done after the window) the probed step."""
        if self._result is not None:
            return self._result
        if self._prof is None or self._window is None:
            return {"error": self.error} if self.error else None
        try:
            out = summarize_events(list(self._prof.events()))
        except Exception as err:
            return {"error": f"could not read the profiler's events: {err}"}
        out["start_ns"], out["end_ns"] = self._window
        self._result = out
        self._prof = None
        return out
