"""The ladder's results as a rich table, a JSON document and a recommendation.

Pure functions of the results: nothing here measures or decides what to keep.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from pitstop.bench.ladder import RUNGS, Knobs, LadderResult, RungResult

SCHEMA_ID = "pitstop.bench/1"

_RATE = {
    "type": ["object", "null"],
    "required": ["median", "min", "max", "repeats"],
    "properties": {
        "median": {"type": "number", "exclusiveMinimum": 0},
        "min": {"type": "number", "exclusiveMinimum": 0},
        "max": {"type": "number", "exclusiveMinimum": 0},
        "repeats": {"type": "array", "items": {"type": "number"}, "minItems": 1},
    },
}
_ROW = {
    "type": "object",
    "required": ["index", "name", "title", "change", "knobs", "applied", "status", "reason",
                 "samples_per_s", "speedup", "share_of_ideal"],
    "properties": {
        "index": {"type": ["integer", "null"]},
        "name": {"type": "string"},
        "title": {"type": "string"},
        "change": {"type": "string"},
        "knobs": {"type": "array", "items": {"type": "string"}},
        "applied": {"type": "object"},
        "status": {"enum": ["baseline", "kept", "slower", "not applicable", "skipped", "failed",
                            "interrupted", "measured"]},
        "reason": {"type": ["string", "null"]},
        "samples_per_s": _RATE,
        "speedup": {"type": ["number", "null"]},
        "share_of_ideal": {"type": ["number", "null"]},
    },
}
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pitstop bench result",
    "type": "object",
    "required": ["schema", "created", "machine", "workload", "plan", "rungs", "ideal",
                 "recommended", "interrupted"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "created": {"type": "string"},
        "machine": {
            "type": "object",
            "required": ["cpu_model", "cpu_cores_logical", "cpu_cores_physical", "gpus",
                         "driver_version", "torch"],
        },
        "workload": {"type": "object", "required": ["device", "dataset", "model", "batch_size"]},
        "plan": {"type": "object", "required": ["warmup", "steps", "repeats"]},
        "rungs": {"type": "array", "items": _ROW},
        "ideal": {"oneOf": [{"type": "null"}, _ROW]},
        "ddp": {"type": ["object", "null"]},
        "recommended": {"type": ["object", "null"]},
        "interrupted": {"type": "boolean"},
    },
}

KNOB_LABEL = {
    "workers": "DataLoader workers",
    "pinned": "pinned memory + non_blocking",
    "cudnn_benchmark": "cudnn.benchmark",
    "no_sync": "no per-step sync",
    "mixed_precision": "mixed precision",
    "channels_last": "channels_last",
    "compile": "torch.compile",
}


def speedup(result: RungResult, baseline: RungResult | None) -> float | None:
    if result.measurement is None or baseline is None or baseline.measurement is None:
        return None
    return result.measurement.median / baseline.measurement.median


def share_of_ideal(result: RungResult, ideal: RungResult | None) -> float | None:
    if result.measurement is None or ideal is None or ideal.measurement is None:
        return None
    return result.measurement.median / ideal.measurement.median


def row_dict(result: RungResult, baseline: RungResult | None, ideal: RungResult | None
             ) -> dict[str, Any]:
    return {
        "index": result.index,
        "name": result.name,
        "title": result.title,
        "change": result.change,
        "knobs": list(result.knobs),
        "applied": result.applied,
        "status": result.status,
        "reason": result.reason,
        "samples_per_s": result.measurement.summary() if result.measurement else None,
        "speedup": _round(speedup(result, baseline)),
        "share_of_ideal": _round(share_of_ideal(result, ideal)),
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def detail(result: RungResult) -> str:
    """What the rung's configuration really had, in a few words."""
    a = result.applied
    bits = []
    if result.name == "workers" and "num_workers" in a:
        bits.append(f"{a['num_workers']} worker(s)")
        compared = a.get("threads_compared")
        if isinstance(compared, dict) and len(compared) == 2:
            # e.g. "2 threads (1: 197/s)": the kept count, then the other one's median
            other = next((c for c in compared.values()
                          if c["threads"] != a.get("torch_threads")), None)
            if other is not None:
                bits.append(f"{a.get('torch_threads')} threads ({other['threads']}: "
                            f"{other['median']:,.0f}/s)")
    if result.name == "pinned" and "pin_memory" in a:
        bits.append("pinned" if a["pin_memory"] else "not pinned")
    if result.name == "mixed-precision" and "precision" in a:
        bits.append(str(a["precision"]))
    if result.name in ("no-sync", "naive") and "loss_reads_per_step" in a:
        bits.append(f"{a['loss_reads_per_step']:g} loss reads/step")
    if result.name == "ideal":
        bits.append("no loader")
    return ", ".join(bits)


