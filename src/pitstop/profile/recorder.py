"""The in-process recorder: timestamps of every step phase, taken inside the training process.

What it hooks (all restored when the window ends, so the rest of the run pays nothing):

- ``_BaseDataLoaderIter.__next__``: the time the loop waits for each batch (with or
  without workers, the wait is what the training loop sees);
- ``torch.optim``'s global optimizer step pre/post hooks: the optimizer step and the
  step boundaries (the first optimizer that steps marks them; others count as
  optimizer time, so a GAN's two optimizers make one step);
- ``Tensor.backward`` / ``torch.autograd.backward``: backward time;
- module forward pre/post hooks: the outermost module call, i.e. the forward. Global
  hooks for the first step only, to find the outermost modules (the model, the loss);
  from then on hooks on those modules alone, because global hooks put every module
  call of a large model on PyTorch's slow path;
- on CUDA, ``Tensor.to`` / ``Tensor.cuda`` from host memory: host-to-device copies, plus
  CUDA events at step boundaries and sync detection (see :mod:`pitstop.profile.cuda_probe`);
- one *probe* step under ``torch.profiler`` (during warm-up) that counts operators and
  their durations, which tells host overhead from compute on any device.

Recording is appending ``(start_ns, end_ns)`` to a list: well under a microsecond.
Every hook is guarded: an error inside pitstop disables recording and is noted in the
capture; it never reaches the user's code.
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

__all__ = ["CAPTURE_SCHEMA", "KINDS", "Recorder"]

CAPTURE_SCHEMA = 1
KINDS = ("data", "h2d", "forward", "backward", "optimizer", "collective")

_now = time.monotonic_ns


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _compiling_fn(torch: Any) -> Any:
    """``torch.compiler.is_compiling`` (constant-folded by dynamo), or a stand-in."""
    return getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


class Recorder:
    """Collects one process's step timeline for ``warmup + steps`` steps.

    ``boundary`` is ``"optimizer"`` (steps end when the first optimizer's ``step()``
    returns) or ``"manual"`` (only :meth:`mark_step` ends a step, for the API).
    """

    def __init__(self, *, steps: int, warmup: int, capture_path: str | None,
                 boundary: str = "optimizer", probe: bool = True,
                 on_window_end: Callable[[Recorder], None] | None = None) -> None:
        self.steps = steps
        self.warmup = warmup
        self.capture_path = capture_path
        self.boundary_mode = boundary
        self.want_probe = probe
        self.on_window_end = on_window_end
        self.active = False
        self.finished = False
        self.written = False
        self.t0_ns = _now()
        self.t0_wall = time.time()
        self.boundaries: list[int] = []
        self.cpu_at_boundary: list[int] = []
        self.intervals: dict[str, list[tuple[int, int]]] = {k: [] for k in KINDS}
        self.h2d_bytes = 0
        self.worker_pids: set[int] = set()
        self.notes: list[str] = []
        self.not_measured: dict[str, str] = {}
        self.opt_steps = 0
        self.data_batches = 0
        self.ddp_seen = False
        self.device_types: set[str] = set()
        self.probe_result: dict[str, Any] | None = None
        self.cuda: Any = None  # CudaProbe when on CUDA
        self._first_opt: int | None = None
        self._opt_t0: int | None = None
        self._fwd_depth = 0
        self._fwd_t0 = 0
        self._top_modules: dict[int, Any] = {}
        self._global_fwd_handles: list[Any] = []
        self._fwd_hooks: tuple[Any, Any] | None = None
        self._undo: list[Callable[[], None]] = []
        self._opt_handles: list[Any] = []
        self._in_opt_hook = False
        self._probe: Any = None
        # A probe starts and stops at step boundaries; its stop (and the profiler's
        # teardown) lands in the next step, which must still be a warm-up step.
        self._probe_step = (warmup - 2) if warmup >= 3 else None
        self._torch: Any = None
        self._cuda_decided = False
        self._lock = threading.Lock()
        self.first_event_ns: int | None = None
        self.exit_info: dict[str, Any] | None = None

    # ---- recording -------------------------------------------------------------
    def _fail(self, where: str, err: BaseException) -> None:
        self.notes.append(f"recording stopped: error in pitstop's {where} hook: "
                          f"{type(err).__name__}: {err}")
        self.active = False
        self._uninstall()

    def add(self, kind: str, t0: int, t1: int) -> None:
        if self.active:
            if self.first_event_ns is None:
                self.first_event_ns = t0
            self.intervals[kind].append((t0, t1))

    def mark_step(self) -> None:
        """End the current step (called by the optimizer hook or by the API's ``step()``)."""
        if not self.active:
            return
        t = _now()
        if self.first_event_ns is None:
            self.first_event_ns = self.t0_ns
        self.boundaries.append(t)
        self.cpu_at_boundary.append(time.thread_time_ns())
        self._fwd_depth = 0
        n = len(self.boundaries)
        if self._global_fwd_handles and self._top_modules:
            self._narrow_forward_hooks()
        if not self._cuda_decided:
            self._decide_cuda(n)
        if self.cuda is not None:
            self.cuda.on_boundary(n)
        if self.want_probe:
            self._probe_boundary(n)
        if n >= self.warmup + self.steps:
            self.finish("complete")

    # ---- probe step (torch.profiler over one step) -------------------------------
    def _probe_boundary(self, n: int) -> None:
        # Boundary n starts step index n; the probe covers step _probe_step.
        from pitstop.profile import probe

        if self._probe is None and self._probe_step is not None and n == self._probe_step:
            self._probe = probe.OpProbe(cuda=self.cuda is not None)
            if not self._probe.start():
                self.notes.append(f"operator probe not run: {self._probe.error}")
                self.want_probe = False
                self._probe = None
        elif self._probe is not None and n == (self._probe_step or 0) + 1:
            self._probe.stop(self.boundaries[-2] if len(self.boundaries) >= 2 else self.t0_ns,
                             self.boundaries[-1])
            self.want_probe = False

    # ---- install / uninstall ---------------------------------------------------
    def install(self, torch: Any) -> None:
        """Hook into an imported torch. Safe to call once per process."""
        self.active = True
        try:
            self._install_dataloader(torch)
        except Exception as err:
            self.not_measured["data_wait"] = f"could not hook the DataLoader: {err}"
        if self.boundary_mode == "optimizer":
            try:
                self._install_optimizer(torch)
            except Exception as err:
                self.not_measured["optimizer"] = f"no global optimizer hooks in this torch: {err}"
        else:
            try:
                self._install_optimizer(torch, boundaries=False)
            except Exception as err:
                self.not_measured["optimizer"] = f"no global optimizer hooks in this torch: {err}"
        try:
            self._install_backward(torch)
        except Exception as err:
            self.not_measured["backward"] = f"could not hook backward: {err}"
        try:
            self._install_forward(torch)
        except Exception as err:
            self.not_measured["forward"] = f"could not hook module forward: {err}"
        try:
            self._install_collectives(torch)
        except Exception as err:
            self.notes.append(f"collectives not timed: {err}")
        # CUDA is not touched here: initialising it now would freeze the devices before
        # the script sets CUDA_VISIBLE_DEVICES, and fork-started workers would inherit
        # a CUDA context. The script's own first CUDA use is awaited (_decide_cuda).
        self._torch = torch
        if self.want_probe and self._probe_step is None:
            self.not_measured["host_overhead"] = ("operator probe not run: it needs --warmup 3 "
                                                  "or more")

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
                self._install_h2d(torch)
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

    def _uninstall(self) -> None:
        undo, self._undo = self._undo, []
        for fn in reversed(undo):
            with contextlib.suppress(Exception):
                fn()
        # The window usually ends inside our optimizer post-hook, while torch iterates
        # the dict of global hooks: removing entries then could break the iteration for
        # a hook registered after ours. Left in place they cost two calls that return at
        # once (``active`` is False); a later uninstall outside the hook removes them.
        if not self._in_opt_hook:
            handles, self._opt_handles = self._opt_handles, []
            for h in handles:
                with contextlib.suppress(Exception):
                    h.remove()

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        own = name in getattr(owner, "__dict__", {})
        original = owner.__dict__[name] if own else None
        setattr(owner, name, wrapper)
        if own:
            self._undo.append(lambda: setattr(owner, name, original))
        else:  # inherited (e.g. Tensor.to from TensorBase): drop the override
            self._undo.append(lambda: delattr(owner, name))

    def _install_dataloader(self, torch: Any) -> None:
        from torch.utils.data import dataloader as dl

        cls = dl._BaseDataLoaderIter
        orig_next = cls.__next__
        rec = self

        def __next__(it: Any) -> Any:
            t0 = _now()
            try:
                return orig_next(it)
            finally:
                t1 = _now()
                if rec.active:
                    rec.intervals["data"].append((t0, t1))
                    rec.data_batches += 1
                    if rec.first_event_ns is None:
                        rec.first_event_ns = t0
                    workers = it.__dict__.get("_workers")
                    if workers and not it.__dict__.get("_pitstop_seen"):
                        it.__dict__["_pitstop_seen"] = True
                        for w in workers:
                            if w.pid:
                                rec.worker_pids.add(int(w.pid))

        self._patch(cls, "__next__", __next__)

    def _install_optimizer(self, torch: Any, *, boundaries: bool = True) -> None:
        from torch.optim import optimizer as opt_mod

        rec = self

        def pre(opt: Any, args: Any, kwargs: Any) -> None:
            if rec.active:
                rec._opt_t0 = _now()

        def post(opt: Any, args: Any, kwargs: Any) -> None:
            if not rec.active:
                return
            rec._in_opt_hook = True
            try:
                t1 = _now()
                if rec._opt_t0 is not None:
                    rec.add("optimizer", rec._opt_t0, t1)
                    rec._opt_t0 = None
                if rec._first_opt is None:
                    rec._first_opt = id(opt)
                if id(opt) == rec._first_opt:
                    rec.opt_steps += 1
                    if boundaries:
                        rec.mark_step()
            except Exception as err:
                rec._fail("optimizer", err)
            finally:
                rec._in_opt_hook = False

        h1 = opt_mod.register_optimizer_step_pre_hook(pre)
        h2 = opt_mod.register_optimizer_step_post_hook(post)
        self._opt_handles = [h1, h2]

    def _install_backward(self, torch: Any) -> None:
        rec = self
        for owner, name in ((torch.Tensor, "backward"), (torch.autograd, "backward")):
            orig = getattr(owner, name)

            def wrapped(*args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
                t0 = _now()
                try:
                    return __orig(*args, **kwargs)
                finally:
                    if rec.active:
                        rec.add("backward", t0, _now())

            wrapped.__doc__ = orig.__doc__
            wrapped.__name__ = getattr(orig, "__name__", name)
            wrapped.__wrapped__ = orig  # type: ignore[attr-defined]
            self._patch(owner, name, wrapped)

    def _install_forward(self, torch: Any) -> None:
        from torch.nn.modules import module as mod

        rec = self
        compiling = _compiling_fn(torch)
        ddp_cls: Any = None
        with contextlib.suppress(Exception):
            from torch.nn.parallel import DistributedDataParallel as ddp_cls

        def pre(module: Any, args: Any) -> None:
            if compiling() or not rec.active:
                return
            if rec._fwd_depth == 0:
                rec._fwd_t0 = _now()
                if rec._global_fwd_handles:
                    rec._top_modules.setdefault(id(module), module)
                if ddp_cls is not None and not rec.ddp_seen and isinstance(module, ddp_cls):
                    rec.ddp_seen = True
            rec._fwd_depth += 1

        def post(module: Any, args: Any, output: Any) -> None:
            if compiling() or not rec.active:
                return
            if rec._fwd_depth > 0:
                rec._fwd_depth -= 1
                if rec._fwd_depth == 0:
                    rec.add("forward", rec._fwd_t0, _now())

        self._fwd_hooks = (pre, post)
        h1 = mod.register_module_forward_pre_hook(pre)
        try:
            h2 = mod.register_module_forward_hook(post, always_call=True)
        except TypeError:  # torch < 2.1
            h2 = mod.register_module_forward_hook(post)
        self._global_fwd_handles = [h1, h2]
        self._undo.append(h1.remove)
        self._undo.append(h2.remove)

    def _narrow_forward_hooks(self) -> None:
        """Swap the global forward hooks for hooks on the outermost modules seen so far."""
        for h in self._global_fwd_handles:
            h.remove()
        self._global_fwd_handles = []
        if self._fwd_hooks is None:
            return
        pre, post = self._fwd_hooks
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
            self._undo.append(h1.remove)
            self._undo.append(h2.remove)
        self._top_modules = {}

    def _install_collectives(self, torch: Any) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            return
        rec = self
        compiling = _compiling_fn(torch)
        for name in ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                     "reduce_scatter_tensor", "broadcast", "barrier", "reduce", "all_to_all",
                     "all_to_all_single", "gather", "scatter"):
            orig = getattr(dist, name, None)
            if orig is None:
                continue

            def wrapped(*args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
                if compiling():
                    return __orig(*args, **kwargs)
                t0 = _now()
                try:
                    return __orig(*args, **kwargs)
                finally:
                    if rec.active and not kwargs.get("async_op"):
                        rec.add("collective", t0, _now())

            wrapped.__doc__ = orig.__doc__
            wrapped.__name__ = name
            wrapped.__wrapped__ = orig  # type: ignore[attr-defined]
            self._patch(dist, name, wrapped)

    def _install_h2d(self, torch: Any) -> None:
        rec = self
        compiling = _compiling_fn(torch)
        for name in ("to", "cuda"):
            orig = getattr(torch.Tensor, name)

            def wrapped(t: Any, *args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
                if compiling():  # traced by torch.compile: stay invisible to it
                    return __orig(t, *args, **kwargs)
                t0 = _now()
                out = __orig(t, *args, **kwargs)
                if rec.active and out is not t and out.is_cuda and not t.is_cuda:
                    rec.add("h2d", t0, _now())
                    rec.h2d_bytes += t.numel() * t.element_size()
                return out

            wrapped.__doc__ = orig.__doc__
            wrapped.__name__ = name
            self._patch(torch.Tensor, name, wrapped)

    # ---- end of window / process -----------------------------------------------
    def finish(self, status: str, exit_info: dict[str, Any] | None = None) -> None:
        """Stop recording, undo every hook and write the capture (once)."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
        self.active = False
        self._uninstall()
        if exit_info:
            self.exit_info = exit_info
        if self._probe is not None and self.probe_result is None:
            self._probe.abandon()
        if self._probe is not None:
            self.probe_result = self._probe.result()
        if self.cuda is not None:
            try:
                self.cuda.finish()
            except Exception as err:
                self.notes.append(f"CUDA timings lost: {err}")
        self.status = status
        if self.capture_path:
            self.write()
        if self.on_window_end is not None:
            self.on_window_end(self)

    def capture(self) -> dict[str, Any]:
        """The JSON-able record of this process (see :mod:`pitstop.profile.analysis`)."""
        status = getattr(self, "status", "partial")
        doc: dict[str, Any] = {
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
            "status": status,
            "exit": self.exit_info,
            "boundary": self.boundary_mode if self.opt_steps or self.boundary_mode == "manual"
            else ("dataloader" if self.data_batches else "none"),
            "start_ns": self.first_event_ns,
            "boundaries": self.boundaries,
            "main_thread_cpu_ns": self.cpu_at_boundary,
            "intervals": {k: [list(iv) for iv in v] for k, v in self.intervals.items()},
            "h2d_bytes": self.h2d_bytes,
            "worker_pids": sorted(self.worker_pids),
            "opt_steps": self.opt_steps,
            "data_batches": self.data_batches,
            "ddp": self.ddp_seen,
            "probe": self.probe_result,
            "cuda": self.cuda.result() if self.cuda is not None else None,
            "not_measured": self.not_measured,
            "notes": self.notes,
        }
        return doc

    def has_anything(self) -> bool:
        return bool(self.boundaries or self.data_batches or any(self.intervals.values()))

    def write(self) -> None:
        if self.written or not self.capture_path:
            return
        self.written = True
        atomic_write_json(self.capture_path, self.capture())
