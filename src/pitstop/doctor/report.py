"""Rendering the diagnosis: a rich table grouped by layer, the fixes by impact, or JSON."""

from __future__ import annotations

import json
import re
from typing import Any

from pitstop.doctor.checks.base import LAYERS, CheckResult
from pitstop.doctor.facts import SCHEMA_VERSION
from pitstop.render import evidence_text

STATUS_LABEL = {
    "ok": "[green]ok[/]",
    "warning": "[yellow]warning[/]",
    "problem": "[bold red]problem[/]",
    "unknown": "[magenta]unknown[/]",
}
LAYER_TITLE = {
    "driver": "Driver / CUDA", "gpu": "GPU hardware", "storage": "Storage", "cpu": "CPU",
    "memory": "Memory / OS", "container": "Container", "environment": "Environment",
    "platform": "Platform",
}


def report_json(facts: dict[str, Any], results: list[CheckResult]) -> str:
    """``{"schema_version", "facts", "checks", "summary"}``: every check that ran."""
    from pitstop.doctor.checks import summary

    doc = {
        "schema_version": SCHEMA_VERSION,
        "facts": facts,
        "checks": [r.to_dict() for r in results],
        "summary": summary(results),
    }
    return json.dumps(doc, indent=2, default=str)


def fixes_in_order(results: list[CheckResult]) -> list[CheckResult]:
    """Warnings and problems with a remedy: problems first, each group by expected impact."""
    bad = [r for r in results if r.status in ("problem", "warning") and r.remedy is not None]
    return sorted(bad, key=lambda r: (r.status != "problem", -r.impact, r.code, r.subject or ""))


def _headline(facts: dict[str, Any]) -> str:
    plat = facts.get("platform") or {}
    nvml = facts.get("nvml") or {}
    torch = facts.get("torch") or {}
    py = facts.get("python") or {}
    meta = facts.get("meta") or {}
    gpus = [g.get("name") for g in nvml.get("gpus") or [] if isinstance(g.get("name"), str)]
    pci = (facts.get("pci") or {}).get("nvidia_gpus") or []
    if gpus:
        gpu_text = f"{len(gpus)} x {gpus[0]}, driver {(nvml.get('system') or {}).get('driver_version')}"
    elif pci:
        gpu_text = f"{len(pci)} NVIDIA GPU(s) on PCI, NVML: {nvml.get('reason')}"
    else:
        gpu_text = "no NVIDIA GPU"
    if torch.get("installed"):
        torch_text = f"torch {torch.get('version')}" + (
            f" (CUDA {torch.get('cuda')})" if torch.get("cuda") else " (CPU build)")
    else:
        torch_text = "torch not installed"
    where = meta.get("hostname") or (f"sysroot {meta.get('sysroot')}" if meta.get("sysroot")
                                     else "facts file")
    return (f"[bold]{where}[/]: {plat.get('os_pretty_name') or '?'}, kernel "
            f"{plat.get('kernel') or '?'}, Python {py.get('version') or '?'}, {torch_text}; "
            f"{gpu_text}")


def _merge_unknowns(rows: list[CheckResult]) -> list[CheckResult]:
    """Fold "could not check" rows that share one reason into one row listing the codes
    (without a driver, a dozen GPU checks fail for the same reason)."""
    from dataclasses import replace

    out: list[CheckResult] = []
    by_reason: dict[str, int] = {}
    for r in rows:
        if r.status == "unknown" and not r.subject and r.summary in by_reason:
            first = out[by_reason[r.summary]]
            out[by_reason[r.summary]] = replace(first, code=f"{first.code}, {r.code}")
            continue
        if r.status == "unknown":
            by_reason[r.summary] = len(out)
        out.append(r)
    for i, r in enumerate(out):
        codes = r.code.split(", ")
        if len(codes) > 1:
            out[i] = replace(r, code=code_ranges(codes))
    return out


def code_ranges(codes: list[str]) -> str:
    """``DR010 DR011 DR012 DR014`` -> ``"DR010-DR012\nDR014"`` (runs of 3+ become ranges)."""
    nums = sorted(int(c[2:]) for c in codes)
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"DR{run[0]:03d}-DR{run[-1]:03d}")
        else:
            parts.extend(f"DR{n:03d}" for n in run)
    return "\n".join(parts)


