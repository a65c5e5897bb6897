"""Signals that end a command, and the moments when one must wait.

Python turns SIGINT (Ctrl-C) into ``KeyboardInterrupt``; :func:`terminate_as_exception`
does the same for SIGTERM and SIGHUP with :class:`~pitstop.errors.Terminated`. Either
way the exception unwinds the main thread, so every ``finally`` block and context
manager runs: temp files are removed, ``subprocess.run`` kills its child, DataLoader
workers are shut down. The CLI's error boundary then exits with 130, 143 or 129.

An exception raised by a signal is lost when it lands inside a ``__del__`` method, a
garbage-collector callback or an at-fork hook (Python prints "Exception ignored in ..."
and goes on). Two defences: inside :func:`terminate_as_exception`, such a swallowed
``KeyboardInterrupt`` or :class:`Terminated` is noticed by ``sys.unraisablehook`` and
the signal is sent again, so that it raises at the next ordinary line instead; and
:func:`deferred` holds the signals back while code that runs finalizers (dropping the
last reference to a DataLoader iterator, whose ``__del__`` joins its workers) runs,
and delivers them right after, where they raise normally. It also keeps a write and
the truncate after it together (:mod:`pitstop.fileio`).
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from pitstop.errors import Terminated

__all__ = ["ENDING_SIGNALS", "deferred", "run_child", "terminate_as_exception"]

# The signals that end a command and after which it cleans up.
ENDING_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    Only in this process: a child forked inside the block (a DataLoader worker, a lint
    worker) that receives one dies of it, as by default, instead of unwinding a copy
    of the parent's stack (:func:`_defaults_in_forked_child`). A signal the parent
    ignores (``nohup``) stays ignored. The previous handlers are restored on the way out.
    """
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a child forked past the at-fork hook (by C code)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    previous: dict[int, Any] = {}
    hook_before = sys.unraisablehook
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue
            previous[sig] = signal.signal(sig, handler)
        sys.unraisablehook = _redeliver_swallowed(hook_before, owner)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        sys.unraisablehook = hook_before


def _defaults_in_forked_child() -> None:
    """In a child just forked while this module's handlers were in place (a DataLoader
    worker of a command): the default action back for the ending signals, and quiet
    about a parent that hangs up on it (:func:`_quiet_about_hang_ups`).

    A Python handler runs only when the main thread runs Python code; a forked worker
    stuck in C (a lock another thread of the parent held at the fork, as OpenMP's and
    malloc's can be) never gets there, so SIGTERM would not end it, and
    multiprocessing's exit joins daemon workers after terminating them, without a
    timeout: the command hung after saying it was terminated. With the default action
    the kernel ends the child. SIGINT gets Python's own handler back (DataLoader
    workers expect a KeyboardInterrupt they swallow; the parent reports Ctrl-C).
    """
    ours = False
    for sig in ENDING_SIGNALS:
        try:
            if getattr(signal.getsignal(sig), "__module__", None) != __name__:
                continue
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT
                          else signal.SIG_DFL)
            ours = True
        except (ValueError, OSError):  # not the main thread: nothing to restore here
            return
    if ours:
        sys.excepthook = _quiet_about_hang_ups(sys.excepthook)


def _quiet_about_hang_ups(previous_hook: Any) -> Any:
    """An excepthook that says nothing of an ``EOFError`` or ``ConnectionError`` raised
    inside ``multiprocessing.connection``, and hands everything else on.

    A DataLoader worker hands each batch's storage over through multiprocessing's
    resource sharer, a thread that reports any failure through ``sys.excepthook``. A
    parent interrupted by Ctrl-C or SIGTERM halfway through that handshake hangs up,
    and the worker printed a traceback under the command's one-line message (1 run in
    67 of the bench SIGTERM test). The interruption is the parent's to report.
    """
    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, (EOFError, ConnectionError)) and tb is not None:
            while tb.tb_next is not None:
                tb = tb.tb_next
            where = tb.tb_frame.f_code.co_filename
            if where.endswith(os.path.join("multiprocessing", "connection.py")):
                return
        previous_hook(kind, value, tb)

    return hook


os.register_at_fork(after_in_child=_defaults_in_forked_child)


