"""The profile as a document (profile.json), a terminal summary and a self-contained HTML page.

:func:`build_document` is the one place that turns captures and samples into the
report's content; the terminal and HTML renderers only format that document, so the
three outputs never disagree.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Sequence
from html import escape
from typing import Any

from pitstop.findings import sorted_findings
from pitstop.hostinfo.cpu import usable_cpus
from pitstop.profile.analysis import PHASES, merge_ranks, window_samples
from pitstop.profile.facts import build_facts
from pitstop.profile.svg import PALETTE, line_chart, stacked_bars
from pitstop.profile.verdict import decide

__all__ = ["SCHEMA", "build_document", "render_html", "render_terminal"]

SCHEMA = "pitstop.profile/1"
_SAMPLE_MARGIN_S = 2.0


def build_document(caps: Sequence[dict[str, Any]], samples: list[dict[str, Any]], *,
                   command: Sequence[str], exit_code: int | None, steps: int, warmup: int,
                   not_measured: dict[str, str] | None = None, started_wall: float | None = None,
                   duration_s: float | None = None, cpu_count: int | None = None) -> dict[str, Any]:
    """Everything pitstop learned from one run, JSON-able."""
    ranks = merge_ranks(caps)
    facts = build_facts(caps, ranks, samples, cpu_count=cpu_count or usable_cpus()[0])
    verdict = decide(facts)
    missing: dict[str, str] = dict(not_measured or {})
    notes: list[str] = []
    for cap in caps:
        who = f"rank {cap['rank']}" if cap.get("rank") is not None else f"pid {cap.get('pid')}"
        for key, reason in (cap.get("not_measured") or {}).items():
            missing.setdefault(key, reason)
        notes += [f"{who}: {n}" for n in cap.get("notes") or []]
    for r in ranks:
        notes += r.notes
    if facts.get("probe_missing"):
        missing.setdefault("host_overhead", f"operator probe: {facts['probe_missing']}")
    # Processes without steps (a launcher, a helper that touched a DataLoader) have no
    # window to complete; the status is the ranks'.
    rank_pids = {r.pid for r in ranks}
    statuses = {c.get("status") for c in caps if int(c.get("pid", 0)) in rank_pids}
    status = "complete" if ranks and statuses == {"complete"} else "partial"
    notes += verdict.notes
    exits = [c.get("exit") for c in caps if c.get("exit")]
    if ranks:
        lo = min(s.start_ns for r in ranks for s in r.steps) / 1e9 - _SAMPLE_MARGIN_S
        hi = max(s.end_ns for r in ranks for s in r.steps) / 1e9 + _SAMPLE_MARGIN_S
        kept = window_samples(samples, int(lo * 1e9), int(hi * 1e9))
    else:
        kept = samples[-600:]
    return {
        "schema": SCHEMA,
        "verdict": verdict.name,
        "headline": verdict.headline,
        "evidence": verdict.evidence,
        "fixes": [f.to_dict() for f in verdict.fixes],
        "findings": [f.to_dict() for f in sorted_findings(verdict.findings)],
        "status": status,
        "command": list(command),
        "exit_code": exit_code,
        "script_exit": exits[0] if exits else None,
        "started": _dt.datetime.fromtimestamp(started_wall, _dt.timezone.utc).isoformat(timespec="seconds")
        if started_wall else None,
        "duration_s": round(duration_s, 3) if duration_s is not None else None,
        "settings": {"steps": steps, "warmup": warmup},
        "facts": facts,
        "ranks": [{**r.to_dict(), "steps": [s.to_dict() for s in r.steps]} for r in ranks],
        "stragglers": facts.get("stragglers", []),
        "samples": kept,
        "not_measured": missing,
        "notes": notes,
    }


# ---- terminal ------------------------------------------------------------------------
_VERDICT_STYLE = {"input-bound": "bold red", "io-bound": "bold red", "host-bound": "bold yellow",
                  "memory-bound": "bold yellow", "compute-bound": "bold green", "unknown": "bold"}


_BOUNDARY_WORDS = {
    "backward": "each backward() after a gradient reset ends a step (no torch.optim optimizer)",
    "dataloader": "each DataLoader batch is a step (no backward() seen)",
}


def _fmt_ms(v: float) -> str:
    return f"{v:.1f} ms" if v >= 1 else f"{v * 1000:.0f} µs"


def _new_refs(fix: dict[str, Any]) -> list[str]:
    """A fix's references that its text does not already name."""
    return [r for r in fix.get("refs") or () if r not in fix["text"]]