_SYSTEM_APPLY = re.compile(r"pitstop system apply[^\n]*?--only[ =]([a-z-]+)")


def system_settings(fixes: list[CheckResult]) -> list[str]:
    """The `pitstop system apply --only` settings the fixes name, in order, once each."""
    out: list[str] = []
    for r in fixes:
        for name in _SYSTEM_APPLY.findall(r.remedy.text if r.remedy else ""):
            if name not in out:
                out.append(name)
    return out


def render_terminal(facts: dict[str, Any], results: list[CheckResult], console: Any,
                    verbose: bool = False) -> None:
    """Print the table (by layer), then the fixes in order of expected impact."""
    from rich.markup import escape
    from rich.table import Table

    from pitstop.doctor.checks import summary

    console.print(_headline(facts))
    table = Table(show_lines=False, expand=False, pad_edge=False)
    table.add_column("status", no_wrap=True)
    table.add_column("code", no_wrap=True)
    table.add_column("finding (evidence)")
    for layer in LAYERS:
        rows = [r for r in results if r.layer == layer]
        if not rows:
            continue
        if not verbose:
            shown = [r for r in rows if not r.not_applicable]
            hidden = len(rows) - len(shown)
        else:
            shown, hidden = rows, 0
        table.add_section()
        table.add_row("", "", f"[bold]{LAYER_TITLE[layer]}[/]"
                      + (f" [dim]({hidden} not applicable, --all lists them)[/]" if hidden
                         else ""))
        for r in _merge_unknowns(shown):
            label = "[dim]n/a[/]" if r.not_applicable else STATUS_LABEL[r.status]
            text = escape(r.summary)
            if r.subject:
                text = f"{escape(r.subject)}: {text}"
            if r.status in ("warning", "problem") or (verbose and r.status == "ok"):
                shown_ev = {k: v for k, v in r.evidence.items() if v not in (None, "", [], {})}
                ev = escape(evidence_text(shown_ev))
                if len(ev) > 240:
                    ev = ev[:237] + "..."
                if ev:
                    text += f"\n[dim]{ev}[/]"
            table.add_row(label, r.code, text)
    console.print(table)
    fixes = fixes_in_order(results)
    if fixes:
        console.print("\n[bold]Fixes, in order of expected impact[/]")
        seen: dict[str, int] = {}
        for i, r in enumerate(fixes, 1):
            subj = f" {r.subject}:" if r.subject else ""
            console.print(f"\n[bold]{i}. {r.code}[/]{escape(subj)} {escape(r.summary)}")
            assert r.remedy is not None
            if r.remedy.text in seen:
                console.print(f"   the same fix as {seen[r.remedy.text]}.")
                continue
            seen[r.remedy.text] = i
            # Commands stay on one line each, so they can be copied as they are.
            shell = r.remedy.kind.value in ("shell", "pitstop")
            for line in r.remedy.text.splitlines():
                console.print(f"   {escape(line)}", highlight=False, soft_wrap=shell)
            if r.remedy.note:
                console.print(f"   [dim]({escape(r.remedy.note)})[/]")
        settings = system_settings(fixes)
        if len(settings) > 1:
            console.print("\n[bold]The OS settings above in one step[/] (without --yes: a "
                          "dry run; `sudo pitstop system revert --yes` undoes it):")
            console.print(f"   sudo pitstop system apply --only {','.join(settings)} --yes",
                          highlight=False, soft_wrap=True)
    counts = summary(results)
    ms = sum((facts.get("meta") or {}).get("probe_ms", {}).values())
    console.print(f"\n{counts['problem']} problem(s), {counts['warning']} warning(s), "
                  f"{counts['ok']} ok, {counts['unknown']} could not check, "
                  f"{counts['not_applicable']} not applicable"
                  + (f"; facts collected in {ms:.0f} ms" if ms else "")
                  + ". `pitstop explain DR0xx` explains a code.")
