"""``pitstop plot FILE -o OUT.png|OUT.html``: a recording's timelines, verdict changes marked.

One column of charts sharing the time axis (seconds from the first sample): the share
of time the recording's training process (the one followed with ``--pid``, else the one
judged first most often) waits for data and computes, GPU activity (utilization.gpu,
and SM/tensor activity where GPM was read), GPU power and memory, host CPU and iowait,
host memory, disk throughput, and the CPU of each training process with its loader
workers (``.jsonl`` recordings only: a CSV has no process table). Every change of that
process's verdict is a vertical line with its name, and each stretch of one verdict is
shaded in its colour. ``.html`` embeds the figure as
SVG with a table of the verdict changes; the file is written atomically.
"""

from __future__ import annotations

import html
import io
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError
from pitstop.fileio import atomic_write_bytes, atomic_write_text, check_output_path
from pitstop.monitor.recording import Recording

__all__ = ["PLOT_FORMATS", "check_plot_output", "plot_recording", "primary_pid", "verdict_changes"]

PLOT_FORMATS = (".png", ".html")
COLOURS = {"input-bound": "#e6a100", "io-bound": "#d62728", "host-bound": "#9467bd",
           "compute-bound": "#2ca02c", "memory-bound": "#17becf", "unknown": "#7f7f7f"}


def check_plot_output(path: Path) -> str:
    ext = path.suffix.lower()
    if ext not in PLOT_FORMATS:
        raise UsageError(f"-o {path}: unknown extension {path.suffix or '(none)'!r}; use .png or .html")
    check_output_path(path, what="the plot", option="-o")
    return ext


def primary_pid(snaps: Sequence[dict[str, Any]]) -> int | None:
    """The training process a recording is about: the one followed with ``--pid``, else
    the one judged first (busiest, biggest GPU user) in most samples; ``None`` when no
    training process was judged."""
    firsts: Counter[int] = Counter()
    for s in snaps:
        for p in s.get("processes") or []:
            if p.get("followed"):
                return int(p["pid"])
        first = next((v for v in s.get("verdicts") or [] if v.get("pid") is not None
                      and v.get("verdict")), None)
        if first is not None:
            firsts[int(first["pid"])] += 1
    return firsts.most_common(1)[0][0] if firsts else None


def _verdict_of(s: dict[str, Any], pid: int | None) -> dict[str, Any]:
    verdicts = s.get("verdicts") or []
    if pid is None:
        return verdicts[0] if verdicts else {}
    return next((v for v in verdicts if v.get("pid") == pid), {})


def verdict_changes(snaps: Sequence[dict[str, Any]], pid: int | None = None
                    ) -> list[tuple[float, str | None, str]]:
    """(seconds from the start, verdict name, line) of training process ``pid`` (default:
    whatever is judged first) at the first sample and at every change of its verdict.

    Following one process matters: the first verdict of a sample belongs to whichever
    process is busiest at that moment, and two processes trading places is no change."""
    if not snaps:
        return []
    t0 = snaps[0]["t"]
    out: list[tuple[float, str | None, str]] = []
    last: object = object()
    for s in snaps:
        v = _verdict_of(s, pid)
        name = v.get("verdict")
        if name != last:
            out.append((s["t"] - t0, name, str(v.get("line", ""))))
            last = name
    return out


def _wait_shares(snaps: Sequence[dict[str, Any]], pid: int) -> tuple[list[float], list[float]]:
    """Percent of the time ``pid``'s loop waits for data and computes, as its verdicts'
    facts estimated them (NaN where a sample has none: CSV recordings, the first samples)."""
    data, compute = [], []
    for s in snaps:
        share = ((_verdict_of(s, pid).get("facts") or {}).get("phase_share") or {})
        data.append(100.0 * share["data"] if "data" in share else float("nan"))
        compute.append(100.0 * share["forward"] if "forward" in share else float("nan"))
    return data, compute


def _series(snaps: Sequence[dict[str, Any]], get: Any) -> list[float]:
    out = []
    for s in snaps:
        try:
            v = get(s)
        except (KeyError, IndexError, TypeError):
            v = None
        out.append(float("nan") if v is None else float(v))
    return out


def _gpu(s: dict[str, Any], i: int) -> dict[str, Any]:
    return next(g for g in s.get("gpus") or [] if g.get("index") == i)


