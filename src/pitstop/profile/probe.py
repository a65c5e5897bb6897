"""The operator probe: one step's operators, counted and timed as they run, in bounded memory.

This is how pitstop tells *host overhead* from *compute* on any device, CPU included:
a step made of thousands of microsecond-sized operators spends its time in Python and
in the dispatcher, not in arithmetic.

How: a ``TorchDispatchMode`` is pushed for one step. Every ATen operator of that step
(forward, backward, optimizer, the loop's own tensor code; on CPU autograd runs the
backward on the calling thread, so its operators pass through the mode too) is timed
around the call and *aggregated at once* into counters per (operator, input shapes,
phase, call site), so the probe's memory does not grow with the number of operators.
Two bounds make that a hard limit:

- :data:`MAX_KEYS` distinct (operator, shapes, phase, site) keys; further shapes of an
  operator share one ``(more shapes)`` key, further operators one ``(more operators)`` key;
- :data:`MAX_OPS` operators or :data:`MAX_PROBE_S` seconds: then recording stops, the
  probe says so (``budget_hit``) and the run goes on. The mode itself is popped at the
  next hook the recorder runs outside any operator.

(An earlier probe used ``torch.profiler``, which keeps every event and builds a Python
object per event afterwards: on an LSTMCell model trained with LBFGS, about 2 million
operators per step, that grew the process to 24 GB.)

What the probe keeps, per phase (``forward``, ``backward``, ``optimizer``, ``data``,
``other``, ...):

- ``ops`` and ``ops_us``: operator count and summed duration;
- ``tiny_ops_us``: the part spent in *tiny* operators: shorter than :data:`TINY_OP_US`,
  or whose largest input has fewer than :data:`SMALL_NUMEL` elements. The size test
  does not depend on how busy the machine is: an operator over a few thousand numbers
  costs its dispatch, whatever the clock says;
- ``matmul_us`` / ``conv_us``: the part in matmul/convolution/attention operators (the
  rest moves memory more than it computes: element-wise ops, norms, copies) and in
  convolutions alone (``channels_last`` helps only those);
- ``overhead_us``: the probe's own cost (the Python call per operator, measured at start,
  plus its bookkeeping, measured per operator), to subtract from the probed step's time;
- the same in the main thread's CPU time (``cpu_ops_us``, ``cpu_tiny_ops_us``,
  ``cpu_matmul_us``, ``cpu_conv_us``) and ``cpu_gaps_us``, the CPU time between two
  operators of the same phase (Python, autograd, dispatch; the probe's own share taken
  out). CPU time is what host overhead is computed from: when another process takes the
  core in the middle of an operator, its wall time grows and it would pass the 20 µs
  test, its CPU time does not.

For operators of the loop's own code (phase ``other``) it also keeps the *call site*
(the innermost frame in the user's files), and per site whether its operators build an
autograd graph (a model written as plain functions: forward work), write parameters in
place (a hand-written update rule: optimizer work), and whether a tensor they made was
passed to the model (the input pipeline). The last test runs until the first forward
after the probe, because loops often fetch the next batch at the end of a step.

On CUDA, ``torch.profiler`` with the CUDA activity alone records kernel time and count
for the same step (kernels are bounded by the same operator budget).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from pitstop.profile.frames import FrameClassifier, frame_dict

__all__ = ["MAX_KEYS", "MAX_OPS", "MAX_PROBE_S", "SMALL_NUMEL", "TINY_OP_US", "OpProbe",
           "is_conv", "is_matmul_like", "largest_input"]

TINY_OP_US = 20.0
SMALL_NUMEL = 16384
MAX_OPS = 300_000
#: Environment variable that lowers (or raises) :data:`MAX_OPS` for one run.
MAX_OPS_ENV = "PITSTOP_PROFILE_PROBE_MAX_OPS"
MAX_KEYS = 4096
MAX_PROBE_S = 30.0
MAX_PRODUCERS = 20_000

_MATMUL_MARKERS = ("conv", "addmm", "bmm", "matmul", "linear", "einsum", "attention",
                   "aten::mm", "mmbackward", "lstm", "gru", "rnn_", "gemm", "cutlass", "xmma",
                   "flash", "wgrad", "dgrad", "fprop", "sm80_", "sm90_", "baddbmm", "addbmm",
                   "addmv", "aten::mv", "aten::dot")

_now = time.monotonic_ns
_cpu = time.thread_time_ns


def is_matmul_like(name: str) -> bool:
    """Operators (or kernels) whose work grows faster than the bytes they touch."""
    low = name.lower()
    return any(m in low for m in _MATMUL_MARKERS)


def is_conv(name: str) -> bool:
    """Convolutions (forward or backward): the operators ``channels_last`` speeds up."""
    low = name.lower()
    return "conv" in low and "transpose" not in low.replace("conv_transpose", "")


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


class _OpInfo:
    """What is known about an operator overload once: its name, kind and written args."""

    __slots__ = ("conv", "graph", "matmul", "name", "skip", "view", "writes")

    def __init__(self, func: Any) -> None:
        schema = getattr(func, "_schema", None)
        self.name = str(getattr(schema, "name", None) or func)
        # record_function markers (``Optimizer.step#SGD.step``) are dispatched like ops
        self.skip = self.name.startswith("profiler::")
        # detach (state_dict(), torch.save) reads a graph input without extending the graph
        self.graph = self.name not in ("aten::detach", "aten::alias", "aten::lift_fresh")
        self.matmul = is_matmul_like(self.name)
        self.conv = self.matmul and is_conv(self.name)
        writes: list[int] = []
        for i, arg in enumerate(getattr(schema, "arguments", ()) or ()):
            alias = getattr(arg, "alias_info", None)
            if alias is not None and getattr(alias, "is_write", False):
                writes.append(i)
        self.writes = tuple(writes)
        # returns that alias an input without writing it: views (select, slice, view ...)
        self.view = any(getattr(r, "alias_info", None) is not None
                        and not getattr(r.alias_info, "is_write", False)
                        for r in getattr(schema, "returns", ()) or ())


def _tensor_args(args: Any, torch_tensor: type) -> Iterator[Any]:
    for a in args:
        if isinstance(a, torch_tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch_tensor):
                    yield b


_CLOCK_FIELDS = {"": ("ns", "tiny_ns", "matmul_ns", "conv_ns"),
                 "cpu_": ("cpu_ops", "cpu_tiny", "cpu_matmul", "cpu_conv")}


class _Phase:
    """Counters of one phase: wall times (``*_ns``) and the main thread's CPU times
    (``cpu_*``), the latter not inflated when another process takes the core mid-step."""

    __slots__ = ("conv_ns", "cpu_conv", "cpu_gap", "cpu_matmul", "cpu_ops", "cpu_tiny",
                 "matmul_ns", "ns", "ops", "overhead_ns", "tiny_ns")

    def __init__(self) -> None:
        self.ops = 0
        self.ns = self.tiny_ns = self.matmul_ns = self.conv_ns = self.overhead_ns = 0
        self.cpu_ops = self.cpu_tiny = self.cpu_matmul = self.cpu_conv = self.cpu_gap = 0

    def add(self, clock: str, dur: int, small: bool, info: _OpInfo) -> None:
        """Count one operator's duration on one clock ("" wall, "cpu_" CPU): tiny when
        shorter than TINY_OP_US or over a small input, else matmul/conv or neither."""
        total, tiny, matmul, conv = _CLOCK_FIELDS[clock]
        setattr(self, total, getattr(self, total) + dur)
        if dur < TINY_OP_US * 1000 or small:
            setattr(self, tiny, getattr(self, tiny) + dur)
        elif info.matmul:
            setattr(self, matmul, getattr(self, matmul) + dur)
            if info.conv:
                setattr(self, conv, getattr(self, conv) + dur)

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.ops, "ops_us": round(self.ns / 1e3, 1),
                "tiny_ops_us": round(self.tiny_ns / 1e3, 1),
                "matmul_us": round(self.matmul_ns / 1e3, 1),
                "conv_us": round(self.conv_ns / 1e3, 1),
                "overhead_us": round(self.overhead_ns / 1e3, 1),
                "cpu_ops_us": round(self.cpu_ops / 1e3, 1),
                "cpu_tiny_ops_us": round(self.cpu_tiny / 1e3, 1),
                "cpu_matmul_us": round(self.cpu_matmul / 1e3, 1),
                "cpu_conv_us": round(self.cpu_conv / 1e3, 1),
                "cpu_gaps_us": round(self.cpu_gap / 1e3, 1)}


class _Site:
    """One line of the user's code that ran operators outside the hooked calls; ``chain``
    is its user frames, innermost first (the line itself, then its callers)."""

    __slots__ = ("chain", "grad_ops", "ns", "ops", "produced_input", "update_ops")

    def __init__(self, chain: list[dict[str, Any]]) -> None:
        self.chain = chain
        self.ops = self.ns = self.grad_ops = self.update_ops = 0
        self.produced_input = False


class OpProbe:
    """Pushes the counting dispatch mode at one step boundary and pops it at the next.

    ``phase_of()`` names the phase the training loop is in (the recorder's state);
    ``param_storages`` are the storage addresses of the model's parameters, to know a
    hand-written update when it writes them through ``.data``.
    """

    def __init__(self, *, cuda: bool, phase_of: Callable[[], str],
                 param_storages: set[int] | None = None, max_ops: int = MAX_OPS,
                 max_keys: int = MAX_KEYS, max_s: float = MAX_PROBE_S) -> None:
        self.cuda = cuda
        self.phase_of = phase_of
        self.param_storages = param_storages or set()
        self.max_ops, self.max_keys, self.max_s = max_ops, max_keys, max_s
        self.error: str | None = None
        self.budget_hit: str | None = None
        self.frames = FrameClassifier()
        self._mode: Any = None
        self._kineto: Any = None
        self._window: tuple[int, int] | None = None
        self._result: dict[str, Any] | None = None
        self._info: dict[Any, _OpInfo] = {}
        self._phases: dict[str, _Phase] = {}
        self._keys: dict[tuple[Any, ...], list[int]] = {}
        self._sites: dict[tuple[Any, ...], _Site] = {}
        self._producers: dict[int, tuple[Any, tuple[Any, ...]]] = {}
        self.recording = False
        # Past the budget, before the model's first call in the probed step, only which
        # line made each tensor is still noted (bounded by MAX_PRODUCERS): a batch built
        # by 300 000 small operators must still be known as the model's input.
        self.tracking_producers = False
        self._forward_seen = False
        self.ops_seen = 0
        self.call_cost_ns = 0
        self._t_start = 0
        self._deadline = 0
        self._errors = 0
        self._grad_enabled: Callable[[], bool] = lambda: False
        self._prev_cpu_out = 0
        self._prev_phase_name = ""
        self.call_cost_cpu_ns = 0

    # ---- lifecycle --------------------------------------------------------------
    def start(self) -> bool:
        try:
            import torch
            from torch.utils._python_dispatch import TorchDispatchMode

            probe = self
            tensor_type = torch.Tensor

            class _CountingMode(TorchDispatchMode):
                @classmethod
                def _should_skip_dynamo(cls) -> bool:
                    # True makes torch wrap __torch_dispatch__ in dynamo.disable, which
                    # imports torch._dynamo on the first operator: 800 modules, 2 s and
                    # 80 MB in a script that never compiles. Keep it only when loaded.
                    return "torch._dynamo" in sys.modules

                def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                       kwargs: Any = None) -> Any:
                    t_in = _now()
                    c_in = _cpu()
                    if kwargs is None:
                        kwargs = {}
                    t0, c0 = _now(), _cpu()
                    out = func(*args, **kwargs)
                    c1, t1 = _cpu(), _now()
                    if probe.recording:
                        try:
                            probe._record(func, args, out, t0, t1, tensor_type, c_in, c0, c1)
                        except Exception as err:  # pitstop's bookkeeping, never the user's op
                            probe._errors += 1
                            if probe.error is None:
                                probe.error = f"{type(err).__name__}: {err}"
                        probe._last_phase.overhead_ns += (_now() - t1) + (t0 - t_in)
                        probe._prev_cpu_out = _cpu()
                    elif probe.tracking_producers:
                        try:
                            probe._track_producer(func, args, out, tensor_type)
                        except Exception:
                            probe._errors += 1
                            probe.tracking_producers = False
                    return out

            self._grad_enabled = torch.is_grad_enabled
            self.call_cost_ns, self.call_cost_cpu_ns = self._calibrate(torch, _CountingMode)
            self._last_phase = _Phase()
            self._mode = _CountingMode()
            if self.cuda:
                self._start_kineto()
            self._t_start = _now()
            self._deadline = self._t_start + int(self.max_s * 1e9)
            self.recording = True
            self._mode.__enter__()
            return True
        except Exception as err:  # e.g. a torch without python dispatch modes
            self.error = f"{type(err).__name__}: {err}"
            self._mode = None
            self.recording = False
            return False

    @staticmethod
    def _calibrate(torch: Any, mode_cls: Any) -> tuple[int, int]:
        """Nanoseconds (wall, main-thread CPU) a mode adds to one operator call (the C++ →
        Python round trip), from 200 one-element ops with and without a mode that only
        passes them on; the best of 3 rounds each."""

        class _Bare(mode_cls.__mro__[1]):
            _should_skip_dynamo = mode_cls._should_skip_dynamo

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                return func(*args, **(kwargs or {}))

        x = torch.zeros(1)
        neg = torch.neg
        best: dict[str, float] = {}

        def timed(key: str) -> None:
            t0, c0 = _now(), _cpu()
            for _ in range(200):
                neg(x)
            for k, v in ((key, (_now() - t0) / 200), (key + "_cpu", (_cpu() - c0) / 200)):
                best[k] = min(best.get(k, v), v)

        for _ in range(3):
            timed("plain")
            with _Bare():
                timed("mode")
        return (max(0, int(best["mode"] - best["plain"])),
                max(0, int(best["mode_cpu"] - best["plain_cpu"])))

    def _start_kineto(self) -> None:
        try:
            import torch.profiler as tp

            self._kineto = tp.profile(activities=[tp.ProfilerActivity.CUDA])
            with _quiet_kineto():
                self._kineto.__enter__()
        except Exception as err:
            self._kineto = None
            self.error = f"kernel timing unavailable: {type(err).__name__}: {err}"

    def should_pop(self) -> bool:
        """True once the budget is spent: the recorder then calls :meth:`stop_early`."""
        return self._mode is not None and self.budget_hit is not None

    def _pop_mode(self) -> None:
        if self._mode is not None:
            mode, self._mode = self._mode, None
            with contextlib.suppress(Exception):
                mode.__exit__(None, None, None)
        if self._kineto is not None:
            with contextlib.suppress(Exception):
                self._kineto.__exit__(None, None, None)

    def stop_early(self) -> None:
        """Budget spent: stop counting now (called from a hook, outside any operator)."""
        self.recording = False
        self._pop_mode()

    def stop(self, start_ns: int, end_ns: int) -> None:
        """The probed step ended: pop the mode; the step was [start_ns, end_ns]."""
        self.recording = False
        self._pop_mode()
        self._window = (start_ns, end_ns)

    def abandon(self) -> None:
        """The process ends before the probed step did: stop, keep nothing."""
        if self._window is None:
            self.recording = False
            self._pop_mode()
            self.error = self.error or "the probed step did not finish"
            self._phases = {}

    # ---- per operator -------------------------------------------------------------
    def _record(self, func: Any, args: Any, out: Any, t0: int, t1: int,
                tensor_type: type, c_in: int = 0, c0: int = 0, c1: int = 0) -> None:
        self.ops_seen += 1
        if self.ops_seen > self.max_ops or t1 > self._deadline:
            self.recording = False
            self.tracking_producers = not self._forward_seen
            self.budget_hit = (f"stopped after {self.ops_seen - 1} operators" if self.ops_seen > self.max_ops
                               else f"stopped after {self.max_s:.0f} s")
            return
        info = self._info.get(func)
        if info is None:
            info = self._info[func] = _OpInfo(func)
        if info.skip:
            return
        phase_name = self.phase_of()
        phase = self._phases.get(phase_name)
        if phase is None:
            phase = self._phases[phase_name] = _Phase()
        # CPU time from the end of the previous operator's bookkeeping to this one's
        # dispatch, in the same phase: Python, autograd and dispatch between operators
        # (less the C++-to-Python round trip the mode itself adds).
        if phase_name == self._prev_phase_name and self._prev_cpu_out:
            phase.cpu_gap += max(0, c_in - self._prev_cpu_out - self.call_cost_cpu_ns)
        self._prev_phase_name = phase_name
        self._last_phase = phase
        dur = t1 - t0
        cpu_dur = c1 - c0
        numel = 0
        sig: list[tuple[int, ...]] = []
        for t in _tensor_args(args, tensor_type):
            n = t.numel()
            if n > numel:
                numel = n
            if len(sig) < 3:
                sig.append(tuple(t.shape))
        phase.ops += 1
        small = numel < SMALL_NUMEL
        phase.add("", dur, small, info)
        phase.add("cpu_", cpu_dur, small, info)
        site_key: tuple[Any, ...] = ()
        if phase_name == "other":
            site_key = self._site_of(info, args, out, dur, tensor_type)
        key: tuple[Any, ...] = (info.name, tuple(sig), phase_name, site_key)
        entry = self._keys.get(key)
        if entry is None:
            if len(self._keys) >= self.max_keys:
                key = (info.name, "(more shapes)", phase_name, ())
                entry = self._keys.get(key)
                if entry is None and len(self._keys) >= 2 * self.max_keys:
                    key = ("(more operators)", "", phase_name, ())
                    entry = self._keys.get(key)
            if entry is None:
                entry = self._keys[key] = [0, 0]
        entry[0] += 1
        entry[1] += dur

    def _user_site(self, depth: int) -> tuple[tuple[Any, ...], _Site | None]:
        """The innermost line of the user's code on the stack, and its site."""
        f: Any = sys._getframe(depth)
        user: Any = None
        walked = 0
        while f is not None and walked < 200:
            if self.frames.is_user_file(f.f_code.co_filename):
                user = f
                break
            f = f.f_back
            walked += 1
        if user is None:
            return (), None
        key = (user.f_code.co_filename, user.f_lineno)
        site = self._sites.get(key)
        if site is None:
            if len(self._sites) >= self.max_keys:
                return (), None
            chain, _lib = self.frames.chain(user)
            site = self._sites[key] = _Site([frame_dict(c, ln) for c, ln in chain])
        return key, site

    def _note_producer(self, info: _OpInfo, args: Any, outs: Any, key: tuple[Any, ...],
                       tensor_type: type) -> None:
        if len(self._producers) >= MAX_PRODUCERS:
            self.tracking_producers = False
            return
        origin = key
        if info.view and args and isinstance(args[0], tensor_type):
            # a slice/view of a batch (inp[:, c]) comes from where the batch was made
            hit = self._producers.get(id(args[0]))
            if hit is not None and hit[0]() is args[0]:
                origin = hit[1]
        for o in outs:
            if isinstance(o, tensor_type):
                with contextlib.suppress(TypeError):
                    self._producers[id(o)] = (weakref.ref(o), origin)

    def _track_producer(self, func: Any, args: Any, out: Any, tensor_type: type) -> None:
        """Past the budget: which line made each tensor, nothing else."""
        info = self._info.get(func)
        if info is None:
            info = self._info[func] = _OpInfo(func)
        if info.skip:
            return
        key, site = self._user_site(3)
        if site is not None:
            self._note_producer(info, args, out if isinstance(out, (list, tuple)) else (out,),
                                key, tensor_type)

    def _site_of(self, info: _OpInfo, args: Any, out: Any, dur: int, tensor_type: type
                 ) -> tuple[Any, ...]:
        key, site = self._user_site(3)
        if site is None:
            return ()
        site.ops += 1
        site.ns += dur
        outs = out if isinstance(out, (list, tuple)) else (out,)
        # Below autograd the outputs carry no graph yet: an op builds one when grad mode
        # is on and an input requires grad.
        if info.graph and self._grad_enabled() and any(
                isinstance(o, tensor_type) and (o.is_floating_point() or o.is_complex())  # type: ignore[attr-defined]
                for o in outs):
            for t in _tensor_args(args, tensor_type):
                if t.requires_grad:
                    site.grad_ops += 1
                    break
        for i in info.writes:
            if i < len(args) and isinstance(args[i], tensor_type):
                a = args[i]
                if (a.is_leaf and a.requires_grad) or (
                        self.param_storages and _storage(a) in self.param_storages):
                    site.update_ops += 1
                    break
        if len(self._producers) < MAX_PRODUCERS:
            self._note_producer(info, args, outs, key, tensor_type)
        return key

    def note_forward_inputs(self, args: Any, kwargs: Any) -> bool:
        """Called by the recorder's forward pre-hook of the outermost modules: marks the
        sites that made the model's inputs. Returns False once nothing is left to match."""
        self._forward_seen = True
        self.tracking_producers = False
        if not self._producers:
            return False
        import torch

        vals = list(args) + list((kwargs or {}).values())
        for t in _tensor_args(vals, torch.Tensor):
            hit = self._producers.get(id(t))
            if hit is not None and hit[0]() is t:
                site = self._sites.get(hit[1])
                if site is not None:
                    site.produced_input = True
        return True

    def forget_producers(self) -> None:
        self._producers = {}

    # ---- result ---------------------------------------------------------------------
    def result(self) -> dict[str, Any] | None:
        """The probed step's summary (small: bounded by the key and site caps)."""
        if self._result is not None:
            return self._result
        if self._window is None:
            return {"error": self.error} if self.error else None
        phases = {name: p.to_dict() for name, p in self._phases.items()}
        for name, p in self._phases.items():
            phases[name]["overhead_us"] = round((p.overhead_ns + p.ops * self.call_cost_ns) / 1e3, 1)
        by_name: dict[str, list[float]] = {}
        for (name, _sig, _phase, _site), (count, ns) in self._keys.items():
            e = by_name.setdefault(name, [0, 0.0])
            e[0] += count
            e[1] += ns
        top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:10]
        shapes = sorted(((name, sig, phase, c, ns) for (name, sig, phase, _s), (c, ns)
                         in self._keys.items() if sig != "(more shapes)"),
                        key=lambda r: -r[4])[:15]
        sites = sorted(self._sites.values(), key=lambda s: -s.ns)[:50]
        out: dict[str, Any] = {
            "kind": "dispatch",
            "ops": sum(p.ops for p in self._phases.values()),
            "phases": phases,
            "call_cost_us": round(self.call_cost_ns / 1e3, 2),
            "call_cost_cpu_us": round(self.call_cost_cpu_ns / 1e3, 2),
            "keys": len(self._keys),
            "budget_hit": self.budget_hit,
            "bookkeeping_errors": self._errors,
            "top": [{"name": n, "count": int(c), "total_us": round(t / 1e3, 1)} for n, (c, t) in top],
            "top_shapes": [{"name": n, "shapes": [list(s) for s in sig], "phase": ph, "count": c,
                            "total_us": round(ns / 1e3, 1)} for n, sig, ph, c, ns in shapes],
            "sites": [{**s.chain[0], "chain": s.chain, "ops": s.ops, "ops_us": round(s.ns / 1e3, 1),
                       "grad_ops": s.grad_ops, "update_ops": s.update_ops,
                       "produced_input": s.produced_input} for s in sites],
            "start_ns": self._window[0], "end_ns": self._window[1],
        }
        if self.error:
            out["error_note"] = self.error
        if self._kineto is not None:
            out.update(_kernel_summary(self._kineto))
        self._result = out
        self._phases, self._keys, self._info = {}, {}, {}
        return out


