"""Ctrl-C during a tune, never lost: SIGINT becomes a ``KeyboardInterrupt`` at once, or,
when it lands inside ``os.fork``'s callbacks (starting DataLoader workers), where
Python prints and *ignores* any exception, at the next :func:`check` instead.

The trials call :func:`check` after every batch and step, so a deferred interrupt
is raised within one batch. Without this, a Ctrl-C that arrives while workers are
being forked would be swallowed and the tune would run on to the end of its budget.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pitstop.bench.ladder import _FORK_HOOK_FILES

F = TypeVar("F", bound=Callable[..., Any])

_pending = False
_defer = False


def check() -> None:
    """Raise the ``KeyboardInterrupt`` a deferred Ctrl-C left behind, if any."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


def _handler(signum: int, frame: Any) -> None:
    global _pending
    if _defer or (frame is not None and frame.f_code.co_filename.endswith(_FORK_HOOK_FILES)):
        _pending = True
        return
    _pending = False
    raise KeyboardInterrupt


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a Ctrl-C back during the block (shutting workers down must not be cut
    short); it is raised by the next :func:`check`."""
    global _defer
    before = _defer
    _defer = True
    try:
        yield
    finally:
        _defer = before


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Install the handler for the block (main thread only), then restore the old one."""
    global _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:  # started in the background with SIGINT ignored
        yield
        return
    signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _pending = False


def guard(fn: F) -> F:
    """Run ``fn`` under :func:`guarded` (the tuners' entry points)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with guarded():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