def knob_phrase(knob: str, applied: dict[str, Any]) -> str:
    label = KNOB_LABEL[knob]
    if knob == "workers" and applied.get("num_workers") is not None:
        if str(applied.get("torch_threads_source", "")).startswith("computed"):
            return (f"{label} ({applied['num_workers']}, with {applied['torch_threads']} "
                    f"intra-op thread(s) in the training process)")
        return f"{label} ({applied['num_workers']})"
    if knob == "mixed_precision" and applied.get("precision"):
        return f"{label} ({applied['precision']})"
    return label


def snippet(knobs: Knobs, *, device: str, batch_size: int, log_every: int,
            cut_threads: bool = True) -> str:
    """Code using pitstop.train that runs the recommended configuration (``cut_threads``:
    the training process applies the loader's thread recommendation, CPU only)."""
    cuda = device.startswith("cuda")
    lines = ["import torch", "from pitstop.train import " + ", ".join(sorted(
        {"loader", "TrainStep"}
        | ({"fast_defaults"} if knobs.cudnn_benchmark else set())
        | ({"Metrics", "every"} if knobs.no_sync else set())
        | ({"DevicePrefetcher"} if knobs.pinned and cuda else {"to_device"}))), ""]
    if knobs.cudnn_benchmark:
        lines.append("fast_defaults()  # cudnn.benchmark (and TF32 matmuls)")
    loader_args = [f"batch_size={batch_size}", "shuffle=True", f'device="{device}"']
    if not knobs.workers:
        loader_args.append("num_workers=0")
    if cuda and not knobs.pinned:
        loader_args.append("pin_memory=False")
    lines.append(f"train_loader = loader(dataset, {', '.join(loader_args)})")
    if knobs.workers and not cuda and cut_threads:
        lines[2:2] = ["from pitstop.train import use_training_threads"]
        lines.append("print(use_training_threads(train_loader))  "
                     "# intra-op threads = CPUs the workers leave")
    lines.append(f'model = model.to("{device}")')
    if knobs.channels_last:
        lines.append("model = model.to(memory_format=torch.channels_last)")
    lines.append("optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)")
    runnable = "torch.compile(model)" if knobs.compile else "model"
    precision = '"auto"' if knobs.mixed_precision else '"fp32"'
    lines.append(f"step = TrainStep({runnable}, optimizer, precision={precision})")
    if knobs.no_sync:
        lines += [f'metrics = Metrics("{device}")', f"log = every({log_every})"]
    if knobs.pinned and cuda:
        lines.append(f'for i, (inputs, targets) in enumerate(DevicePrefetcher(train_loader, "{device}")):')
    else:
        lines.append("for i, batch in enumerate(train_loader):")
        lines.append(f'    inputs, targets = to_device(batch, "{device}")')
    if knobs.channels_last:
        lines.append("    inputs = inputs.contiguous(memory_format=torch.channels_last)")
    lines.append("    loss = step(inputs, targets)")
    if knobs.no_sync:
        lines += ['    metrics.update("loss", loss)',
                  "    if log(i):",
                  "        print(i, metrics.compute())  # the only host read of the loss",
                  "        metrics.reset()"]
    else:
        lines.append('    print(i, loss.item())')
    return "\n".join(lines)