def _storage(t: Any) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:
        return -1


def _kernel_summary(prof: Any) -> dict[str, Any]:
    kernels = 0
    kernel_us = kernel_matmul_us = 0.0
    try:
        for ev in prof.events():
            if str(getattr(ev, "device_type", "")).rsplit(".", 1)[-1] != "CUDA":
                continue
            dur = float(ev.time_range.end - ev.time_range.start)
            kernels += 1
            kernel_us += dur
            if is_matmul_like(str(ev.name)):
                kernel_matmul_us += dur
    except Exception as err:
        return {"kernel_error": f"{type(err).__name__}: {err}"}
    return {"kernels": kernels, "kernel_us": round(kernel_us, 1),
            "kernel_matmul_us": round(kernel_matmul_us, 1)}


@contextlib.contextmanager
def _quiet_kineto() -> Iterator[None]:
    """Kineto prints ``USDT: profiler_start/stop`` lines to stderr, into the user's output,
    unless ``KINETO_LOG_LEVEL`` is above 5 when it initialises. Set it (if the user has
    not) only around the start, so the script's environment is left as it was."""
    added = "KINETO_LOG_LEVEL" not in os.environ
    if added:
        os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        yield
    finally:
        if added:
            os.environ.pop("KINETO_LOG_LEVEL", None)
