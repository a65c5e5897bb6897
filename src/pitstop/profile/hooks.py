"""The hooks the recorder installs in torch, one function per thing it times.

Each hook only tells the recorder that a phase began or ended (``rec.enter`` /
``rec.leave``) or that a step boundary may have passed; the recorder decides what that
means. Every hook is guarded: an error inside pitstop disables recording and is noted
in the capture, it never reaches the user's code. Every install registers its undo.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pitstop.profile.recorder import Recorder

__all__ = ["install_all"]

_now = time.monotonic_ns


def compiling_fn(torch: Any) -> Any:
    """``torch.compiler.is_compiling`` (constant-folded by dynamo), or a stand-in."""
    return getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def install_all(rec: Recorder, torch: Any, *, boundaries: bool) -> None:
    """Install every hook; what cannot be hooked goes to ``rec.not_measured``."""
    for what, fn in (("data_wait", install_dataloader), ("optimizer", install_optimizer),
                     ("backward", install_backward), ("forward", install_forward)):
        try:
            fn(rec, torch)
        except Exception as err:
            rec.not_measured[what] = f"could not hook {what.replace('_', ' ')}: {err}"
    try:
        install_collectives(rec, torch)
    except Exception as err:
        rec.notes.append(f"collectives not timed: {err}")


def install_dataloader(rec: Recorder, torch: Any) -> None:
    from torch.utils.data import dataloader as dl

    cls = dl._BaseDataLoaderIter
    orig_next = cls.__next__

    def __next__(it: Any) -> Any:
        if not rec.active:
            return orig_next(it)
        t0 = _now()
        rec.on_data_start(t0)
        rec.enter("data")
        try:
            return orig_next(it)
        finally:
            t1 = _now()
            rec.leave("data", t0, t1)
            rec.data_batches += 1
            workers = it.__dict__.get("_workers")
            if workers and not it.__dict__.get("_pitstop_seen"):
                it.__dict__["_pitstop_seen"] = True
                for w in workers:
                    if w.pid:
                        rec.worker_pids.add(int(w.pid))

    rec.patch(cls, "__next__", __next__)


def install_optimizer(rec: Recorder, torch: Any) -> None:
    from torch.optim import optimizer as opt_mod

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        if rec.active:
            try:
                rec.on_optimizer_pre(opt)
            except Exception as err:
                rec.fail("optimizer", err)

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        if not rec.active:
            return
        rec.in_opt_hook = True
        try:
            rec.on_optimizer_post(opt)
        except Exception as err:
            rec.fail("optimizer", err)
        finally:
            rec.in_opt_hook = False

    h1 = opt_mod.register_optimizer_step_pre_hook(pre)
    h2 = opt_mod.register_optimizer_step_post_hook(post)
    rec.opt_handles = [h1, h2]


def install_backward(rec: Recorder, torch: Any) -> None:
    for owner, name in ((torch.Tensor, "backward"), (torch.autograd, "backward")):
        orig = getattr(owner, name)

        def wrapped(*args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
            if not rec.active:
                return __orig(*args, **kwargs)
            outer = rec.depth["backward"] == 0
            if outer:
                try:
                    rec.on_backward_start(args)
                except Exception as err:
                    rec.fail("backward", err)
            t0 = _now()
            rec.enter("backward")
            try:
                return __orig(*args, **kwargs)
            finally:
                t1 = _now()
                rec.leave("backward", t0, t1)
                if outer and rec.active:
                    try:
                        rec.on_backward_end(args, t1)
                    except Exception as err:
                        rec.fail("backward", err)

        wrapped.__doc__ = orig.__doc__
        wrapped.__name__ = name
        wrapped.__wrapped__ = orig  # type: ignore[attr-defined]
        rec.patch(owner, name, wrapped)
    # torch.autograd.grad runs a backward pass too (derivatives inside a loss, as PINNs
    # compute them); timed as backward, it never ends a step.
    orig_grad = torch.autograd.grad

    def grad(*args: Any, **kwargs: Any) -> Any:
        if not rec.active:
            return orig_grad(*args, **kwargs)
        t0 = _now()
        rec.enter("backward")
        try:
            return orig_grad(*args, **kwargs)
        finally:
            rec.leave("backward", t0, _now())

    grad.__doc__ = orig_grad.__doc__
    grad.__name__ = "grad"
    grad.__wrapped__ = orig_grad  # type: ignore[attr-defined]
    rec.patch(torch.autograd, "grad", grad)


def install_forward(rec: Recorder, torch: Any) -> None:
    """Global module hooks for the first step, to find the outermost modules (the model,
    the loss); then :meth:`Recorder.narrow_forward_hooks` keeps hooks on those alone,
    because global hooks put every module call of a large model on PyTorch's slow path."""
    import torch.nn.modules.module as mod

    compiling = compiling_fn(torch)
    ddp_cls: Any = None
    with contextlib.suppress(Exception):
        from torch.nn.parallel import DistributedDataParallel as ddp_cls

    def pre(module: Any, args: Any) -> None:
        if compiling() or not rec.active:
            return
        if rec.fwd_depth == 0:
            rec.fwd_t0 = _now()
            try:
                rec.on_forward_start(module, args)
            except Exception as err:
                rec.fail("forward", err)
            if ddp_cls is not None and not rec.ddp_seen and isinstance(module, ddp_cls):
                rec.ddp_seen = True
            rec.enter("forward")
        rec.fwd_depth += 1

    def post(module: Any, args: Any, output: Any) -> None:
        if compiling() or not rec.active:
            return
        if rec.fwd_depth > 0:
            rec.fwd_depth -= 1
            if rec.fwd_depth == 0:
                rec.leave("forward", rec.fwd_t0, _now())

    rec.fwd_hooks = (pre, post)
    h1 = mod.register_module_forward_pre_hook(pre)
    try:
        h2 = mod.register_module_forward_hook(post, always_call=True)
    except TypeError:  # torch < 2.1
        h2 = mod.register_module_forward_hook(post)
    rec.global_fwd_handles = [h1, h2]
    rec.undo.append(h1.remove)
    rec.undo.append(h2.remove)


