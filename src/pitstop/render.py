"""Findings to the terminal (rich) and to JSON. The last step of probes → facts →
checks → findings → render; nothing here decides anything."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pitstop.findings import Finding, Severity, sorted_findings

SEVERITY_STYLE = {
    Severity.PROBLEM: "bold red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


def evidence_text(evidence: dict[str, Any] | Any) -> str:
    """``key=value`` pairs, compact, for a table cell."""
    if not isinstance(evidence, dict):
        return str(evidence)
    parts = []
    for key, value in evidence.items():
        if isinstance(value, float):
            value = f"{value:.3g}"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        parts.append(f"{key}={value}")
    return "; ".join(parts)


def findings_table(findings: Iterable[Finding], title: str | None = None) -> Any:
    """A rich Table of findings, worst first."""
    from rich.table import Table

    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("code", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("finding")
    table.add_column("evidence")
    table.add_column("fix")
    for f in sorted_findings(findings):
        table.add_row(
            f.code,
            f"[{SEVERITY_STYLE[f.severity]}]{f.severity.value}[/]",
            f.title,
            evidence_text(dict(f.evidence)),
            f.remedy.text if f.remedy else "",
        )
    return table


def findings_json(findings: Sequence[Finding], **extra: Any) -> str:
    """A JSON document ``{"findings": [...], **extra}``."""
    doc = dict(extra)
    doc["findings"] = [f.to_dict() for f in sorted_findings(findings)]
    return json.dumps(doc, indent=2)
