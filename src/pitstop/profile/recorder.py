"""The in-process recorder: timestamps of every step phase, taken inside the training process.

What it hooks (see :mod:`pitstop.profile.hooks`; all restored when the window ends, so
the rest of the run pays nothing): the DataLoader iterator's ``__next__`` (data wait),
``torch.optim``'s global step hooks, ``Tensor.backward`` / ``torch.autograd.backward``,
the outermost modules' forward, ``torch.distributed`` collectives and, on CUDA,
host-to-device copies plus CUDA events and sync detection.

**Step boundaries**, from the first source a loop has, in this order:

1. ``optimizer``: the first ``torch.optim`` optimizer's ``step()`` returning (a GAN's
   two optimizers make one step; an LBFGS closure's forward and backward run inside
   the step and count as forward and backward);
2. ``backward``: a ``backward()`` call after which the gradients were reset before the
   next one (hand-written update rules); gradient accumulation, several backwards
   without a reset, makes one step (:mod:`pitstop.profile.gradwatch`);
3. ``dataloader``: a DataLoader batch, when batches follow each other without any
   backward (inference loops);
   (``closure``: when one optimizer step runs more closures than the whole window has
   steps and more than :data:`CLOSURE_STEPS`, as LBFGS with ``max_iter=50000`` does in
   physics-informed networks, each closure call is a step;)
4. ``manual``: ``prof.step()`` of the API (which uses only that).

A source seen later that ranks higher (an optimizer that first steps after many
accumulation micro-steps) restarts the window with its boundaries.

Besides the timeline it runs, in the same process: the operator probe over one warm-up
step (:mod:`pitstop.profile.probe`, bounded memory), a sampler of the main thread's
Python stack (:mod:`pitstop.profile.stacks`) that tells what the loop does between the
hooked calls, and at the end of the window a short precision A/B of the model
(:mod:`pitstop.profile.precision_ab`).

Recording an interval is appending ``(start_ns, end_ns)`` to a list.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from pitstop.fileio import atomic_write_json
from pitstop.profile import hooks
from pitstop.profile.gradwatch import GradWatch

__all__ = ["CAPTURE_SCHEMA", "KINDS", "PRIORITY", "Recorder"]

CAPTURE_SCHEMA = 2
KINDS = ("data", "h2d", "forward", "backward", "optimizer", "collective")
#: Which phase an instant belongs to when several cover it (the closure of an LBFGS
#: step is forward/backward, not optimizer; a copy inside forward is h2d).
PRIORITY = ("data", "collective", "h2d", "backward", "forward", "optimizer")
_COMPUTE = frozenset(("forward", "backward", "optimizer"))
#: Backwards without a visible gradient reset after which each backward counts as a step.
ACCUMULATION_LIMIT = 16
#: Closure calls inside one optimizer step past which the closures are the steps (LBFGS
#: evaluates up to 25 per step by default; fits that run it once with max_iter=50000 pass
#: this at once).
CLOSURE_STEPS = 64

_now = time.monotonic_ns


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class Recorder:
    """Collects one process's step timeline for ``warmup + steps`` steps.

    ``boundary`` is ``"auto"`` (the sources above) or ``"manual"`` (only
    :meth:`mark_step` ends a step, for the API).
    """

    def __init__(self, *, steps: int, warmup: int, capture_path: str | None,
                 boundary: str = "auto", probe: bool = True, stacks: bool = True,
                 precision_ab: bool = True,
                 on_window_end: Callable[[Recorder], None] | None = None) -> None:
        if boundary == "optimizer":  # the name this option had before the other sources
            boundary = "auto"
        self.steps = steps
        self.warmup = warmup
        self.capture_path = capture_path
        self.manual = boundary == "manual"
        self.mode: str | None = "manual" if self.manual else None
        self.want_probe = probe
        self.want_stacks = stacks
        self.want_ab = precision_ab
        self.on_window_end = on_window_end
        self.active = False
        self.finished = False
        self.written = False
        self.status = "partial"
        self.t0_ns = _now()
        self.t0_wall = time.time()
        self.start_ns: int | None = None
        self.boundaries: list[int] = []
        self.cpu_at_boundary: list[int] = []
        #: per step: the main thread's CPU time inside forward/backward/optimizer
        self.compute_cpu_ns: list[int] = []
        self._compute_depth = 0
        self._compute_c0 = 0
        self._compute_cpu = 0
        self.intervals: dict[str, list[tuple[int, int]]] = {k: [] for k in KINDS}
        self.depth: dict[str, int] = dict.fromkeys(PRIORITY, 0)
        self.h2d_bytes = 0
        self.worker_pids: set[int] = set()
        self.notes: list[str] = []
        self.not_measured: dict[str, str] = {}
        self.opt_steps = 0
        self.data_batches = 0
        self.backward_calls = 0
        self.ddp_seen = False
        self.autocast_seen = False
        self.probe_result: dict[str, Any] | None = None
        self.probe_step: int | None = None
        self.precision_ab_result: dict[str, Any] | None = None
        self.cuda: Any = None  # CudaProbe when on CUDA
        self.loop_frames: dict[str, list[dict[str, Any]]] = {}
        self.backwards_per_step: list[int] = []
        self.mode_switches: list[str] = []
        # hook state (hooks.py reads and writes these)
        self.fwd_depth = 0
        self.fwd_t0 = 0
        self.fwd_hooks: tuple[Any, Any] | None = None
        self.global_fwd_handles: list[Any] = []
        self.undo: list[Callable[[], None]] = []
        self.opt_handles: list[Any] = []
        self.in_opt_hook = False
        self._top_modules: dict[int, Any] = {}
        self._modules: list[Any] = []
        self._first_opt: int | None = None
        self._opt_t0: int | None = None
        self._last_bwd_end: int | None = None
        self._bwd_in_step = 0
        self._accumulating = 0
        self._closure_calls = 0
        self._since_data = {"backward": 0, "optimizer": 0}
        self._last_data_start: int | None = None
        self._grad = GradWatch()
        self._probe: Any = None
        self._probe_done = False
        self._producer_probe: Any = None
        self._last_forward: tuple[Any, Any] | None = None
        self._stacks: Any = None
        self.frames: Any = None  # FrameClassifier, made on first use
        self._torch: Any = None
        self._cuda_decided = False
        self._lock = threading.Lock()
        self.first_event_ns: int | None = None
        self.exit_info: dict[str, Any] | None = None
        # The probed step is the last warm-up step: step 0 pays lazy initialisation.
        self._probe_at = (warmup - 1) if warmup >= 2 else None

    # ---- phases -------------------------------------------------------------------
    def current_phase(self) -> str:
        """The phase the main thread is in now (what the probe and the sampler tag)."""
        d = self.depth
        for kind in PRIORITY:
            if d[kind]:
                return kind
        return "other"

    def enter(self, kind: str) -> None:
        self.depth[kind] += 1
        if kind in _COMPUTE:
            self._compute_depth += 1
            if self._compute_depth == 1:
                self._compute_c0 = time.thread_time_ns()
        if self._probe is not None and self._probe.should_pop() and not self.depth["backward"]:
            self._probe.stop_early()
            self.notes.append(f"operator probe: budget reached ({self._probe.budget_hit}); "
                              "the figures cover the part of the step before that")

    def leave(self, kind: str, t0: int, t1: int) -> None:
        if self.depth[kind] > 0:
            self.depth[kind] -= 1
        if kind in _COMPUTE:
            self._compute_left()
        if self.depth[kind] == 0:
            self.add(kind, t0, t1)

    def _compute_left(self) -> None:
        """Leaving forward/backward/optimizer: when no other of them is running, the main
        thread's CPU time since the first one began is compute CPU of this step."""
        if self._compute_depth > 0:
            self._compute_depth -= 1
            if self._compute_depth == 0:
                self._compute_cpu += time.thread_time_ns() - self._compute_c0

    def add(self, kind: str, t0: int, t1: int) -> None:
        if self.active:
            if self.first_event_ns is None:
                self.first_event_ns = t0
            self.intervals[kind].append((t0, t1))

    def fail(self, where: str, err: BaseException) -> None:
        self.notes.append(f"recording stopped: error in pitstop's {where} hook: "
                          f"{type(err).__name__}: {err}")
        self.active = False
        self._stop_helpers()
        self._uninstall()

    # ---- boundary sources -----------------------------------------------------------
    def _loop_frame(self, kind: str) -> None:
        """Remember (once) the user's frames that call step()/backward()/forward()/next(),
        innermost first: the training loop, from which the stack sampler names the calls
        it makes (see :func:`pitstop.profile.attribution.call_site`)."""
        if kind in self.loop_frames:
            return
        if self.frames is None:
            from pitstop.profile.frames import FrameClassifier

            self.frames = FrameClassifier()
        from pitstop.profile.frames import frame_dict

        user, _lib = self.frames.chain(sys._getframe(2))
        if user:
            self.loop_frames[kind] = [frame_dict(c, ln) for c, ln in user]

    def on_optimizer_pre(self, opt: Any) -> None:
        self.enter("optimizer")
        self._opt_t0 = _now()
        if self._first_opt is None:
            self._first_opt = id(opt)
        if id(opt) == self._first_opt:
            self._closure_calls = 0
        self._loop_frame("optimizer")
        if not self.manual and self.mode not in ("optimizer", "closure"):
            self._switch("optimizer")

    def on_optimizer_post(self, opt: Any) -> None:
        if self.depth["optimizer"] > 0:
            self.depth["optimizer"] -= 1
            self._compute_left()
        t1 = _now()
        if self._opt_t0 is not None and self.depth["optimizer"] == 0:
            self.add("optimizer", self._opt_t0, t1)
            self._opt_t0 = None
        self._since_data["optimizer"] += 1
        if id(opt) == self._first_opt:
            self.opt_steps += 1
            if self.mode == "optimizer":
                self.backwards_per_step.append(self._bwd_in_step)
                self._bwd_in_step = 0
                self._boundary(t1)

    def on_backward_start(self, args: Any) -> None:
        self._loop_frame("backward")
        if self.depth["optimizer"] or self.mode not in (None, "backward", "dataloader"):
            return
        if self._last_bwd_end is None:
            return
        with self._probe_paused():
            reset = self._grad.was_reset()
        if reset is None:
            reset = not self._grad.available or None
        if reset:
            self._accumulating = 0
            if self.mode != "backward":
                self._switch("backward")
            self.backwards_per_step.append(self._bwd_in_step)
            self._bwd_in_step = 0
            self._boundary(self._last_bwd_end)
        else:
            self._accumulating += 1
            if self._accumulating >= ACCUMULATION_LIMIT and self.mode is None:
                self.notes.append(f"{ACCUMULATION_LIMIT} backward() calls without a visible "
                                  "gradient reset and no optimizer: each backward() is counted "
                                  "as one step")
                self._grad.available = False
                self._switch("backward")

    def on_backward_end(self, args: Any, t1: int) -> None:
        self.backward_calls += 1
        self._since_data["backward"] += 1
        self._bwd_in_step += 1
        if self.depth["optimizer"]:
            self._closure_calls += 1
            if self.mode == "optimizer" and self._closure_calls > max(CLOSURE_STEPS, self.warmup + self.steps):
                # One optimizer step holds more closure calls than the whole window
                # (LBFGS with max_iter=50000, as PINNs run it): the closures are the steps.
                self.notes.append(f"one optimizer step ran {self._closure_calls - 1} closures: "
                                  "each closure call (forward + backward) is counted as a step")
                self._switch("closure")
            if self.mode == "closure":
                self.backwards_per_step.append(1)
                self._bwd_in_step = 0
                self._boundary(t1)
            return
        self._last_bwd_end = t1
        if self.mode in ("optimizer", "closure", "manual"):
            return  # steps come from the optimizer (or the API): no gradient watch needed
        with self._probe_paused():
            self._grad.pick(self._modules or list(self._top_modules.values()), args[:1])
            self._grad.remember()

    def on_data_start(self, t0: int) -> None:
        if self.first_event_ns is None:
            self.first_event_ns = t0
        self._loop_frame("data")
        if self.mode is None and self._last_data_start is not None and \
                not any(self._since_data.values()):
            self._switch("dataloader")
            self.start_ns = self._last_data_start
        if self.mode == "dataloader":
            self._boundary(t0)
        self._last_data_start = t0
        self._since_data = {"backward": 0, "optimizer": 0}

    def on_forward_start(self, module: Any, args: Any) -> None:
        if self.global_fwd_handles:
            self._top_modules.setdefault(id(module), module)
        if not self.autocast_seen and len(self.boundaries) <= self.warmup:
            # a loop's autocast use is the same every step: the warm-up steps tell
            with contextlib.suppress(Exception):
                torch = self._torch
                self.autocast_seen = any(bool(torch.is_autocast_enabled(dev))
                                         for dev in ("cpu", "cuda"))
        self._loop_frame("forward")
        if self._producer_probe is not None:
            probe = self._producer_probe
            probe.note_forward_inputs(args, None)
            if probe is not self._probe:  # the probed step is over: one match was enough
                probe.forget_producers()
                self._producer_probe = None
        if self.want_ab and self.depth["backward"] == 0:
            self._last_forward = (module, args)

    def mark_step(self) -> None:
        """End the current step (the API's ``prof.step()``)."""
        if self.active:
            self._boundary(_now())

    def _switch(self, mode: str) -> None:
        """Take ``mode``'s boundaries from now on; steps counted so far are dropped."""
        old = self.mode
        self.mode = mode
        if not self.boundaries:
            return
        self.mode_switches.append(f"{old} -> {mode} after {len(self.boundaries)} steps")
        self.notes.append(f"step boundaries: {mode} steps seen after {len(self.boundaries)} "
                          f"{old} steps; the window restarted on {mode} steps")
        self.boundaries = []
        self.cpu_at_boundary = []
        self.compute_cpu_ns = []
        self.backwards_per_step = []
        self.start_ns = None
        if self._probe is not None:
            self._probe.abandon()
            self._probe = None
        self._producer_probe = None
        self.probe_result = None
        self.probe_step = None
        self._probe_done = False

    # ---- step boundaries ----------------------------------------------------------------
    def _boundary(self, t: int) -> None:
        if not self.active:
            return
        if self.start_ns is None:
            if self.boundaries or self.mode_switches:
                # First boundary after a restart: it starts step 0.
                self.start_ns = t
                return
            self.start_ns = self.first_event_ns if self.first_event_ns is not None else self.t0_ns
            self.start_ns = min(self.start_ns, t)
        self.boundaries.append(t)
        self.cpu_at_boundary.append(time.thread_time_ns())
        self.compute_cpu_ns.append(self._compute_cpu)
        self._compute_cpu = 0
        self.fwd_depth = 0
        n = len(self.boundaries)
        if self.global_fwd_handles and self._top_modules:
            self.narrow_forward_hooks()
        if not self._cuda_decided:
            self._decide_cuda(n)
        if self.cuda is not None:
            self.cuda.on_boundary(n)
        if self.want_probe:
            self._probe_boundary(n, t)
        if self.want_ab and n == (self._probe_at or 1):
            # Imported in a warm-up step (the probed one when there is a probe), so that
            # the window's last step does not pay for it.
            with contextlib.suppress(Exception):
                import pitstop.profile.precision_ab
                import pitstop.train.precision  # noqa: F401
        if n == max(1, self.warmup) and self._stacks is not None:
            self._stacks.fit_interval(self._step_ms_so_far() * self.steps)
        if n >= self.warmup + self.steps:
            self.finish("complete")

    def _step_ms_so_far(self) -> float:
        """Median duration of the steps so far, step 0 (lazy initialisation) and the
        probed step (counting mode: many times slower) left out."""
        b = self.boundaries
        starts = [self.start_ns if self.start_ns is not None else b[0], *b[:-1]]
        ms = sorted((e - a) / 1e6 for i, (a, e) in enumerate(zip(starts, b, strict=False))
                    if i != 0 and i != self._probe_at) or [(b[-1] - starts[0]) / 1e6]
        return ms[len(ms) // 2]

    def _probe_boundary(self, n: int, t: int) -> None:
        """Boundary ``n`` ends step ``n-1`` and starts step ``n``; the probe covers step
        ``_probe_at`` (from now to the next boundary)."""
        from pitstop.profile import probe as probe_mod

        if self._probe is None and not self._probe_done and n == self._probe_at:
            params: set[int] = set()
            for m in self._modules:
                with contextlib.suppress(Exception):
                    params.update(int(p.untyped_storage().data_ptr()) for p in m.parameters())
            self._probe = probe_mod.OpProbe(cuda=self.cuda is not None,
                                            phase_of=self.current_phase, param_storages=params,
                                            max_ops=_env_int(probe_mod.MAX_OPS_ENV) or probe_mod.MAX_OPS)
            self._probe_t0 = _now()
            if not self._probe.start():
                self.notes.append(f"operator probe not run: {self._probe.error}")
                self._probe = None
                self._probe_done = True
                return
            self.probe_step = n
            self._producer_probe = self._probe
        elif self._probe is not None and n == (self._probe_at or 0) + 1:
            self._probe.stop(self._probe_t0, _now())
            self.probe_result = self._probe.result()
            self._probe = None
            self._probe_done = True

    @contextlib.contextmanager
    def _probe_paused(self) -> Any:
        probe = self._probe
        was = bool(probe is not None and probe.recording)
        if was:
            probe.recording = False
        try:
            yield
        finally:
            if was:
                probe.recording = True

    # ---- install / uninstall ---------------------------------------------------------------
    def install(self, torch: Any) -> None:
        """Hook into an imported torch. Safe to call once per process."""
        self.active = True
        self._torch = torch
        hooks.install_all(self, torch, boundaries=not self.manual)
        # CUDA is not touched here: initialising it now would freeze the devices before
        # the script sets CUDA_VISIBLE_DEVICES, and fork-started workers would inherit
        # a CUDA context. The script's own first CUDA use is awaited (_decide_cuda).
        if self.want_probe and self._probe_at is None:
            self.not_measured["host_overhead"] = ("operator probe not run: it needs --warmup 2 "
                                                  "or more")
        if self.want_stacks:
            try:
                from pitstop.profile.stacks import StackSampler

                self._stacks = StackSampler(self).start()
            except Exception as err:
                self.not_measured["python_stacks"] = f"stack sampler not started: {err}"

    def _decide_cuda(self, n: int) -> None:
        """At a step boundary: has the script started using CUDA? Then instrument it."""
        torch = self._torch
        try:
            used = torch is not None and bool(torch.cuda.is_initialized())
        except Exception:
            used = False
        if used:
            self._cuda_decided = True
            try:
                from pitstop.profile.cuda_probe import CudaProbe

                self.cuda = CudaProbe(torch, self, first_boundary=n)
                hooks.install_h2d(self, torch)
            except Exception as err:
                self.not_measured["cuda"] = f"CUDA instrumentation failed: {err}"
                self.cuda = None
        elif n >= max(1, self.warmup):
            self._cuda_decided = True
            try:
                visible = torch is not None and torch.cuda.device_count() > 0
            except Exception:
                visible = False
            reason = ("the script did not use CUDA" if visible
                      else "no CUDA device visible to torch")
            for key in ("gpu_busy", "syncs", "h2d"):
                self.not_measured[key] = reason

    def narrow_forward_hooks(self) -> None:
        """Swap the global forward hooks for hooks on the outermost modules seen so far."""
        for h in self.global_fwd_handles:
            h.remove()
        self.global_fwd_handles = []
        if self.fwd_hooks is None:
            return
        pre, post = self.fwd_hooks
        ours: dict[int, set[int]] = {}
        if self._top_modules:
            import torch.nn  # already imported by the script whose modules these are

            hooks.hide_hooks_from_pickles(self, torch.nn.Module, ours)
        for module in self._top_modules.values():
            try:
                h1 = module.register_forward_pre_hook(pre)
                try:
                    h2 = module.register_forward_hook(post, always_call=True)
                except TypeError:
                    h2 = module.register_forward_hook(post)
            except Exception as err:
                self.notes.append(f"forward of {type(module).__name__} not timed: {err}")
                continue
            ours[id(module)] = {h1.id, h2.id}
            self._modules.append(module)
            self.undo.append(h1.remove)
            self.undo.append(h2.remove)
        self._top_modules = {}

    def _uninstall(self) -> None:
        undo, self.undo = self.undo, []
        for fn in reversed(undo):
            with contextlib.suppress(Exception):
                fn()
        # The window usually ends inside our optimizer post-hook, while torch iterates
        # the dict of global hooks: removing entries then could break the iteration for
        # a hook registered after ours. Left in place they cost two calls that return at
        # once (``active`` is False); a later uninstall outside the hook removes them.
        if not self.in_opt_hook:
            handles, self.opt_handles = self.opt_handles, []
            for h in handles:
                with contextlib.suppress(Exception):
                    h.remove()

    def patch(self, owner: Any, name: str, wrapper: Any) -> None:
        own = name in getattr(owner, "__dict__", {})
        original = owner.__dict__[name] if own else None
        setattr(owner, name, wrapper)
        if own:
            self.undo.append(lambda: setattr(owner, name, original))
        else:  # inherited (e.g. Tensor.to from TensorBase): drop the override
            self.undo.append(lambda: delattr(owner, name))

    def _stop_helpers(self) -> None:
        if self._probe is not None:
            self._probe.abandon()
            self.probe_result = self._probe.result()
            self._probe = None
        self._producer_probe = None
        if self._stacks is not None:
            self._stacks.stop()

    # ---- end of window / process -----------------------------------------------------------
    def finish(self, status: str, exit_info: dict[str, Any] | None = None) -> None:
        """Stop recording, undo every hook and write the capture (once)."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
        self.active = False
        self._uninstall()
        self._stop_helpers()
        if exit_info:
            self.exit_info = exit_info
        if self.cuda is not None:
            try:
                self.cuda.finish()
            except Exception as err:
                self.notes.append(f"CUDA timings lost: {err}")
        self.status = status
        if status == "complete" and self.want_ab:
            self._precision_ab()
        self._last_forward = None
        if self.capture_path:
            self.write()
        if self.on_window_end is not None:
            self.on_window_end(self)

    def _precision_ab(self) -> None:
        try:
            from pitstop.profile.precision_ab import run_ab

            self.precision_ab_result = run_ab(self._torch, self._last_forward, self)
        except Exception as err:
            self.precision_ab_result = {"skipped": f"error: {type(err).__name__}: {err}"}

    def capture(self) -> dict[str, Any]:
        """The JSON-able record of this process (see :mod:`pitstop.profile.analysis`)."""
        torch = self._torch
        threads = None
        with contextlib.suppress(Exception):
            threads = int(torch.get_num_threads()) if torch is not None else None
        return {
            "schema": CAPTURE_SCHEMA,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "hostname": socket.gethostname(),
            "rank": _env_int("RANK"),
            "local_rank": _env_int("LOCAL_RANK"),
            "world_size": _env_int("WORLD_SIZE"),
            "argv": list(sys.argv),
            "t0_ns": self.t0_ns,
            "t0_wall": self.t0_wall,
            "warmup": self.warmup,
            "steps": self.steps,
            "status": self.status,
            "exit": self.exit_info,
            "boundary": self.mode or "none",
            "mode_switches": self.mode_switches,
            "start_ns": self.start_ns,
            "boundaries": self.boundaries,
            "main_thread_cpu_ns": self.cpu_at_boundary,
            "compute_cpu_ns": self.compute_cpu_ns,
            "intervals": {k: [list(iv) for iv in v] for k, v in self.intervals.items()},
            "h2d_bytes": self.h2d_bytes,
            "worker_pids": sorted(self.worker_pids),
            "opt_steps": self.opt_steps,
            "backward_calls": self.backward_calls,
            "backwards_per_step": self.backwards_per_step,
            "data_batches": self.data_batches,
            "ddp": self.ddp_seen,
            "autocast": self.autocast_seen,
            "torch_threads": threads,
            "probe": self.probe_result,
            "probe_step": self.probe_step,
            "stacks": self._stacks.export() if self._stacks is not None else None,
            "loop_frames": self.loop_frames,
            "precision_ab": self.precision_ab_result,
            "cuda": self.cuda.result() if self.cuda is not None else None,
            "not_measured": self.not_measured,
            "notes": self.notes,
        }

    def has_anything(self) -> bool:
        return bool(self.boundaries or self.data_batches or any(self.intervals.values()))

    def write(self) -> None:
        if self.written or not self.capture_path:
            return
        self.written = True
        atomic_write_json(self.capture_path, self.capture())
