"""The checks: pure functions of the facts document, one registered per DR code.

:func:`run_checks` runs all of them and never raises: a check that cannot decide
reports ``unknown`` with "could not check: <reason>", one that does not apply reports
``unknown`` marked ``not_applicable``, and a check that crashes reports ``unknown``
naming the internal error.
"""

from __future__ import annotations

from typing import Any

from pitstop.doctor.checks.base import (
    CHECKS,
    LAYERS,
    CannotCheck,
    Check,
    CheckResult,
    Facts,
    NotApplicable,
    Outcome,
)

# Importing the modules registers their checks, in layer order.
from pitstop.doctor.checks import (  # noqa: F401  isort: skip
    driver,
    kernel_module,
    gpu,
    storage,
    cpu,
    memory,
    container,
    environment,
    platform,
)

__all__ = ["CHECKS", "LAYERS", "CheckResult", "all_checks", "run_check", "run_checks"]


def all_checks() -> list[Check]:
    return list(CHECKS)


def _title(code: str) -> str:
    from pitstop.doctor.codes import DOCTOR_DOCS

    doc = DOCTOR_DOCS.get(code)
    return doc.title if doc else code


def run_check(chk: Check, facts: Facts) -> list[CheckResult]:
    """One check over the facts, as results (several for per-GPU checks)."""
    title = _title(chk.code)

    def result(o: Outcome, na: bool = False) -> CheckResult:
        return CheckResult(chk.code, title, chk.layer, o.status, o.summary, dict(o.evidence),
                           o.remedy, chk.impact, o.subject, na)

    try:
        outcome = chk.fn(facts)
    except NotApplicable as err:
        return [result(Outcome("unknown", f"not applicable: {err}", {"not_applicable": str(err)}),
                       na=True)]
    except CannotCheck as err:
        return [result(Outcome("unknown", f"could not check: {err}", {"could_not_check": str(err)}))]
    except Exception as err:  # a bug in a check must not take the diagnosis down
        msg = f"internal error in the check: {type(err).__name__}: {err}"
        return [result(Outcome("unknown", f"could not check: {msg}", {"could_not_check": msg}))]
    outcomes = outcome if isinstance(outcome, list) else [outcome]
    return [result(o) for o in outcomes]


def run_checks(facts: Facts, skip: set[str] | None = None) -> list[CheckResult]:
    """Every check (but those in ``skip``) over the facts, in layer order."""
    results: list[CheckResult] = []
    for chk in sorted(CHECKS, key=lambda c: (LAYERS.index(c.layer), c.code)):
        if skip and chk.code in skip:
            continue
        results.extend(run_check(chk, facts))
    return results


def summary(results: list[CheckResult]) -> dict[str, Any]:
    counts = {s: 0 for s in ("ok", "warning", "problem", "unknown", "not_applicable")}
    for r in results:
        counts["not_applicable" if r.not_applicable else r.status] += 1
    return counts
