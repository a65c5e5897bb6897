"""`pitstop profile` on real public training scripts: verdict against the expected one,
overhead, and peak RSS against the plain run.

For every entry of benchmarks/profile_real/manifest.json (repository, pinned commit,
script, how to run it small on a CPU, the synthetic data it needs, and the verdict
judged right beforehand from a hand measurement of its parts, see
benchmarks/profile_real/expectations.md):

1. extract the repository from the fetch tool's mirror into EXT/src/ID and write its
   data (benchmarks/profile_real/setup_corpus.py);
2. run the script plain, then under `pitstop profile`, the same way (same cwd,
   arguments, environment; scripts that would train for hours are stopped at the same
   line of their own output, see `stop` in the manifest), measuring the training
   process's peak RSS (VmHWM) and wall time; a watchdog kills the profiled run if it
   grows past 3x the plain peak;
3. compare: the verdict (when pitstop says `contention`, the machine was busy with
   other processes and the verdict of the step's shares is compared), peak RSS within
   +10 % or +200 MB of the plain run, no run killed.

Overhead is end to end: the profiled run's wall time to the same point over the plain
run's, so it includes pitstop's start-up, the probed step, the precision A/B and the
machine's noise; the per-step figure is benchmarks/bench_profile_overhead.py's.

    .venv/bin/python benchmarks/bench_profile_real.py /work/.mirror
    .venv/bin/python benchmarks/bench_profile_real.py /work/.mirror --only yunjey-language-model --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "profile_real"))

from harness import load_average, pitstop_cmd, rss_bound, run_measured
from setup_corpus import load_manifest, setup_entry, tree_of


def _env(ext: Path, entry: dict[str, Any], manifest: dict[str, Any]) -> dict[str, str]:
    root = tree_of(ext, entry)
    paths = [str(ext / "pylib"), str((root / entry["script"]).parent),
             *[str(root / p) for p in entry.get("pythonpath", [])],
             *[str(ext / "src" / e["repo"].replace("/", "+")) for e in entry.get("extra_repos", [])]]
    env = dict(manifest.get("env", {}))
    env["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
    return env


def run_entry(ext: Path, entry: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    root = tree_of(ext, entry)
    script = str(root / entry["script"])
    command = [sys.executable, script, *entry.get("args", [])]
    cwd = root / entry.get("cwd", ".")
    env = _env(ext, entry, manifest)
    stop = entry.get("stop") or {}
    common = {"marker": script, "cwd": cwd, "env": env, "stop_pattern": stop.get("pattern"),
              "stop_count": int(stop.get("count", 1))}
    plain = run_measured(command, **common)
    prof_cfg = entry.get("profile") or {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        prof = run_measured(pitstop_cmd(out, int(prof_cfg.get("steps", 10)), int(prof_cfg.get("warmup", 3)),
                                        command), rss_limit=3 * plain.peak_rss if plain.peak_rss else None,
                            **common)
        doc = json.loads((out / "profile.json").read_text()) if (out / "profile.json").exists() else {}
    verdict = doc.get("verdict")
    underlying = (doc.get("evidence") or {}).get("underlying") if verdict == "contention" else verdict
    expected = (entry.get("expected") or {}).get("verdict")
    # A label disputed by a later measurement is still the one scored: it was written
    # before pitstop ran; the dispute is printed next to it.
    disputed = ((entry.get("expected") or {}).get("disputed") or {}).get("verdict")
    bound = rss_bound(plain.peak_rss)
    return {
        "id": entry["id"], "expected": expected, "why": (entry.get("expected") or {}).get("why"),
        "disputed_by_later_measurement": disputed,
        "right_by_disputed_label": (disputed or expected) is not None and underlying == (disputed or expected),
        "verdict": verdict, "bottleneck": underlying, "headline": doc.get("headline"),
        "status": doc.get("status"), "right": expected is not None and underlying == expected,
        "plain": plain.to_dict(), "profiled": prof.to_dict(),
        "overhead_pct": round(100 * (prof.wall_s / plain.wall_s - 1), 1) if plain.wall_s else None,
        "rss_bound_mb": round(bound / 2**20, 1),
        "rss_ok": bool(plain.peak_rss) and prof.peak_rss <= bound and not prof.killed,
        "killed": prof.killed, "probe_budget_hit": ((doc.get("facts") or {}).get("probe") or {}).get("budget_hit"),
        "step_boundary": (doc.get("facts") or {}).get("step_boundary"),
        "stderr_tail": prof.stderr_tail[-600:] if not doc else "",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mirror_root", type=Path, help="the fetch tool's mirrors (…/OWNER+NAME/repo)")
    p.add_argument("--ext", type=Path, default=Path("/work/ext/profile_real"),
                   help="where work trees, data and the corpus's Python dependencies (EXT/pylib) live")
    p.add_argument("--only", action="append", help="entry id (repeatable)")
    p.add_argument("--no-setup", action="store_true", help="reuse the extracted trees and data")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    p.add_argument("--save", type=Path, help="also write the rows as JSON to this file")
    a = p.parse_args()
    manifest = load_manifest()
    entries = [e for e in manifest["entries"] if not a.only or e["id"] in a.only]
    rows = []
    print(f"load average before: {load_average()}", file=sys.stderr)
    for entry in entries:
        if not a.no_setup:
            setup_entry(a.mirror_root, a.ext, entry)
        row = run_entry(a.ext, entry, manifest)
        rows.append(row)
        print(f"{row['id']}: expected {row['expected']}, pitstop {row['verdict']}"
              + (f" ({row['bottleneck']})" if row["verdict"] == "contention" else "")
              + f", RSS {row['plain']['peak_rss_mb']} -> {row['profiled']['peak_rss_mb']} MB"
              + (" KILLED" if row["killed"] else ""), file=sys.stderr)
    print(f"load average after: {load_average()}", file=sys.stderr)
    if a.save:
        a.save.write_text(json.dumps(rows, indent=2) + "\n")
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'script':32} {'expected':14} {'pitstop':28} {'ok':3} {'overhead':>9} "
              f"{'plain MB':>9} {'prof MB':>8} {'bound':>7}")
        for r in rows:
            shown = r["verdict"] or "-"
            if r["verdict"] == "contention":
                shown = f"contention ({r['bottleneck']})"
            over = f"{r['overhead_pct']:+.1f} %" if r["overhead_pct"] is not None else "-"
            print(f"{r['id']:32} {r['expected'] or '?':14} {shown:28} {'yes' if r['right'] else 'NO':3} "
                  f"{over:>9} {r['plain']['peak_rss_mb']:>9} {r['profiled']['peak_rss_mb']:>8} "
                  f"{r['rss_bound_mb']:>7}" + ("  KILLED" if r["killed"] else "")
                  + ("" if r["rss_ok"] else "  RSS OVER"))
        right = sum(r["right"] for r in rows)
        disputed = [r for r in rows if r["disputed_by_later_measurement"]]
        print(f"{right}/{len(rows)} verdicts right, {sum(r['rss_ok'] for r in rows)}/{len(rows)} within the RSS "
              f"bound, {sum(r['killed'] for r in rows)} killed"
              + (f"; if the disputed labels were accepted: {sum(r['right_by_disputed_label'] for r in rows)}/"
                 f"{len(rows)} ({', '.join(r['id'] + ' -> ' + r['disputed_by_later_measurement'] for r in disputed)})"
                 if disputed else ""))
    return 0 if all(r["right"] and r["rss_ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