# A signal is sent again at most this often: enough for a few unlucky landings in a
# finalizer, never an endless loop while the interpreter itself is shutting down.
MAX_REDELIVERIES = 16
REDELIVERY_DELAY_S = 0.02


def _send_later(pid: int, signum: int) -> None:
    time.sleep(REDELIVERY_DELAY_S)
    os.kill(pid, signum)


def _half_built_loader_iterator(unraisable: Any) -> bool:
    """A DataLoader iterator whose ``__init__`` an interruption cut short, finalized:
    torch's ``__del__`` then reads attributes never set (``_shutdown``) and Python
    prints a traceback for it under the command's one-line message. Nothing is lost by
    keeping quiet: the interruption itself is reported, and the workers the iterator
    had started are its children, which end with it."""
    qualname = getattr(unraisable.object, "__qualname__", "") or ""
    return (isinstance(unraisable.exc_value, AttributeError)
            and qualname.endswith("DataLoaderIter.__del__"))


def _redeliver_swallowed(previous_hook: Any, owner: int) -> Any:
    """An unraisable hook that re-sends the signal behind a swallowed interruption."""
    sent = [0]

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if _half_built_loader_iterator(unraisable):
            return
        if isinstance(exc, Terminated):
            signum = exc.signum
        elif isinstance(exc, KeyboardInterrupt):
            signum = signal.SIGINT
        else:
            previous_hook(unraisable)
            return
        if os.getpid() != owner or sent[0] >= MAX_REDELIVERIES:
            previous_hook(unraisable)
            return
        # Sent from another thread a moment later: sent from here, the handler would
        # run at once, inside this hook, where an exception is not even reported to a
        # hook again. It runs at the main thread's next check point instead: in
        # ordinary code, or in a further finalizer, which brings it back here. A bare
        # thread (not threading.Thread, whose start() waits on a lock where the handler
        # could run), and if the resend still lands in this hook (the main thread
        # descheduled past the delay), it is caught here and sent once more.
        for _ in range(MAX_REDELIVERIES):
            sent[0] += 1
            try:
                _thread.start_new_thread(_send_later, (owner, signum))
            except (Terminated, KeyboardInterrupt):
                continue
            break

    return hook


@contextlib.contextmanager
def deferred(collect: bool = False) -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while the block runs; one that arrived
    meanwhile takes effect when the block ends, and raises there as usual.

    The Python-level handlers are swapped for one that only notes the signal; a signal
    mask would not do, since the kernel hands a process-directed signal to any thread
    that does not block it (torch's and OpenMP's threads), and Python then runs the
    handler in the main thread all the same. ``collect``: also run the garbage
    collector inside the block, so that finalizers of objects in reference cycles run
    here, not later at a random point where a signal could be lost in them. Outside the
    main thread (where Python handles no signals) the block simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        if collect:
            gc.collect()
        yield
        return
    arrived: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    previous: dict[int, Any] = {}
    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, note)
    try:
        if collect:
            gc.collect()
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        if arrived:
            _deliver(arrived[0], previous[arrived[0]])


def _deliver(signum: int, handler: Any) -> None:
    """Act on ``signum`` as ``handler`` (what was installed before) would have."""
    if callable(handler):
        handler(signum, None)  # default_int_handler raises KeyboardInterrupt, ours Terminated
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)


def run_child(argv: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, stdin=DEVNULL,
    timeout=timeout)``, except that the child never outlives the command.

    ``subprocess.run`` kills its child when an exception interrupts the wait, but a
    SIGTERM or Ctrl-C landing between the fork and the moment ``Popen`` returns (while
    it waits for the exec) leaves a child no one will end: 10 of 20 SIGTERMs sent as
    soon as ``doctor --torch``'s child appeared left it importing torch. Here the
    ending signals are held back until the child is known, then delivered where the
    child is killed and reaped on the way out. ``OSError`` when it cannot start,
    ``subprocess.TimeoutExpired`` (the child killed) when it runs too long.
    """
    proc: subprocess.Popen[str] | None = None
    try:
        with deferred():
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        if proc is not None:
            proc.kill()
            proc.communicate()  # reaps it and closes the pipes
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)