def _trainer_cores(snaps: Sequence[dict[str, Any]], primary: int | None
                   ) -> dict[str, list[float]]:
    """Per training process (the recording's own first, then the busiest; four at most):
    its own CPU and its workers' summed CPU, in cores."""
    total: dict[int, float] = {}
    for s in snaps:
        for p in s.get("processes") or []:
            if p.get("role") == "training":
                total.setdefault(p["pid"], 0.0)
            owner = p["pid"] if p.get("role") == "training" else p.get("trainer")
            if owner is not None and p.get("role") in ("training", "worker"):
                total[owner] = total.get(owner, 0.0) + (p.get("cpu_cores") or 0.0)
    pids = sorted(total, key=lambda pid: (pid != primary, -total[pid], pid))
    out: dict[str, list[float]] = {}
    for pid in pids[:4]:
        main, workers = [], []
        for s in snaps:
            table = s.get("processes") or []
            me = next((p for p in table if p["pid"] == pid), None)
            ws = [p.get("cpu_cores") or 0.0 for p in table if p.get("trainer") == pid
                  and p.get("role") == "worker"]
            main.append(float("nan") if me is None or me.get("cpu_cores") is None else me["cpu_cores"])
            workers.append(sum(ws) if ws else float("nan"))
        out[f"PID {pid}"] = main
        if any(w == w for w in workers):  # some sample had workers (nan != nan)
            out[f"PID {pid} workers"] = workers
    return out


def _figure(rec: Recording) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snaps = rec.snapshots
    t0 = snaps[0]["t"]
    x = [s["t"] - t0 for s in snaps]
    gpu_ids = sorted({g["index"] for s in snaps for g in s.get("gpus") or []})
    primary = primary_pid(snaps)
    trainers = _trainer_cores(snaps, primary)
    waits = _wait_shares(snaps, primary) if primary is not None else None
    has_waits = waits is not None and any(v == v for v in waits[0])
    panels = (["wait"] if has_waits else []) + (["gpu_busy", "gpu_power"] if gpu_ids else []) + [
        "cpu", "mem", "disk"] + (["procs"] if trainers else [])
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.1 * len(panels) + 0.8), sharex=True,
                             squeeze=False)
    ax_of = dict(zip(panels, axes[:, 0], strict=True))
    if has_waits and waits is not None:
        ax = ax_of["wait"]
        ax.plot(x, waits[0], color=COLOURS["input-bound"], label=f"PID {primary} waits for data %")
        ax.plot(x, waits[1], color=COLOURS["compute-bound"], label=f"PID {primary} computes %")
        ax.set_ylim(0, 105)
        ax.set_ylabel("loop %")
    if gpu_ids:
        ax = ax_of["gpu_busy"]
        for i in gpu_ids:
            ax.plot(x, _series(snaps, lambda s, i=i: _gpu(s, i).get("utilization_gpu_pct")),
                    label=f"GPU {i} utilization.gpu")
            sm = _series(snaps, lambda s, i=i: (_gpu(s, i).get("gpm") or {}).get("sm_active_pct"))
            if any(v == v for v in sm):
                ax.plot(x, sm, "--", label=f"GPU {i} SM active (GPM)")
                ax.plot(x, _series(snaps, lambda s, i=i: (_gpu(s, i).get("gpm") or {}).get(
                    "tensor_active_pct")), ":", label=f"GPU {i} tensor active (GPM)")
        ax.set_ylim(0, 105)
        ax.set_ylabel("GPU %")
        ax = ax_of["gpu_power"]
        for i in gpu_ids:
            ax.plot(x, _series(snaps, lambda s, i=i: _gpu(s, i).get("power_draw_w")), label=f"GPU {i} power W")
        ax.set_ylabel("W")
        twin = ax.twinx()
        for i in gpu_ids:
            twin.plot(x, _series(snaps, lambda s, i=i: _gpu(s, i)["memory_used_bytes"] / 2**30),
                      "--", color="grey", label=f"GPU {i} memory GiB")
        twin.set_ylabel("GiB")
    ax = ax_of["cpu"]
    ax.plot(x, _series(snaps, lambda s: s["cpu"]["busy_pct"]), label="CPU busy %")
    ax.plot(x, _series(snaps, lambda s: s["cpu"]["iowait_pct"]), label="iowait %")
    ax.set_ylim(0, 105)
    ax.set_ylabel("host %")
    ax = ax_of["mem"]
    for key, label in (("used_bytes", "memory"), ("swap_used_bytes", "swap"), ("shm_used_bytes", "/dev/shm")):
        ax.plot(x, _series(snaps, lambda s, k=key: s["memory"][k] / 2**30), label=f"{label} GiB")
    ax.set_ylabel("GiB")
    ax = ax_of["disk"]
    totals: dict[str, float] = {}
    for s in snaps:
        for d in s.get("disks") or []:
            totals[d["name"]] = totals.get(d["name"], 0.0) + (d.get("read_bps") or 0) + (d.get("write_bps") or 0)
    for name in sorted(totals, key=lambda n: -totals[n])[:3]:
        for key, style in (("read_bps", "-"), ("write_bps", "--")):
            ax.plot(x, _series(snaps, lambda s, n=name, k=key: next(
                d for d in s["disks"] if d["name"] == n)[k] / 1e6), style, label=f"{name} {key[:-4]} MB/s")
    ax.set_ylabel("MB/s")
    if trainers:
        ax = ax_of["procs"]
        for label, values in trainers.items():
            ax.plot(x, values, label=label)
        ax.set_ylabel("cores")
    changes = verdict_changes(snaps, primary)
    end = x[-1] if x else 0.0
    for n, (t, verdict, _) in enumerate(changes):
        t_next = changes[n + 1][0] if n + 1 < len(changes) else end
        colour = COLOURS.get(verdict or "", "#cccccc")
        for a in ax_of.values():
            a.axvspan(t, t_next, color=colour, alpha=0.08, lw=0)
            if n:
                a.axvline(t, color=colour, lw=1.2)
        axes[0, 0].annotate(verdict or "no verdict", (t, 1.0), xycoords=("data", "axes fraction"),
                            xytext=(2, 2), textcoords="offset points", fontsize=8, color=colour,
                            rotation=0, va="bottom")
    for a in ax_of.values():
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(loc="upper left", fontsize=7, ncol=3, framealpha=0.6)
    axes[-1, 0].set_xlabel("seconds from the first sample")
    host = snaps[0].get("host", "")
    about = f"; verdicts of PID {primary}" if primary is not None else ""
    fig.suptitle(f"pitstop monitor recording {rec.path.name} ({host}, {len(snaps)} samples, "
                 f"{rec.duration_s:.0f} s{about})", fontsize=10)
    fig.tight_layout()
    return fig