def exit_description(doc: dict[str, Any]) -> str | None:
    """How the command ended, in words, when it did not exit 0 (None when it did)."""
    code = doc.get("exit_code")
    if not code:
        return None
    how = doc.get("script_exit") or {}
    if how.get("kind") == "exception":
        return f"the script raised {how.get('type')}: {how.get('message')} (exit {code})"
    if 128 < code < 160:
        import signal

        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"the command was killed by {name} (exit {code})"
    return f"the command exited with status {code}"


def render_terminal(doc: dict[str, Any], console: Any, *, out_dir: str | None = None) -> None:
    """The summary a person reads after a run: verdict, step breakdown, ranked fixes,
    findings, what could not be measured. Labels and numbers keep a hanging indent when
    the terminal is narrow."""
    from rich.table import Table
    from rich.text import Text

    from pitstop.render import evidence_text

    facts = doc.get("facts") or {}
    ranks = doc.get("ranks") or []
    if ranks:
        r0 = ranks[0]
        n = r0["steps_measured"]
        console.print(f"[bold]pitstop profile[/]: {n} step{'' if n == 1 else 's'} measured "
                      f"(after {doc['settings']['warmup']} warm-up) on {facts.get('device', '?')}, "
                      f"{len(ranks)} process{'es' if len(ranks) > 1 else ''}"
                      + ("" if doc["status"] == "complete" else " [yellow](partial profile)[/]"))
    ended = exit_description(doc)
    if ended:
        console.print(f"[yellow]{escape_rich(ended)}[/]")
    style = _VERDICT_STYLE.get(doc["verdict"], "bold")
    console.print(f"verdict: [{style}]{doc['verdict'].upper()}[/] — {escape_rich(doc['headline'])}")
    rows = Table.grid(padding=(0, 2))
    rows.add_column(style="dim", no_wrap=True)
    rows.add_column()
    if ranks:
        r0 = ranks[0]
        sm = r0["step_ms"]
        mean = sum(r0["phase_ms_mean"].values())
        rows.add_row("step time", f"median {_fmt_ms(sm['median'])} (p10 {_fmt_ms(sm['p10'])}, "
                                  f"p90 {_fmt_ms(sm['p90'])}; mean {_fmt_ms(mean)})")
        parts = []
        for p in PHASES:
            ms = r0["phase_ms_mean"].get(p, 0.0)
            share = r0["phase_share"].get(p, 0.0)
            if ms > 0:
                parts.append(f"{p} {_fmt_ms(ms)} ({100 * share:.0f}%)")
        rows.add_row("breakdown", "mean per step: " + " | ".join(parts))
        sites = facts.get("other_sites") or []
        if sites:
            rows.add_row("other is", "; ".join(
                f"{x['site']} {x['category']} {100 * x['share_of_step']:.0f}%"
                for x in sites[:4] if x["share_of_step"] >= 0.01) or "spread thin")
        if facts.get("step_boundary") and facts["step_boundary"] not in ("optimizer", "manual"):
            rows.add_row("steps", _BOUNDARY_WORDS.get(facts["step_boundary"], facts["step_boundary"]))
        if len(ranks) > 1:
            per = ", ".join(f"rank {r['rank']}: {_fmt_ms(r['step_ms']['median'])}"
                            + (f" (own work {_fmt_ms(r['work_ms_median'])})" if r.get("work_ms_median") else "")
                            for r in ranks)
            rows.add_row("per rank", per)
    if doc.get("evidence"):
        shown = {k: v for k, v in doc["evidence"].items()
                 if v is not None and k not in ("top_ops", "thresholds", "io_reasons")}
        if shown:
            rows.add_row("evidence", Text(evidence_text(shown)))
    if rows.row_count:
        console.print(rows, style="")
    if doc.get("fixes"):
        console.print("[bold]fixes[/] (most expected gain first):")
        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column()
        for i, fx in enumerate(doc["fixes"], 1):
            body = Text(fx["text"])
            refs = _new_refs(fx)
            if refs:
                body.append(f"  [{', '.join(refs)}]", style="cyan")
            body.append("\n" + fx["why"], style="dim")
            grid.add_row(f"  {i}.", body)
        console.print(grid)
    if doc.get("findings"):
        table = Table(show_lines=False, expand=False, title="findings")
        for col in ("code", "severity", "finding", "evidence"):
            table.add_column(col)
        for f in doc["findings"]:
            table.add_row(f["code"], f["severity"], escape_rich(f["title"]),
                          escape_rich(evidence_text(f["evidence"])))
        console.print(table)
    if doc.get("not_measured"):
        console.print("[bold]not measured[/]:")
        for k, why in doc["not_measured"].items():
            console.print(f"  - {k}: {escape_rich(why)}")
    for n in doc.get("notes") or []:
        console.print(f"[dim]note: {escape_rich(n)}[/]")
    if out_dir:
        console.print(f"wrote {escape_rich(os.path.join(out_dir, 'profile.json'))} and "
                      f"{escape_rich(os.path.join(out_dir, 'report.html'))}")


