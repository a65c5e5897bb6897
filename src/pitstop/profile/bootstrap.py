"""Starts the recorder inside a process launched by ``pitstop profile``.

Why a ``sitecustomize`` on PYTHONPATH rather than a wrapper like ``python -m
pitstop.profile.run_script train.py``: the environment reaches every Python process
the command starts, so ``torchrun``'s ranks (and ``python -m pkg``, ``accelerate
launch`` or a shell script that calls python) are instrumented without pitstop parsing
their command lines; and the script is run by the interpreter itself, so
``sys.argv``, ``__main__``, ``__spec__``, tracebacks, pickling of classes defined in
the script (spawned DataLoader workers) and the exit status are exactly what they
would be without pitstop.

Nothing heavy happens at start-up: torch is *not* imported (the script may set
``CUDA_VISIBLE_DEVICES`` or thread counts first). A meta-path hook waits for the
script's own ``import torch`` and installs the recorder's hooks right after it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import Any

from pitstop.profile.recorder import Recorder

__all__ = ["activate"]

_recorder: Recorder | None = None
_pid = 0


class _AfterExec(importlib.abc.Loader):
    """Delegates to the real loader, then runs a callback on the executed module."""

    def __init__(self, inner: Any, callback: Callable[[ModuleType], None]) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._inner.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        module.__spec__.loader = self._inner  # type: ignore[union-attr]
        module.__loader__ = self._inner
        self._callback(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Calls ``callback(torch)`` once, right after ``import torch`` completes."""

    def __init__(self, callback: Callable[[ModuleType], None]) -> None:
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" or self._busy:
            return None
        self._busy = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _AfterExec(spec.loader, self._done)
        return spec

    def _done(self, module: ModuleType) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.callback(module)


def _is_helper_process() -> bool:
    """multiprocessing's spawn/forkserver children (DataLoader workers): not profiled."""
    return "--multiprocessing-fork" in sys.argv or any(
        a.startswith("from multiprocessing.") for a in sys.argv)


def _exit_info() -> dict[str, Any]:
    exc = getattr(sys, "last_value", None)
    if exc is None:
        exc = getattr(sys, "last_exc", None)
    if isinstance(exc, BaseException):
        return {"kind": "exception", "type": type(exc).__name__, "message": str(exc)[:500]}
    return {"kind": "exit"}


def _at_exit() -> None:
    rec = _recorder
    if rec is None or os.getpid() != _pid or rec.finished:
        return
    if not rec.has_anything():
        return  # e.g. torchrun's launcher: imported torch, trained nothing
    rec.finish("partial", _exit_info())


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    rec = _recorder
    if rec is not None and os.getpid() == _pid and not rec.finished and rec.has_anything():
        with contextlib.suppress(Exception):
            rec.finish("partial", {"kind": "signal", "signal": signal.Signals(signum).name})
    # Die the way the process would have without pitstop.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install(torch: ModuleType) -> None:
    if _recorder is None:
        return
    try:
        _recorder.install(torch)
    except Exception as err:
        sys.stderr.write(f"pitstop profile: could not instrument torch: {err}\n")


def activate() -> None:
    """Set up recording in this process if ``pitstop profile`` launched it."""
    global _recorder, _pid
    out_dir = os.environ.get("PITSTOP_PROFILE_DIR")
    if not out_dir or _recorder is not None or _is_helper_process():
        return
    steps = int(os.environ.get("PITSTOP_PROFILE_STEPS", "50"))
    warmup = int(os.environ.get("PITSTOP_PROFILE_WARMUP", "5"))
    _pid = os.getpid()
    _recorder = Recorder(steps=steps, warmup=warmup,
                         capture_path=os.path.join(out_dir, f"capture-{_pid}.json"),
                         probe=os.environ.get("PITSTOP_PROFILE_PROBE", "1") != "0")
    atexit.register(_at_exit)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread / no signals here
        pass
    if "torch" in sys.modules:
        _install(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook(_install))