# The dicts of a module that hold forward hooks, keyed by the hook's handle id.
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")


def hide_hooks_from_pickles(rec: Recorder, module_cls: Any, ours: dict[int, set[int]]) -> None:
    """Leave the recorder's forward hooks out of a module's pickled state: a script that
    saves its whole model (``torch.save(model)``, ``copy.deepcopy``) inside the window
    must not fail on them (a local function does not pickle), nor carry them into the
    file. ``ours`` maps ``id(module)`` to the handle ids of the hooks put on it."""
    original = module_cls.__dict__.get("__getstate__")
    if original is None:
        return

    def __getstate__(self: Any) -> Any:
        state = original(self)
        ids = ours.get(id(self))
        if not ids or not isinstance(state, dict):
            return state
        state = dict(state)
        for key in _HOOK_DICTS:
            held = state.get(key)
            if held and any(k in ids for k in held):
                state[key] = type(held)((k, v) for k, v in held.items() if k not in ids)
        return state

    rec.patch(module_cls, "__getstate__", __getstate__)


def install_collectives(rec: Recorder, torch: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    compiling = compiling_fn(torch)
    for name in ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                 "reduce_scatter_tensor", "broadcast", "barrier", "reduce", "all_to_all",
                 "all_to_all_single", "gather", "scatter"):
        orig = getattr(dist, name, None)
        if orig is None:
            continue

        def wrapped(*args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
            if compiling() or not rec.active or kwargs.get("async_op"):
                return __orig(*args, **kwargs)
            t0 = _now()
            rec.enter("collective")
            try:
                return __orig(*args, **kwargs)
            finally:
                rec.leave("collective", t0, _now())

        wrapped.__doc__ = orig.__doc__
        wrapped.__name__ = name
        wrapped.__wrapped__ = orig  # type: ignore[attr-defined]
        rec.patch(dist, name, wrapped)


def install_h2d(rec: Recorder, torch: Any) -> None:
    compiling = compiling_fn(torch)
    for name in ("to", "cuda"):
        orig = getattr(torch.Tensor, name)

        def wrapped(t: Any, *args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
            if compiling() or not rec.active or t.is_cuda:  # traced by torch.compile: stay invisible
                return __orig(t, *args, **kwargs)
            t0 = _now()
            rec.enter("h2d")
            try:
                out = __orig(t, *args, **kwargs)
            finally:
                rec.depth["h2d"] -= 1
            if rec.active and out is not t and out.is_cuda:
                rec.add("h2d", t0, _now())
                rec.h2d_bytes += t.numel() * t.element_size()
            return out

        wrapped.__doc__ = orig.__doc__
        wrapped.__name__ = name
        rec.patch(torch.Tensor, name, wrapped)