def recommendation(result: LadderResult, *, device: str, batch_size: int, log_every: int
                   ) -> dict[str, Any] | None:
    """The fastest configuration measured, in words and as code.

    The kept rungs are nested (each is the one below plus a knob), so any of them is a
    whole configuration. Normally the top one is also the fastest; when noise let a
    knob through that did not pay, the fastest kept rung is recommended and the knobs
    above it are listed as "no measurable gain".
    """
    baseline = result.baseline()
    if baseline is None:
        return None
    kept = [r for r in result.rungs if r.status in ("baseline", "kept") and r.measurement]
    fastest = max(kept, key=lambda r: r.measurement.median if r.measurement else 0.0)
    knobs = Knobs(**{k: True for k in fastest.knobs})
    phrases = [knob_phrase(k, fastest.applied) for k in knobs.active()]
    above = [r.title for r in kept if (r.index or 0) > (fastest.index or 0)]
    left_out = [r.title for r in result.rungs if r.status == "slower"]
    not_measured = [f"{r.title} ({r.status})" for r in result.rungs
                    if r.status in ("skipped", "failed", "interrupted")]
    return {
        "knobs": knobs.active(),
        "rung": fastest.name,
        "text": ", ".join(phrases) if phrases else "the naive loop (no knob helped here)",
        "no_measurable_gain": above,
        "left_out_as_slower": left_out,
        "not_measured": not_measured,
        "speedup": _round(speedup(fastest, baseline)),
        "share_of_ideal": _round(share_of_ideal(fastest, result.ideal)),
        "snippet": snippet(knobs, device=device, batch_size=batch_size, log_every=log_every,
                           cut_threads=str(fastest.applied.get("torch_threads_source", ""))
                           .startswith("computed")),
    }


def build_document(result: LadderResult, *, machine: dict[str, Any], workload: dict[str, Any],
                   plan: dict[str, Any], ddp: dict[str, Any] | None,
                   recommended: dict[str, Any] | None, command: list[str]) -> dict[str, Any]:
    """The ``--json`` document (validated against :data:`JSON_SCHEMA` in the tests)."""
    baseline = result.baseline()
    return {
        "schema": SCHEMA_ID,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine,
        "workload": workload,
        "plan": plan,
        "rungs": [row_dict(r, baseline, result.ideal) for r in result.rungs],
        "ideal": row_dict(result.ideal, baseline, result.ideal) if result.ideal else None,
        "ddp": ddp,
        "recommended": recommended,
        "interrupted": result.interrupted,
    }


# ---------------------------------------------------------------- terminal

STATUS_STYLE = {
    "baseline": "bold",
    "kept": "green",
    "slower": "red",
    "not applicable": "dim",
    "skipped": "yellow",
    "failed": "bold red",
    "interrupted": "yellow",
    "measured": "cyan",
}


def _fmt_rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _fmt_range(rate: dict[str, Any] | None) -> str:
    if not rate:
        return "—"
    return (f"{_fmt_rate(rate['median'])} [dim]({_fmt_rate(rate['min'])}–"
            f"{_fmt_rate(rate['max'])})[/]")


