"""``Requires-Dist`` lines of a wheel's METADATA: names, version specifiers, markers.

torch's wheel metadata pins the exact CUDA library wheels it was built against, e.g.
(the two spellings real torch wheels use)::

    nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"
    nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"

This module parses such lines, evaluates their environment markers (PEP 508) for the
interpreter being inspected, and tells whether an installed version satisfies the
specifier, without depending on ``packaging`` (the doctor must run in any environment).
Markers are evaluated with three values: ``True``, ``False``, or ``None`` when the
marker names something the environment does not know (then nobody can say whether the
requirement applies, and the doctor does not call its absence a fault).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Requirement", "evaluate_marker", "normalize", "parse_requirement", "satisfies"]

# Marker variables whose values compare as versions (PEP 508, "Environment Markers").
VERSION_VARS = {"python_version", "python_full_version", "implementation_version",
                "platform_release"}


def normalize(name: str) -> str:
    """A distribution name as PEP 503 normalises it (``Nvidia_CUDNN.cu12`` -> ``nvidia-cudnn-cu12``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """One ``Requires-Dist`` line."""

    name: str  # normalised
    specifier: str  # "==9.1.0.70", ">=4.10.0", "" (any version)
    marker: str  # "" when the requirement always applies
    raw: str

    @property
    def exact(self) -> str | None:
        """The pinned version of an ``==X`` requirement, else ``None``."""
        m = re.fullmatch(r"==\s*([^,*\s]+)", self.specifier)
        return m.group(1) if m else None


_REQ = re.compile(r"""\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*
                      (?:\[[^\]]*\])?\s*            # extras of the requirement itself
                      (?:\((?P<paren>[^)]*)\)|(?P<bare>[<>=!~][^;]*))?\s*
                      (?:;\s*(?P<marker>.*))?$""", re.VERBOSE)


def parse_requirement(line: str) -> Requirement | None:
    """``Requirement`` of a ``Requires-Dist`` value; ``None`` for one it cannot read
    (a URL requirement, say)."""
    m = _REQ.match(line.strip())
    if not m:
        return None
    spec = (m.group("paren") or m.group("bare") or "").strip()
    spec = re.sub(r"\s+", "", spec)
    return Requirement(normalize(m.group("name")), spec, (m.group("marker") or "").strip(),
                       line.strip())


# --- version comparison -------------------------------------------------------------

def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version (``2.5.1+cu124`` -> ``(2, 5, 1)``; epochs and
    pre/post tags are dropped, which is all wheel pins need)."""
    version = version.split("+", 1)[0].split("!", 1)[-1]
    parts = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):  # "0rc1": the release stops here
            break
    return tuple(parts)


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def _one_clause(version: str, op: str, want: str) -> bool:
    if op == "===":
        return version == want
    if want.endswith(".*") and op in ("==", "!="):
        prefix = _release(want[:-2])
        match = _release(version)[:len(prefix)] == prefix
        return match if op == "==" else not match
    if op == "==":
        # A local label on the pin must match exactly; without one it is ignored.
        if "+" in want:
            return version == want
        return _cmp(_release(version), _release(want)) == 0
    c = _cmp(_release(version), _release(want))
    if op == "!=":
        return c != 0
    if op == "<":
        return c < 0
    if op == "<=":
        return c <= 0
    if op == ">":
        return c > 0
    if op == ">=":
        return c >= 0
    if op == "~=":
        rel = _release(want)
        return c >= 0 and _release(version)[:len(rel) - 1] == rel[:-1]
    raise ValueError(f"unknown version operator {op!r}")


def satisfies(version: str | None, specifier: str) -> bool | None:
    """Does ``version`` satisfy ``specifier`` (``"==1.2,!=1.3"``)? ``None`` for an
    unknown version or an unreadable specifier."""
    if not specifier:
        return True
    if not version:
        return None
    for clause in specifier.split(","):
        m = re.fullmatch(r"(===|==|!=|<=|>=|~=|<|>)\s*(\S+)", clause.strip())
        if not m:
            return None
        if not _one_clause(version, m.group(1), m.group(2)):
            return False
    return True


# --- markers ------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:(?P<str>'[^']*'|"[^"]*")|(?P<op>===|==|!=|<=|>=|~=|<|>|\(|\))
                        |(?P<word>[A-Za-z_][A-Za-z0-9_.]*))""", re.VERBOSE)


def _tokens(marker: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(marker):
        if marker[pos:].strip() == "":
            break
        m = _TOKEN.match(marker, pos)
        if not m:
            raise ValueError(f"cannot read marker near {marker[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
    return out


class _Parser:
    """Recursive descent over ``or`` / ``and`` / parentheses / comparisons."""

    def __init__(self, tokens: list[tuple[str, str]], env: Mapping[str, str | None]) -> None:
        self.t = tokens
        self.i = 0
        self.env = env

    def peek(self) -> tuple[str, str] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ValueError("marker ends too early")
        self.i += 1
        return tok

    def expr(self) -> bool | None:
        value = self.conj()
        while self.peek() == ("word", "or"):
            self.take()
            right = self.conj()
            value = True if (value is True or right is True) else (
                None if (value is None or right is None) else False)
        return value

    def conj(self) -> bool | None:
        value = self.atom()
        while self.peek() == ("word", "and"):
            self.take()
            right = self.atom()
            value = False if (value is False or right is False) else (
                None if (value is None or right is None) else True)
        return value

    def atom(self) -> bool | None:
        if self.peek() == ("op", "("):
            self.take()
            value = self.expr()
            if self.take() != ("op", ")"):
                raise ValueError("unbalanced parenthesis in marker")
            return value
        left = self.operand()
        kind, op = self.take()
        if (kind, op) == ("word", "not"):
            if self.take() != ("word", "in"):
                raise ValueError("'not' without 'in' in marker")
            op = "not in"
        elif kind != "op" and op != "in":
            raise ValueError(f"expected a comparison, got {op!r}")
        right = self.operand()
        return self.compare(left, op, right)

    def operand(self) -> tuple[str | None, str | None]:
        """``(variable name or None, value)``; value ``None`` when the variable is unknown."""
        kind, text = self.take()
        if kind == "str":
            return None, text[1:-1]
        if kind == "word":
            return text, self.env.get(text)
        raise ValueError(f"unexpected {text!r} in marker")

    @staticmethod
    def compare(left: tuple[str | None, str | None], op: str,
                right: tuple[str | None, str | None]) -> bool | None:
        (lvar, lval), (rvar, rval) = left, right
        if lval is None or rval is None:
            return None
        if op == "in":
            return lval in rval
        if op == "not in":
            return lval not in rval
        if (lvar in VERSION_VARS or rvar in VERSION_VARS) and re.match(r"\d", lval) and \
                re.match(r"\d", rval):
            return _one_clause(lval, op, rval)
        if op == "==":
            return lval == rval
        if op == "!=":
            return lval != rval
        return None  # ordering of plain strings: undefined by PEP 508


def evaluate_marker(marker: str, env: Mapping[str, str | None]) -> bool | None:
    """The marker's value in ``env`` (``None``: it depends on something ``env`` lacks,
    or it cannot be read)."""
    if not marker.strip():
        return True
    try:
        parser = _Parser(_tokens(marker), env)
        value = parser.expr()
        if parser.peek() is not None:
            return None
        return value
    except ValueError:
        return None
