"""Which Python frames are the user's code, and how to name them.

A frame is *library* code when its file lies in the interpreter's standard library,
in an installed package (site-packages / dist-packages, where torch and numpy live) or
in pitstop itself; every other file is the user's (the script, its own modules, a
repository on ``PYTHONPATH``). The verdict names user functions (``get_batch
(train.py:40)``), and the library function a user frame called tells what it was doing
(``torch.save``, ``logging``).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import site
import sysconfig
from types import CodeType, FrameType
from typing import Any

__all__ = ["FrameClassifier", "frame_dict"]


def _library_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    with contextlib.suppress(Exception):
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    with contextlib.suppress(Exception):
        roots.add(os.path.realpath(site.getusersitepackages()))
    roots.add(os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots if r))


_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def frame_dict(code: CodeType, line: int | None) -> dict[str, Any]:
    """A frame as JSON: file, current line, function name and the line it starts on
    (``gen``: True for a generator function)."""
    out: dict[str, Any] = {"file": code.co_filename, "line": int(line or code.co_firstlineno),
                           "func": code.co_name, "first": code.co_firstlineno}
    if code.co_flags & _GENERATOR_FLAGS:
        out["gen"] = True
    return out


class FrameClassifier:
    """Memoised user-or-library test per code object's file."""

    def __init__(self) -> None:
        self._roots = _library_roots()
        self._user: dict[str, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        known = self._user.get(filename)
        if known is not None:
            return known
        if filename.startswith("<"):
            user = filename in ("<stdin>",)
        elif "site-packages" in filename or "dist-packages" in filename:
            user = False
        else:
            real = os.path.realpath(filename)
            user = not any(real.startswith(r) for r in self._roots)
        self._user[filename] = user
        return user

    def user_frame(self, frame: FrameType | None) -> dict[str, Any] | None:
        """The innermost frame at or above ``frame`` that is user code, as a dict."""
        depth = 0
        while frame is not None and depth < 200:
            code = frame.f_code
            if self.is_user_file(code.co_filename):
                return frame_dict(code, frame.f_lineno)
            frame = frame.f_back
            depth += 1
        return None

    def chain(self, frame: FrameType | None, *, max_user: int = 8
              ) -> tuple[tuple[tuple[CodeType, int], ...], tuple[CodeType, int] | None]:
        """User frames (innermost first, at most ``max_user``) as (code, line) pairs, and
        the library frame the innermost user frame called (None when user code runs)."""
        user: list[tuple[CodeType, int]] = []
        lib: tuple[CodeType, int] | None = None
        depth = 0
        while frame is not None and depth < 400 and len(user) < max_user:
            code = frame.f_code
            if self.is_user_file(code.co_filename):
                user.append((code, frame.f_lineno or code.co_firstlineno))
            elif not user:
                lib = (code, frame.f_lineno or code.co_firstlineno)  # outermost library frame so far
            frame = frame.f_back
            depth += 1
        return tuple(user), lib