def _html(rec: Recording, svg: str) -> str:
    pid = primary_pid(rec.snapshots)
    rows = "".join(
        f"<tr><td>{t:.0f} s</td><td>{html.escape(name or 'no verdict')}</td>"
        f"<td>{html.escape(line)}</td></tr>" for t, name, line in verdict_changes(rec.snapshots, pid))
    whose = f" of PID {pid}" if pid is not None else ""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in rec.notes)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>pitstop plot: "
            f"{html.escape(rec.path.name)}</title><style>body{{font-family:sans-serif;margin:1em}}"
            f"td{{padding:2px 8px;vertical-align:top}}</style></head><body>"
            f"<h1>pitstop monitor recording {html.escape(rec.path.name)}</h1>"
            f"{svg}<h2>Verdict changes{whose}</h2><table><tr><th>at</th><th>verdict</th><th>line</th></tr>"
            f"{rows}</table>{'<ul>' + notes + '</ul>' if notes else ''}</body></html>\n")


def plot_recording(rec: Recording, out: Path) -> None:
    """Draw ``rec`` into ``out`` (.png or .html)."""
    import matplotlib.pyplot as plt  # `pitstop plot` checked it is installed

    fig = _figure(rec)
    buf = io.BytesIO()
    try:
        if out.suffix.lower() == ".png":
            fig.savefig(buf, format="png", dpi=110)
            atomic_write_bytes(out, buf.getvalue())
        else:
            fig.savefig(buf, format="svg")
            svg = buf.getvalue().decode("utf-8")
            atomic_write_text(out, _html(rec, svg[svg.index("<svg"):]))
    finally:
        plt.close(fig)
