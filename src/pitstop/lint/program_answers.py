"""The questions the program model is asked, and what its answers are made of.

A module is first analysed against a program that holds only itself; every question its
analysis asks (a method decorated with :func:`query`) is recorded, and replayed against
the whole program by :func:`answers_differ`: only a module for which some answer differs
is analysed again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Sym:
    """A resolved name: a function, a class, a module, or a module-level value."""

    kind: str  # "func" | "class" | "module" | "value"
    module: str
    name: str = ""
    desc: str | None = None  # for values: the descriptor, in the module's own namespace


@dataclass(frozen=True)
class Resolved:
    """What a descriptor stands for, once resolved across the program."""

    kind: str  # loader | batches | model | device | tensor | obj | func | class | str | module
    module: str = ""
    name: str = ""  # loader id, class/function qualname, device kind, tensor kind, string
    line: int = 0  # where it was decided (a device's origin)
    placed: bool = False  # a loader whose batches arrive on the accelerator (accelerate)


@dataclass(frozen=True)
class Origin:
    """Where a program gets an accelerator from. ``certain``: the code puts work there
    unconditionally (`.cuda()`, `device="cuda"`); otherwise it may (`torch.accelerator`
    when one is available, a `--device` option, a device passed in)."""

    path: str
    line: int
    what: str
    certain: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.what})"


def query(fn: F) -> F:
    """Memoise a question; while the program records, remember the questions the analysis
    asked (not the ones the program asks itself to answer them)."""
    @wraps(fn)
    def wrapper(self: Any, *args: Any) -> Any:
        key = (fn.__name__, *args)
        if self.recording is not None and self._depth == 0:
            self.recording.add(key)
        memo = self._memo
        if key in memo:
            return memo[key]
        memo[key] = None  # recursion guard: a cycle answers "unknown"
        self._depth += 1
        try:
            result = fn(self, *args)
        finally:
            self._depth -= 1
        memo[key] = result
        return result
    return wrapper  # type: ignore[return-value]


def recorded_answers(program: Any) -> dict[tuple[Any, ...], Any]:
    """The questions a (recording) program was asked, with its final answers."""
    if program.recording is None:
        return {}
    questions = list(program.recording)
    return {q: getattr(program, q[0])(*q[1:]) for q in questions}


def answers_differ(full: Any, answers: dict[tuple[Any, ...], Any]) -> bool:
    """Would the whole program answer any of a module's questions differently (in a way
    the analysis acts on)?"""
    for q, local in answers.items():
        name, *args = q
        if _acted_on(name, getattr(full, name)(*args)) != _acted_on(name, local):
            return True
    return False


def _acted_on(question: str, answer: Any) -> Any:
    """The part of an answer the analysis acts on: a name resolved to a function or a
    class changes nothing by itself (what it returns or whether it steps are questions of
    their own), except for a call made once per batch, which is followed into it."""
    if question == "hot_callee":
        return answer
    if isinstance(answer, Sym):
        return None
    if isinstance(answer, Resolved) and answer.kind in {"func", "class", "str"}:
        return None
    return answer
