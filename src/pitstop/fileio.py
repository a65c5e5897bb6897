"""Writing files so that nothing is ever half-written: a temp file beside the target,
flushed and fsynced, then renamed over it (atomic on POSIX filesystems)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, keeping its permission bits if it exists."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """Text flavour of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON (with a trailing newline) atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def check_output_path(path: str | os.PathLike[str], *, what: str, option: str | None = None) -> Path:
    """Check, before any work starts, that ``path`` can be written as an output file.

    The parent folder must already exist and be writable; nothing is created, so a typo
    in a folder name fails at once instead of producing a folder (or failing after a
    long run). ``what`` names the output in the message ("the JSON report"), ``option``
    the command-line option that gave it. Returns the path, unchanged, as a ``Path``.

    Raises :class:`~pitstop.errors.UsageError` with a one-line message naming the path.
    """
    target = Path(path)
    named = f"{option} {target}" if option else str(target)
    if str(path) == "" or target.name in ("", ".", ".."):
        raise UsageError(f"{named}: {what} needs a file name")
    if target.is_dir():
        raise UsageError(f"{named}: is a folder; give a file path for {what}")
    parent = target.parent
    if not parent.exists():
        raise UsageError(f"{named}: folder {parent} does not exist; create it first or choose another path for {what}")
    if not parent.is_dir():
        raise UsageError(f"{named}: {parent} is not a folder")
    # Try it for real: permission bits say nothing for root, nor on /proc or a
    # read-only mount. The probe is removed at once; an existing file is opened for
    # appending and closed, which leaves its contents and times as they were.
    try:
        if target.exists():
            os.close(os.open(target, os.O_WRONLY | os.O_APPEND))
        else:
            fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UsageError(f"{named}: cannot write there ({reason}); choose another path for {what}") from None
    return target