def table(doc: dict[str, Any], *, title: str) -> Any:
    """A rich Table of the document's rungs, the ideal row and the DDP row."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, title_justify="left", expand=False, box=box.SIMPLE_HEAD)
    t.add_column("rung", no_wrap=True)
    t.add_column("samples/s (min–max)", justify="right", no_wrap=True)
    t.add_column("speedup", justify="right", no_wrap=True)
    t.add_column("of ideal", justify="right", no_wrap=True)
    # no min_width: at 80 columns the fixed columns leave it ~14; a wider minimum would
    # push the table past the console, which crops it (words of the title lost)
    t.add_column("status", overflow="fold")
    rows = list(doc["rungs"])
    if doc.get("ideal"):
        rows.append(doc["ideal"])
    for row in rows:
        rate = row["samples_per_s"]
        status = row["status"]
        style = STATUS_STYLE.get(status, "")
        note = status if status != "measured" else ""
        extra = _detail_from_row(row)
        if extra:
            note = f"{note} · {extra}" if note else extra
        if row.get("reason"):
            note = f"{note} ({_footnote_mark(row)})"
        label = row["name"] if row["index"] is None else f"{row['index']} {row['name']}"
        t.add_row(
            label,
            _fmt_range(rate),
            f"{row['speedup']:.2f}x" if row.get("speedup") is not None else "—",
            f"{row['share_of_ideal']:.0%}" if row.get("share_of_ideal") is not None else "—",
            f"[{style}]{escape(note)}[/]" if style else escape(note),
            end_section=row["index"] == len(RUNGS) - 1,
        )
    ddp = doc.get("ddp")
    if ddp and ddp.get("samples_per_s"):
        rate = ddp["samples_per_s"]
        eff = ddp.get("scaling_efficiency")
        t.add_row(f"ddp x{ddp['world_size']}", _fmt_range(rate),
                  f"{ddp['speedup']:.2f}x" if ddp.get("speedup") is not None else "—", "—",
                  f"[cyan]scaling {eff:.0%}[/]" if eff is not None else "")
    elif ddp:
        t.add_row(f"ddp x{ddp.get('world_size')}", "—", "—", "—",
                  f"[yellow]{escape(str(ddp.get('status')))} (see below)[/]")
    return t


def _footnote_mark(row: dict[str, Any]) -> str:
    return "see below" if row["index"] is None else f"note {row['index']}"


def reasons(doc: dict[str, Any]) -> list[str]:
    """One line per row that has a reason (why not applicable / skipped / left out)."""
    out = []
    for row in doc["rungs"]:
        if row.get("reason"):
            out.append(f"note {row['index']} ({row['title']}, {row['status']}): {row['reason']}")
    ddp = doc.get("ddp")
    if ddp and ddp.get("reason"):
        out.append(f"DDP ({ddp.get('status')}): {ddp['reason']}")
    return out


def _detail_from_row(row: dict[str, Any]) -> str:
    result = RungResult(row["index"], row["name"], row["title"], row["change"], row["status"],
                        applied=row.get("applied") or {})
    if not row["samples_per_s"]:
        return ""
    text = detail(result)
    spread = spread_of(row["samples_per_s"])
    if spread > NOISY_SPREAD:
        text = f"{text}, noisy (repeats span {spread:.0%})" if text else \
            f"noisy (repeats span {spread:.0%})"
    return text


# Repeats spanning more than this share of their median are flagged: another process
# (or a noisy neighbour on a shared VM) competed for the machine while they ran.
NOISY_SPREAD = 0.25


def spread_of(rate: dict[str, Any]) -> float:
    return float((rate["max"] - rate["min"]) / rate["median"]) if rate["median"] else 0.0


def noisy_text(doc: dict[str, Any]) -> str | None:
    """A warning when some rungs' repeats disagree a lot (a busy or shared machine)."""
    rows = [r for r in [*doc["rungs"], doc.get("ideal")]
            if r and r.get("samples_per_s") and spread_of(r["samples_per_s"]) > NOISY_SPREAD]
    if not rows:
        return None
    names = ", ".join(r["name"] for r in rows)
    plan = doc.get("plan") or {}
    loads = [v for v in (plan.get("load_average_start"), plan.get("load_average_end"))
             if v is not None]
    cpus = (doc.get("machine") or {}).get("cpu_usable")
    load = (f" (1-minute load average {' -> '.join(f'{v:g}' for v in loads)} on {cpus} CPUs)"
            if loads and cpus else "")
    above = [r for r in doc["rungs"] if (r.get("share_of_ideal") or 0) > 1.05]
    ideal_note = (" Shares of ideal above 100% come from the same noise: the ideal row was "
                  "measured at a busier moment." if above else "")
    return (f"noisy: the repeats of {names} differ by more than {NOISY_SPREAD:.0%} of their "
            f"median; other processes competed for the CPUs{load}. Compare rungs with care, "
            f"or rerun on an idle machine (more --repeats steadies the median).{ideal_note}")


def ddp_text(ddp: dict[str, Any] | None) -> str | None:
    """``scaling efficiency 87% = ...``: the DDP rung in one sentence."""
    if not ddp or not ddp.get("samples_per_s") or ddp.get("scaling_efficiency") is None:
        return None
    n = ddp["world_size"]
    return (f"DDP scaling efficiency {ddp['scaling_efficiency']:.0%} = "
            f"{_fmt_rate(ddp['samples_per_s']['median'])} samples/s with {n} ranks / "
            f"({n} x {_fmt_rate(ddp['single_rank_samples_per_s'])} samples/s with one rank)")


def recommendation_text(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "no recommendation: the naive rung was not measured"
    parts = [f"recommended for this machine: {rec['text']}"]
    gains = []
    if rec.get("speedup") is not None:
        gains.append(f"{rec['speedup']:.2f}x the naive loop")
    if rec.get("share_of_ideal") is not None:
        gains.append(f"{rec['share_of_ideal']:.0%} of ideal")
    if gains:
        parts.append(f" ({', '.join(gains)})")
    if rec.get("no_measurable_gain"):
        parts.append(f"; kept by the noise rule but no faster: {', '.join(rec['no_measurable_gain'])}")
    return "".join(parts)


def format_duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
