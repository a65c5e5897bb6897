"""``--plot FILE.png``: the ladder as a horizontal bar chart (matplotlib, no display needed)."""

from __future__ import annotations

import io
import os
from typing import Any

from pitstop.fileio import atomic_write_bytes

COLORS = {
    "baseline": "#7f7f7f",
    "kept": "#2ca02c",
    "slower": "#d62728",
    "measured": "#1f77b4",
    "ddp": "#9467bd",
}


def render_png(doc: dict[str, Any], *, title: str) -> bytes:
    """PNG bytes of the chart: one bar per rung (median, whiskers min–max), unmeasured rungs
    named with why, the ideal as a bar and a dashed line."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = list(doc["rungs"])
    if doc.get("ideal"):
        rows.append(doc["ideal"])
    ddp = doc.get("ddp")
    labels: list[str] = []
    medians: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    colors: list[str] = []
    notes: list[str] = []
    for row in rows:
        rate = row["samples_per_s"]
        idx = "" if row["index"] is None else f"{row['index']}  "
        labels.append(f"{idx}{row['title']}")
        if rate:
            medians.append(rate["median"])
            lows.append(rate["median"] - rate["min"])
            highs.append(rate["max"] - rate["median"])
            colors.append(COLORS.get(row["status"], "#1f77b4"))
            speed = f"{row['speedup']:.2f}x" if row.get("speedup") is not None else ""
            share = (f", {row['share_of_ideal']:.0%} of ideal"
                     if row.get("share_of_ideal") is not None and row["name"] != "ideal" else "")
            slower = "  (slower: left out)" if row["status"] == "slower" else ""
            notes.append(f"{rate['median']:,.0f}/s  {speed}{share}{slower}")
        else:
            medians.append(0.0)
            lows.append(0.0)
            highs.append(0.0)
            colors.append("#ffffff")
            notes.append(row["status"])
    if ddp and ddp.get("samples_per_s"):
        rate = ddp["samples_per_s"]
        labels.append(f"DDP x{ddp['world_size']}")
        medians.append(rate["median"])
        lows.append(rate["median"] - rate["min"])
        highs.append(rate["max"] - rate["median"])
        colors.append(COLORS["ddp"])
        eff = ddp.get("scaling_efficiency")
        notes.append(f"{rate['median']:,.0f}/s" + (f", scaling {eff:.0%}" if eff is not None else ""))

    fig, ax = plt.subplots(figsize=(10, 0.55 * len(labels) + 1.8), dpi=110)
    positions = list(range(len(labels)))[::-1]
    ax.barh(positions, medians, color=colors, edgecolor="#333333", linewidth=0.5,
            xerr=[lows, highs], capsize=3, error_kw={"elinewidth": 0.8})
    ax.set_yticks(positions, labels)
    top = max([m + h for m, h in zip(medians, highs, strict=True)] + [1.0])
    for pos, value, high, note in zip(positions, medians, highs, notes, strict=True):
        ax.text(value + high + top * 0.015, pos, note, va="center", fontsize=8,
                color="#555555" if value == 0 else "#000000")
    if doc.get("ideal") and doc["ideal"].get("samples_per_s"):
        ax.axvline(doc["ideal"]["samples_per_s"]["median"], color=COLORS["measured"],
                   linestyle="--", linewidth=1, label="ideal (no loader)")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("samples/s (median of timed repeats; whiskers: min–max)")
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def write_plot(path: str | os.PathLike[str], doc: dict[str, Any], *, title: str) -> None:
    atomic_write_bytes(path, render_png(doc, title=title))
