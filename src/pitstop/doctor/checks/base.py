"""What a check is, what it returns, and how the checks are run over a facts document.

A check is a pure function ``facts -> Outcome`` (or a list of them, one per GPU). It
raises :class:`CannotCheck` when the facts it needs are missing (the probe failed, or
the value was not available) and :class:`NotApplicable` when the question does not
arise (no NVIDIA GPU: no PCIe link to judge). :func:`run_checks` turns every raise,
including a bug in a check, into an ``unknown`` result, so diagnosing never crashes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pitstop.findings import Finding, Remedy, Severity

STATUSES = ("ok", "warning", "problem", "unknown")
LAYERS = ("driver", "gpu", "storage", "cpu", "memory", "container", "environment", "platform")

Facts = Mapping[str, Any]


class CannotCheck(Exception):
    """The facts do not say enough to decide; the message says why."""


class NotApplicable(Exception):
    """The check does not apply to this machine (e.g. GPU checks without a GPU)."""


@dataclass(frozen=True)
class Outcome:
    """What one check concluded about one subject (the machine, or one GPU)."""

    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: Remedy | None = None
    subject: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"bad status {self.status!r}")


def ok(summary: str, subject: str | None = None, /, **evidence: Any) -> Outcome:
    return Outcome("ok", summary, evidence, None, subject)


def warning(summary: str, remedy: Remedy | None, subject: str | None = None, /,
            **evidence: Any) -> Outcome:
    return Outcome("warning", summary, evidence, remedy, subject)


def problem(summary: str, remedy: Remedy | None, subject: str | None = None, /,
            **evidence: Any) -> Outcome:
    return Outcome("problem", summary, evidence, remedy, subject)


CheckFn = Callable[[Facts], "Outcome | list[Outcome]"]


@dataclass(frozen=True)
class Check:
    """A registered check: its code, the layer it belongs to and its expected impact.

    ``impact`` orders the fixes (higher first): how much training speed this kind of
    problem typically costs, from "training does not use the GPU at all" (100) down to
    hygiene (10).
    """

    code: str
    layer: str
    impact: int
    fn: CheckFn


CHECKS: list[Check] = []


def check(code: str, layer: str, impact: int) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the check for ``code``."""
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r}")

    def deco(fn: CheckFn) -> CheckFn:
        if any(c.code == code for c in CHECKS):
            raise ValueError(f"two checks for {code}")
        CHECKS.append(Check(code, layer, impact, fn))
        return fn

    return deco


@dataclass(frozen=True)
class CheckResult:
    """One line of the diagnosis: a check's outcome with its code, title and layer."""

    code: str
    title: str
    layer: str
    status: str
    summary: str
    evidence: dict[str, Any]
    remedy: Remedy | None
    impact: int
    subject: str | None = None
    not_applicable: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "title": self.title,
            "layer": self.layer,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "remedy": self.remedy.to_dict() if self.remedy else None,
        }
        if self.subject:
            out["subject"] = self.subject
        if self.not_applicable:
            out["not_applicable"] = True
        return out

    def to_finding(self) -> Finding | None:
        """The :class:`~pitstop.findings.Finding` for a warning or problem, else ``None``."""
        if self.status not in ("warning", "problem"):
            return None
        sev = Severity.PROBLEM if self.status == "problem" else Severity.WARNING
        title = f"{self.summary}" if not self.subject else f"{self.subject}: {self.summary}"
        return Finding(self.code, title, sev, self.evidence, self.remedy)


# --- helpers used by many checks ------------------------------------------------------

def section(facts: Facts, name: str) -> dict[str, Any]:
    """A probe's section, or :class:`CannotCheck` with the probe's own error."""
    sec = facts.get(name)
    if sec is None:
        raise CannotCheck(f"the facts have no {name!r} section")
    if not isinstance(sec, dict):
        raise CannotCheck(f"the {name!r} section is malformed")
    if "error" in sec and len(sec) == 1:
        raise CannotCheck(f"{name} probe failed: {sec['error']}")
    return sec


def env_vars(facts: Facts) -> dict[str, str]:
    """The recorded environment variables of the process looked at (``{}`` when the
    environment probe failed: then nothing is known to be set)."""
    return dict(((facts.get("environment") or {}).get("variables")) or {})


def value(obj: Mapping[str, Any], key: str, what: str | None = None) -> Any:
    """``obj[key]`` unless missing or an NVML ``{"unavailable": reason}``."""
    v = obj.get(key)
    if isinstance(v, dict) and "unavailable" in v:
        raise CannotCheck(f"{what or key}: {v['unavailable']}")
    if v is None:
        raise CannotCheck(f"{what or key} is not known")
    return v


def avail(v: Any) -> bool:
    """False for ``None`` and NVML ``{"unavailable": ...}`` values."""
    return v is not None and not (isinstance(v, dict) and "unavailable" in v)


def gib(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / (1 << 30):.1f} GiB" if n >= (1 << 30) else f"{n / (1 << 20):.0f} MiB"
