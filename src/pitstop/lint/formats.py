"""Output formats of ``pitstop lint``: text, json, sarif (2.1.0) and github annotations."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from pitstop import __version__
from pitstop.findings import Severity, get_doc
from pitstop.lint.model import Diagnostic, LintFinding

FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {Severity.PROBLEM: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
GITHUB_LEVEL = {Severity.PROBLEM: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def location_text(f: LintFinding) -> str:
    if f.cell is not None:
        return f"{f.path}:cell {f.cell}:{f.line}:{f.column}"
    return f"{f.path}:{f.line}:{f.column}"


def render_text(findings: Sequence[LintFinding], *, color: bool = False,
                show_source: bool = True) -> str:
    out = io.StringIO()
    write_text(findings, out, color=color, show_source=show_source)
    return out.getvalue()


def write_text(findings: Iterable[LintFinding], stream: TextIO, *, color: bool = False,
               show_source: bool = True) -> None:
    """The text format, written finding by finding (a run with a hundred thousand
    findings never holds its whole output in memory)."""
    import click

    def style(s: str, **kw: Any) -> str:
        return click.style(s, **kw) if color else s

    for f in findings:
        out: list[str] = []
        mark = " [*]" if f.fix is not None else ""
        out.append(f"{style(location_text(f), bold=True)}: "
                   f"{style(f.code, fg='red', bold=True)}{mark} {f.message}")
        if show_source and f.source_line.strip():
            src = f.source_line.expandtabs(4)
            indent = len(src) - len(src.lstrip())
            out.append(f"    {src.strip()}")
            start = max(0, f.column - 1 - indent)
            width = 1
            if f.end_line == f.line and f.end_column:
                width = max(1, f.end_column - f.column)
            width = min(width, max(1, len(src.strip()) - start))
            out.append("    " + " " * start + style("^" * width, fg="red"))
        stream.write("\n".join(out) + "\n")


def summary_text(findings: Sequence[LintFinding], files: int, *, unsafe: bool,
                 unchecked: int = 0) -> str:
    """The last line of the text format; ``unchecked``: files that could not be checked
    (named on stderr), which also make the exit status 1."""
    not_checked = (f" {unchecked} file{'s' if unchecked != 1 else ''} could not be checked "
                   "(errors on stderr).") if unchecked else ""
    if not findings:
        return f"No findings in {files} file{'s' if files != 1 else ''}.{not_checked}\n"
    safe = sum(1 for f in findings if f.fix and f.fix.safety == "safe")
    unsafe_n = sum(1 for f in findings if f.fix and f.fix.safety == "unsafe")
    parts = [f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} "
             f"in {files} file{'s' if files != 1 else ''}.{not_checked}"]
    if safe:
        parts.append(f"[*] {safe} fixable with `--fix`.")
    if unsafe_n and not unsafe:
        parts.append(f"{unsafe_n} more with `--fix --unsafe-fixes`.")
    parts.append("`pitstop explain CODE` says why each matters.")
    return " ".join(parts) + "\n"


def render_json(findings: Sequence[LintFinding], diagnostics: Sequence[Diagnostic] = ()) -> str:
    out = io.StringIO()
    write_json(findings, diagnostics, out)
    return out.getvalue()


def write_json(findings: Iterable[LintFinding], diagnostics: Iterable[Diagnostic],
               stream: TextIO) -> None:
    """The findings, then every file that could not be (fully) checked, as entries with
    ``"code": null`` (as ruff reports syntax errors): a syntax error is in the JSON too,
    not only on stderr. Written entry by entry."""
    first = True

    def put(item: dict[str, Any]) -> None:
        nonlocal first
        text = json.dumps(item, indent=2)
        stream.write(("[\n" if first else ",\n") + "  " + text.replace("\n", "\n  "))
        first = False

    for f in findings:
        put(f.to_dict())
    for d in diagnostics:
        put({
            "path": d.path, "line": d.line, "column": d.column, "end_line": None,
            "end_column": None, "code": None, "name": DIAGNOSTIC_NAMES.get(d.kind, d.kind),
            "category": "diagnostic", "severity": "error" if d.kind in {"error", "input",
                                                                        "internal"} else d.kind,
            "message": d.message, "fix": None, "kind": d.kind,
        })
    stream.write("[]\n" if first else "\n]\n")


DIAGNOSTIC_NAMES = {"error": "not-checked", "input": "bad-input", "internal": "internal-error",
                    "warning": "skipped", "note": "note"}


def _esc_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[LintFinding], diagnostics: Sequence[Diagnostic] = ()) -> str:
    """GitHub Actions workflow commands: one annotation per finding."""
    out = []
    for f in findings:
        props = [f"file={_esc_prop(f.path)}", f"line={f.line}", f"col={f.column}"]
        if f.end_line and f.cell is None:
            props.append(f"endLine={f.end_line}")
            if f.end_column and f.end_line == f.line:
                props.append(f"endColumn={f.end_column}")
        title = f"{f.code} {get_doc(f.code).name}"
        props.append(f"title={_esc_prop(title)}")
        where = f"cell {f.cell}: " if f.cell is not None else ""
        out.append(f"::{GITHUB_LEVEL[f.severity]} {','.join(props)}::{_esc_data(where + f.message)}")
    for d in diagnostics:
        where = f",line={d.line}" if d.line else ""
        level = "warning" if d.kind == "warning" else "error"
        out.append(f"::{level} file={_esc_prop(d.path)}{where},title=pitstop lint::"
                   f"{_esc_data(d.message)}")
    return "\n".join(out) + ("\n" if out else "")


def render_sarif(findings: Sequence[LintFinding], diagnostics: Sequence[Diagnostic] = ()) -> str:
    """A SARIF 2.1.0 log with one run; rules carry their docs and category."""
    from pitstop.explain import doc_to_markdown
    from pitstop.findings import all_docs

    docs = [d for d in all_docs() if d.code.startswith("LT")]
    index = {d.code: i for i, d in enumerate(docs)}
    rules = []
    for d in docs:
        rules.append({
            "id": d.code,
            "name": d.name,
            "shortDescription": {"text": d.title},
            "fullDescription": {"text": d.what},
            "help": {"text": d.why, "markdown": doc_to_markdown(d)},
            "defaultConfiguration": {"level": SARIF_LEVEL[d.severity]},
            "properties": {"category": d.category, "tags": ["performance", d.category]},
        })
    results = []
    for f in findings:
        region: dict[str, Any] = {"startLine": f.line, "startColumn": f.column}
        if f.end_line and f.cell is None:
            region["endLine"] = f.end_line
            if f.end_column:
                region["endColumn"] = f.end_column
        if f.source_line:
            region["snippet"] = {"text": f.source_line}
        props: dict[str, Any] = {"category": f.category}
        if f.fix is not None:
            props["fix"] = f.fix.to_dict()
        if f.cell is not None:
            props["cell"] = f.cell
        results.append({
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": SARIF_LEVEL[f.severity],
            "message": {"text": (f"cell {f.cell}: " if f.cell is not None else "") + f.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": f.path.replace("\\", "/")},
                "region": region,
            }}],
            "properties": props,
        })
    notifications = [{
        "level": {"note": "note", "warning": "warning"}.get(d.kind, "error"),
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": d.path}}}],
    } for d in diagnostics]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "pitstop-lint",
                "fullName": "pitstop lint: loop-aware performance linter for PyTorch",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": not any(d.kind not in {"note", "warning"}
                                               for d in diagnostics),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"