def escape_rich(text: str) -> str:
    from rich.markup import escape as _esc

    return _esc(str(text))


# ---- HTML ---------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:960px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:14px 0 2px}
.verdict{display:inline-block;padding:4px 10px;border-radius:4px;color:#fff;font-weight:bold}
.v-input-bound,.v-io-bound{background:#c62828}.v-host-bound,.v-memory-bound{background:#ef6c00}
.v-compute-bound{background:#2e7d32}.v-unknown{background:#616161}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5} code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
.muted{color:#777;font-size:13px} .problem{color:#c62828} .warning{color:#ef6c00} .info{color:#1565c0}
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _kv(d: dict[str, Any]) -> str:
    from pitstop.render import evidence_text

    return escape(evidence_text(d))


def _thin(steps: list[dict[str, Any]], most: int = 300) -> list[dict[str, Any]]:
    """At most ``most`` steps, evenly spaced, for plots (profile.json keeps them all)."""
    if len(steps) <= most:
        return steps
    every = -(-len(steps) // most)
    return steps[::every]


def _chart(heading: str, svg: str) -> str:
    return f"<h3>{escape(heading)}</h3>{svg}"


def _timelines(doc: dict[str, Any]) -> list[str]:
    samples = _thin(doc.get("samples") or [], 1500)
    if not samples:
        return ["<p class='muted'>No telemetry samples.</p>"]
    t0 = samples[0]["t"]
    xs = [s["t"] - t0 for s in samples]
    shade = []
    ranks = doc.get("ranks") or []
    if ranks:
        steps = [s for s in ranks[0]["steps"] if s["kind"] == "measured"]
        if steps:
            a = steps[0]["start_ns"] / 1e9 - t0
            b = steps[-1]["start_ns"] / 1e9 + steps[-1]["ms"] / 1e3 - t0
            shade.append((a, b))
    out = ["<p class='muted'>Shaded: the measured steps. Samples every 0.1 s.</p>",
           _chart("Host CPU, iowait and disk busy (%)", line_chart(
               [("CPU (all cores)", xs, [s.get("cpu_pct") for s in samples]),
                ("iowait", xs, [s.get("iowait_pct") for s in samples]),
                ("busiest disk busy", xs, [s.get("disk_busy_pct") for s in samples])],
               title="host CPU, iowait, disk busy", ylabel="%", ymax=100, shade=shade))]
    cores = len(samples[-1].get("cpu_per_core_pct") or [])
    if cores:
        series = [(f"core {c}", xs, [(s.get("cpu_per_core_pct") or [None] * cores)[c]
                                     if s.get("cpu_per_core_pct") else None for s in samples])
                  for c in range(min(cores, 16))]
        out.append(_chart("CPU per core (%)",
                          line_chart(series, title="per-core CPU", ylabel="%", ymax=100, shade=shade)))
    # processes: the training process(es) and their children
    main_pids = [str(r["pid"]) for r in ranks]
    proc_series = []
    for pid in main_pids:
        proc_series.append((f"pid {pid} (train)", xs, [((s.get("procs") or {}).get(pid) or {}).get("cpu")
                                                       for s in samples]))
    workers = sorted({k for s in samples for k, v in (s.get("procs") or {}).items()
                      if str(v.get("ppid")) in main_pids})
    if workers:
        proc_series.append((f"{len(workers)} workers (sum)", xs,
                            [sum(((s.get("procs") or {}).get(w) or {}).get("cpu") or 0.0 for w in workers)
                             for s in samples]))
    if proc_series:
        out.append(_chart("Training process(es) and DataLoader workers: CPU (cores)",
                          line_chart(proc_series, title="process CPU (cores)", ylabel="cores", shade=shade)))
    out.append(_chart("Disk read throughput (MB/s)", line_chart([("disk read", xs, [(s.get("disk_read_bps") or 0) / 1e6 if s.get("disk_read_bps") is not None else None for s in samples])],
                          title="disk read throughput", ylabel="MB/s", shade=shade)))
    gpus = samples[-1].get("gpus") or []
    if gpus:
        for key, label, ymax in (("utilization_gpu_pct", "GPU util %", 100.0),
                                 ("utilization_memory_pct", "GPU memory-bandwidth util %", 100.0),
                                 ("power_draw_w", "GPU power W", None)):
            series = [(f"GPU {g['index']}", xs, [((s.get("gpus") or [{}] * (i + 1))[i] or {}).get(key)
                                                 if i < len(s.get("gpus") or []) else None for s in samples])
                      for i, g in enumerate(gpus)]
            out.append(_chart(label, line_chart(series, title=label, ylabel=label, ymax=ymax, shade=shade)))
    return out


def _code_spans(text: str) -> str:
    """Escaped HTML of ``text`` with its `backticked` parts as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def _verdict_evidence(evidence: dict[str, Any]) -> list[str]:
    """The numbers that decided the verdict, next to the thresholds they were held to."""
    shown = {k: val for k, val in evidence.items()
             if val is not None and k not in ("thresholds", "top_ops", "io_reasons")}
    if not shown:
        return []
    limits = evidence.get("thresholds") or {}
    out = ["<details open><summary>Why this verdict: the numbers</summary>",
           _table(["evidence", "value"], [[escape(k), escape(str(val))] for k, val in shown.items()])]
    if evidence.get("io_reasons"):
        out.append("<p>storage rules that fired: " + escape("; ".join(evidence["io_reasons"])) + "</p>")
    if limits:
        out.append("<p class='muted'>thresholds (docs/profile.md, <code>pitstop explain PF001</code> …): "
                   + escape(", ".join(f"{k} {val:g}" for k, val in limits.items())) + "</p>")
    out.append("</details>")
    return out


def _share(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.0f} %"


def _other_section(facts: dict[str, Any]) -> list[str]:
    """What the loop did outside the hooked calls, from the stack samples."""
    sites = facts.get("other_sites") or []
    if not sites:
        return []
    split = facts.get("other_split") or {}
    out = ["<h2>Outside the hooked calls: what the stack samples saw</h2>",
           f"<p class='muted'>{facts.get('other_samples')} samples of the main thread's stack in "
           "the <i>other</i> phase of the measured steps (one every 10 ms). Categories: input "
           "(the loop's own batch code), forward (operators that build the autograd graph), "
           "optimizer (writes to the parameters), outside (logging, printing, saving), python "
           "(the rest).</p>",
           "<p>" + escape(", ".join(f"{k} {_share(v)} of the step" for k, v in split.items() if v)) + "</p>",
           _table(["call site", "category", "share of step", "samples", "why"],
                  [[f"<code>{escape(x['site'])}</code>", escape(x["category"]),
                    _share(x.get("share_of_step")), x["samples"], escape(x["why"])] for x in sites])]
    return out


def _probe_section(facts: dict[str, Any]) -> list[str]:
    probe = facts.get("probe")
    out: list[str] = []
    if probe:
        out.append("<h2>Operators in the probed step</h2>")
        out.append(f"<p>{probe['ops_per_step']} operators ({probe.get('compute_ops_per_step')} in "
                   f"forward, backward and optimizer); host overhead "
                   f"{_share(probe.get('host_overhead_share'))} of compute time"
                   + (f"; matmul/conv {_share(probe['matmul_share_of_op_time'])} of operator time"
                      if probe.get("matmul_share_of_op_time") is not None else "")
                   + (f"; convolutions {_share(probe['conv_share_of_op_time'])}"
                      if probe.get("conv_share_of_op_time") else "") + "</p>")
        if probe.get("budget_hit"):
            out.append(f"<p class='warning'>The probe's budget was reached ({escape(probe['budget_hit'])}): "
                       "the figures cover the part of the step before that.</p>")
        out.append(_table(["operator", "calls", "total µs"],
                          [[escape(t["name"]), t["count"], f"{t['total_us']:.0f}"]
                           for t in probe.get("top_ops", [])]))
    ab = facts.get("precision_ab")
    if ab:
        out.append("<h2>Precision A/B</h2>")
        if ab.get("speedup") is not None:
            out.append(f"<p>{escape(ab['what'])}: fp32 {ab['fp32_ms']} ms, {escape(ab['dtype'])} "
                       f"{ab['low_ms']} ms: <b>{ab['speedup']:.2f}x</b></p>")
        else:
            out.append(f"<p class='muted'>Not run: {escape(str(ab.get('skipped')))}</p>")
    return out


def render_html(doc: dict[str, Any]) -> str:
    """A single HTML file: inline CSS and SVG, no scripts, no network."""
    v = doc["verdict"]
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>pitstop profile: {escape(v)}</title><style>{_CSS}</style></head><body>",
             "<h1>pitstop profile</h1>",
             f"<p class='muted'><code>{escape(' '.join(doc.get('command') or []))}</code> — exit code "
             f"{escape(str(doc.get('exit_code')))}, {escape(doc.get('status', ''))} profile"
             f"{', started ' + escape(doc['started']) if doc.get('started') else ''}</p>",
             f"<p><span class='verdict v-{escape(v)}'>{escape(v)}</span> {escape(doc['headline'])}</p>"]
    ended = exit_description(doc)
    if ended:
        parts.append(f"<p class='warning'>{escape(ended)}</p>")
    if doc.get("fixes"):
        parts.append("<h2>What to do, most expected gain first</h2><ol>")
        for fx in doc["fixes"]:
            refs = f" <span class='muted'>({escape(', '.join(_new_refs(fx)))})</span>" if _new_refs(fx) else ""
            parts.append(f"<li><b>{_code_spans(fx['text'])}</b>{refs}<br><span class='muted'>"
                         f"{_code_spans(fx['why'])}</span></li>")
        parts.append("</ol>")
    parts += _verdict_evidence(doc.get("evidence") or {})
    ranks = doc.get("ranks") or []
    if ranks:
        parts.append("<h2>Where each step's time goes</h2>")
        for r in ranks:
            steps = _thin(r["steps"])
            rows = [s["phases_ms"] for s in steps]
            labels = [str(s["index"]) for s in steps]
            marks = ["" if s["kind"] == "measured" else s["kind"] for s in steps]
            title = f"rank {r['rank']}" if r.get("rank") is not None else f"pid {r['pid']}"
            shown = ("" if len(steps) == len(r["steps"]) else
                     f" Every {len(r['steps']) // len(steps)}th of {len(r['steps'])} steps is drawn.")
            parts.append(f"<h3>{escape(title)}: per-step time by phase</h3><p class='muted'>Faded "
                         "bars: warm-up and the operator-probe step, not in the statistics. "
                         f"Hover a bar for its numbers.{shown}</p>")
            parts.append(stacked_bars(rows, PHASES, labels=labels, marks=marks, title=title))
        heads = ["phase"]
        for r in ranks:
            who = f"rank {r['rank']}" if r.get("rank") is not None else "mean"
            heads += [f"{who}: mean ms per step", "share"]
        parts.append(_table(heads, [[f"<span style='color:{PALETTE[p]}'>■</span> {p}"]
                                    + [c for r in ranks for c in (f"{r['phase_ms_mean'][p]:.2f}",
                                                                  f"{100 * r['phase_share'][p]:.1f} %")]
                                    for p in PHASES]))
        if len(ranks) > 1:
            parts.append("<h2>Ranks</h2>")
            rows2 = []
            strag = {s["rank"] for s in doc.get("stragglers") or []}
            for r in ranks:
                rows2.append([escape(str(r["rank"])), f"{r['step_ms']['median']:.2f}",
                              f"{r['work_ms_median']:.2f}" if r.get("work_ms_median") is not None else "",
                              "<b class='problem'>straggler</b>" if r["rank"] in strag else ""])
            parts.append(_table(["rank", "median step ms", "own work ms", ""], rows2))
            series = [(f"rank {r['rank']}", [float(s["index"]) for s in _thin(r["steps"], 2000)],
                       [s["ms"] for s in _thin(r["steps"], 2000)]) for r in ranks]
            parts.append(_chart("Step time per rank (ms, by step index)",
                                line_chart(series, title="step time per rank", ylabel="ms", xlabel="",
                                           integer_x=True)))
    parts.append("<h2>Findings</h2>")
    if doc.get("findings"):
        parts.append(_table(["code", "severity", "finding", "evidence", "fix"], [
            [escape(f["code"]), f"<span class='{escape(f['severity'])}'>{escape(f['severity'])}</span>",
             escape(f["title"]) + (f"<br><code>{escape(f['location']['path'])}:{f['location']['line']}</code>"
                                   if f.get("location") else ""),
             _kv(f["evidence"]), escape((f.get("remedy") or {}).get("text", ""))]
            for f in doc["findings"]]))
        parts.append("<p class='muted'>Each code is documented by <code>pitstop explain CODE</code>.</p>")
    else:
        parts.append("<p class='muted'>None.</p>")
    parts.append("<h2>Machine while training</h2>")
    parts += _timelines(doc)
    parts += _other_section(doc.get("facts") or {})
    parts += _probe_section(doc.get("facts") or {})
    parts.append("<h2>Evidence and facts</h2>")
    facts = {k: v for k, v in (doc.get("facts") or {}).items()
             if k not in ("per_rank", "probe", "phase_share") and v is not None}
    parts.append(_table(["fact", "value"], [[escape(k), escape(str(v))] for k, v in facts.items()]))
    if doc.get("not_measured"):
        parts.append("<h2>Not measured</h2><ul>")
        parts += [f"<li><b>{escape(k)}</b>: {escape(w)}</li>" for k, w in doc["not_measured"].items()]
        parts.append("</ul>")
    if doc.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in doc["notes"]) + "</ul>")
    parts.append("<p class='muted'>Generated by pitstop profile. Data: profile.json beside this file.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
