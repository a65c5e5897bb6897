"""The two kinds of change pitstop makes to a machine, and how each is carried out.

A :class:`FileWrite` writes bytes into a sysfs/procfs file *in place* (one ``write()``
call, as ``echo value > file`` does). These are the only files pitstop writes without
:mod:`pitstop.fileio`'s temp-file-and-rename: a kernel attribute cannot be replaced by
a rename, and a write to it is atomic on the kernel's side (it accepts or rejects the
whole value). A :class:`RunCommand` runs an external tool (``nvidia-smi``, ``mount``)
where that tool is the only interface.

Both serialise to JSON for the state file, so that ``revert`` in a later process
performs exactly the saved undo actions.
"""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any

from pitstop.signals import run_child
from pitstop.sysroot import Sysroot
from pitstop.system.machine import INSTALL_HINTS, find_tool

__all__ = ["Action", "ActionError", "FileWrite", "RunCommand", "action_from_dict", "perform"]


class ActionError(Exception):
    """A write or command failed; the message says which and why, in one line."""


@dataclass(frozen=True)
class FileWrite:
    """Write ``data`` into the machine file ``path`` (a ``/sys`` or ``/proc`` path)."""

    path: str
    data: bytes

    def describe(self) -> str:
        text = self.data.decode("utf-8", "replace").rstrip("\n")
        return f"echo {shlex.quote(text)} > {self.path}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "write", "path": self.path,
                "text": self.data.decode("utf-8", "replace"),
                "data_b64": base64.b64encode(self.data).decode("ascii")}


@dataclass(frozen=True)
class RunCommand:
    """Run ``argv`` (``argv[0]`` is the tool's name, looked up on the machine)."""

    argv: tuple[str, ...]

    @property
    def tool(self) -> str:
        return self.argv[0]

    def describe(self) -> str:
        return shlex.join(self.argv)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "run", "argv": list(self.argv)}


Action = FileWrite | RunCommand


def action_from_dict(d: dict[str, Any]) -> Action:
    """Inverse of ``to_dict``; raises ``ValueError`` for a malformed entry."""
    kind = d.get("kind")
    if kind == "write" and isinstance(d.get("path"), str) and isinstance(d.get("data_b64"), str):
        return FileWrite(d["path"], base64.b64decode(d["data_b64"], validate=True))
    if kind == "run" and isinstance(d.get("argv"), list) and d["argv"] and all(
            isinstance(a, str) for a in d["argv"]):
        return RunCommand(tuple(d["argv"]))
    raise ValueError(f"malformed action {d!r}")


def _write_in_place(target: str | os.PathLike[str], data: bytes) -> None:
    # O_TRUNC without O_CREAT: a sysfs attribute that does not exist is an error, not a
    # new file. One os.write() so the kernel sees the whole value at once.
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(f"short write: {written} of {len(data)} bytes")


def perform(sr: Sysroot, action: Action, timeout: float = 60.0) -> str:
    """Carry out ``action`` on the machine under ``sr``; returns the tool's output.

    Raises :class:`ActionError` (one line) on any failure.
    """
    if isinstance(action, FileWrite):
        try:
            _write_in_place(sr.path(action.path), action.data)
        except OSError as err:
            reason = err.strerror or str(err)
            raise ActionError(f"{action.describe()}: {reason}") from None
        return ""
    exe = find_tool(sr, action.tool)
    if exe is None:
        hint = INSTALL_HINTS.get(action.tool, "")
        raise ActionError(f"{action.describe()}: {action.tool} not found"
                          + (f" (install: {hint})" if hint else ""))
    try:
        proc = run_child([exe, *action.argv[1:]], timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ActionError(f"{action.describe()}: {err}") from None
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        last = output.splitlines()[-1] if output else "no output"
        raise ActionError(f"{action.describe()}: exit {proc.returncode}: {last}")
    return output
