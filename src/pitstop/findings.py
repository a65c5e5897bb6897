"""The one currency of pitstop: the :class:`Finding`, and the registry of finding codes.

doctor, lint, profile and system all report :class:`Finding` objects. Every code a
finding can carry is documented once, as a :class:`CodeDoc`, in the registry below;
``pitstop explain CODE`` prints that documentation and ``docs/findings.md`` is
generated from it (``python -m pitstop.docsgen``).

Codes are stable: once released, a code keeps its meaning forever. Each tool owns a
prefix, so that a code says where it came from:

======  =========================  ==========================
prefix  tool                       module holding its docs
======  =========================  ==========================
DR      ``pitstop doctor``         ``pitstop.doctor.codes``
LT      ``pitstop lint``           ``pitstop.lint.codes``
PF      ``pitstop profile``        ``pitstop.profile.codes``
SY      ``pitstop system``         ``pitstop.system.codes``
======  =========================  ==========================
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "PROVIDERS",
    "CodeDoc",
    "Finding",
    "Location",
    "Remedy",
    "RemedyKind",
    "Severity",
    "UnknownCodeError",
    "all_docs",
    "get_doc",
    "register",
]


class Severity(str, Enum):
    """How much a finding matters.

    ``problem`` costs real training speed now; ``warning`` probably does or will;
    ``info`` is worth knowing but costs nothing measurable on its own.
    """

    INFO = "info"
    WARNING = "warning"
    PROBLEM = "problem"

    @property
    def rank(self) -> int:
        """Sort key: higher is worse."""
        return {"info": 0, "warning": 1, "problem": 2}[self.value]


class RemedyKind(str, Enum):
    """What kind of action a :class:`Remedy` asks for."""

    SHELL = "shell"  # a command to run in a terminal (often as root)
    CODE = "code"  # a change to the user's training code
    PITSTOP = "pitstop"  # a pitstop command to run next
    TEXT = "text"  # advice that is none of the above


@dataclass(frozen=True)
class Remedy:
    """How to fix a finding: a command, a code change, or the next pitstop step."""

    kind: RemedyKind
    text: str
    # Why running this is (or is not) safe, when that is not obvious.
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind.value, "text": self.text}
        if self.note:
            out["note"] = self.note
        return out

    @staticmethod
    def shell(text: str, note: str = "") -> Remedy:
        return Remedy(RemedyKind.SHELL, text, note)

    @staticmethod
    def code(text: str, note: str = "") -> Remedy:
        return Remedy(RemedyKind.CODE, text, note)

    @staticmethod
    def pitstop(text: str, note: str = "") -> Remedy:
        return Remedy(RemedyKind.PITSTOP, text, note)

    @staticmethod
    def advice(text: str, note: str = "") -> Remedy:
        return Remedy(RemedyKind.TEXT, text, note)


@dataclass(frozen=True)
class Location:
    """Where in a file a finding points (1-based line, 0-based column like ``ast``)."""

    path: str
    line: int
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None
    # For notebooks: the 1-based cell number the line is counted in.
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "line": self.line, "column": self.column}
        if self.end_line is not None:
            out["end_line"] = self.end_line
        if self.end_column is not None:
            out["end_column"] = self.end_column
        if self.cell is not None:
            out["cell"] = self.cell
        return out


@dataclass(frozen=True)
class Finding:
    """Something that slows training, with the evidence for it and what to do.

    ``evidence`` holds what was measured or seen, as named values that carry their
    units in the name or in the value (``{"link": "Gen3 x4", "max_link": "Gen4 x16"}``,
    ``{"shm_bytes": 67108864}``). It must be JSON-serialisable.
    """

    code: str
    title: str
    severity: Severity
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remedy: Remedy | None = None
    location: Location | None = None

    def __post_init__(self) -> None:
        if not CODE_PATTERN.fullmatch(self.code):
            raise ValueError(f"malformed finding code {self.code!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "title": self.title,
            "severity": self.severity.value,
            "evidence": dict(self.evidence),
            "remedy": self.remedy.to_dict() if self.remedy else None,
        }
        if self.location is not None:
            out["location"] = self.location.to_dict()
        return out


CODE_PATTERN = re.compile(r"(DR|LT|PF|SY)\d{3}")


@dataclass(frozen=True)
class CodeDoc:
    """The documentation of one finding code, ruff-style.

    ``fix_safety`` says whether pitstop can fix it automatically and whether that fix
    can change behaviour (``"safe"``, ``"unsafe"``, ``"manual"`` plus an explanation).
    """

    code: str
    name: str  # kebab-case name of the anti-pattern, e.g. "nouveau-loaded"
    title: str  # one line, as shown in tables
    category: str  # the layer (doctor) or rule category (lint)
    severity: Severity  # the default severity
    what: str  # what it detects
    why: str  # why it costs training speed
    example: str  # what the problem looks like (code, or a tool's output)
    fix: str  # what to do instead / the command
    fix_safety: str
    references: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not CODE_PATTERN.fullmatch(self.code):
            raise ValueError(f"malformed finding code {self.code!r}")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.name):
            raise ValueError(f"{self.code}: name must be kebab-case, got {self.name!r}")
        for attr in ("title", "category", "what", "why", "example", "fix", "fix_safety"):
            if not getattr(self, attr).strip():
                raise ValueError(f"{self.code}: documentation field {attr!r} is empty")

    @property
    def tool(self) -> str:
        return TOOL_BY_PREFIX[self.code[:2]]


TOOL_BY_PREFIX = {"DR": "doctor", "LT": "lint", "PF": "profile", "SY": "system"}

# Modules that register codes when imported. Loaded lazily, so that a command
# pays only for the registry it uses (``pitstop lint`` need not import the doctor).
PROVIDERS: tuple[str, ...] = (
    "pitstop.doctor.codes",
    "pitstop.lint.codes",
    "pitstop.profile.codes",
    "pitstop.system.codes",
)

_REGISTRY: dict[str, CodeDoc] = {}
_loaded = False


class UnknownCodeError(KeyError):
    """Raised by :func:`get_doc` for a code no tool defines."""


def register(*docs: CodeDoc) -> None:
    """Add documentation for codes; a code registered twice with other docs is a bug."""
    for doc in docs:
        old = _REGISTRY.get(doc.code)
        if old is not None and old != doc:
            raise ValueError(f"finding code {doc.code} registered twice")
        _REGISTRY[doc.code] = doc


def _load_providers() -> None:
    global _loaded
    if _loaded:
        return
    for module in PROVIDERS:
        # A tool that is not part of this installation simply has no codes.
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    _loaded = True


def all_docs() -> list[CodeDoc]:
    """Every registered code's documentation, sorted by code."""
    _load_providers()
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


def get_doc(code: str) -> CodeDoc:
    """The documentation of ``code`` (case-insensitive); :class:`UnknownCodeError` if none."""
    _load_providers()
    try:
        return _REGISTRY[code.strip().upper()]
    except KeyError:
        raise UnknownCodeError(code) from None


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first, then by code, then by location."""

    def key(f: Finding) -> tuple[int, str, str, int, int]:
        loc = f.location
        return (-f.severity.rank, f.code, loc.path if loc else "", loc.line if loc else 0,
                loc.column if loc else 0)

    return sorted(findings, key=key)
