"""Standard streams as they really are: closed at start, a pipe whose reader has left
(``pitstop lint | head``), a disk that is full (``> /dev/full``).

:func:`guard_standard_streams` runs first in the CLI: a descriptor 0, 1 or 2 that was
closed when pitstop started is reserved with ``/dev/null``, so that no file pitstop
opens later becomes "standard output" by accident, and a closed standard output is
replaced by :class:`ClosedStream`, whose writes fail like a write to a closed descriptor.
An open standard output is re-layered so that a failed write raises :class:`StdoutError`,
which names it: an ``ENOSPC`` from ``> /dev/full`` and one from a report file look alike
otherwise. :func:`output_failure` tells the error boundary whether an ``OSError`` means
"the output cannot be written", and what could not be written.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any

__all__ = ["OUTPUT_ERRNOS", "ClosedStream", "StdoutError", "flush_stdout",
           "guard_standard_streams", "output_failure", "silence_stdout"]

# errno values that mean "this output cannot be written", not "pitstop has a bug".
OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO,
                           errno.EBADF, errno.EROFS})


class StdoutError(OSError):
    """A write to standard output failed (broken pipe, full disk, closed)."""


class ClosedStream(io.TextIOBase):
    """Stands in for ``sys.stdout`` when descriptor 1 was closed at start (``>&-``)."""

    name = "<standard output (closed)>"
    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise StdoutError(errno.EBADF, "it is closed")

    def isatty(self) -> bool:
        return False


def guard_standard_streams() -> None:
    """Reserve closed descriptors 0-2 with ``/dev/null``; see the module docstring."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 0 in closed:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as pitstop
    if 1 in closed:
        sys.stdout = ClosedStream()
    elif sys.stdout is not None and sys.stdout is sys.__stdout__:
        sys.stdout = _tagged(sys.stdout)
    if 2 in closed:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - as above


class _StdoutRaw(io.FileIO):
    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except OSError as err:
            raise StdoutError(err.errno, err.strerror) from None


def _tagged(old: Any) -> Any:
    """The same standard output (encoding, buffering, line buffering), whose failed
    writes raise :class:`StdoutError`."""
    try:
        if old.fileno() != 1:
            return old
        old.flush()
        raw = _StdoutRaw(1, "w", closefd=False)
        binary = io.BufferedWriter(raw) if isinstance(old.buffer, io.BufferedWriter) else raw
        return io.TextIOWrapper(binary, encoding=old.encoding, errors=old.errors, newline="\n",
                                line_buffering=old.line_buffering,
                                write_through=old.write_through)
    except (AttributeError, OSError, ValueError):  # not a plain file stream: keep it
        return old


def flush_stdout() -> None:
    """Flush standard output now, so that a failure is raised here and not at exit."""
    if sys.stdout is not None:
        sys.stdout.flush()


def output_failure(err: OSError) -> str | None:
    """What could not be written when ``err`` means an output failed, else ``None``.

    "standard output" for a :class:`StdoutError` (or a broken pipe, which is nearly
    always standard output's reader leaving), the file name when the error names one,
    else a plain "the output".
    """
    if err.errno not in OUTPUT_ERRNOS:
        return None
    if isinstance(err, (StdoutError, BrokenPipeError)):
        return "standard output"
    if err.filename:
        return os.fsdecode(err.filename)
    return "the output"


def silence_stdout() -> None:
    """Point descriptor 1 at ``/dev/null``, so that what is still buffered for a broken
    standard output is dropped at exit instead of failing again there."""
    try:
        if sys.stdout is None or sys.stdout.fileno() != 1:
            return  # replaced (a test's StringIO): nothing is buffered for descriptor 1
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        pass
