"""Does `pitstop profile` keep the training process's memory within bounds?

The issue's bound: the profiled process's peak RSS stays within +10 % or +200 MB
(whichever is larger) of the same script run plain. Two workloads written for the
purpose (benchmarks/profile_real/workloads/):

- many_ops: ~46 000 tiny operators per step (a Python loop of element-wise ops);
- lstm_lbfgs: two LSTMCells over a sine-wave sequence, LBFGS with a closure: a quarter
  of a million operators per optimizer step at the default sizes here, and a large
  autograd graph per closure (the shape of the script that the earlier probe grew to
  24 GB and the kernel killed).

Each runs plain and under `pitstop profile` (with the operator probe on the last warm-up
step), one after the other, and the training process's peak RSS (VmHWM, read every
50 ms) is compared; a watchdog kills a profiled run above 3x the plain peak.
`--baseline-src DIR` also runs the profile with pitstop taken from DIR/src (e.g. an
older commit: `git archive COMMIT | tar -x -C DIR`), for a before/after.

    .venv/bin/python benchmarks/bench_profile_memory.py
    .venv/bin/python benchmarks/bench_profile_memory.py --only many_ops --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "profile_real"))

from harness import REPO, load_average, pitstop_cmd, rss_bound, run_measured

WORKLOADS = REPO / "benchmarks" / "profile_real" / "workloads"
CASES = {
    "many_ops": (["many_ops.py", "--steps", "12", "--ops", "46000"], 6, 3),
    "lstm_lbfgs": (["lstm_lbfgs.py", "--steps", "5", "--batch", "97", "--length", "500",
                    "--max-iter", "8"], 1, 3),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=sorted(CASES), action="append")
    p.add_argument("--baseline-src", type=Path, help="a pitstop source tree to compare with (its src/)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = []
    print(f"load average before: {load_average()}", file=sys.stderr)
    for name in a.only or list(CASES):
        args, steps, warmup = CASES[name]
        script = str(WORKLOADS / args[0])
        command = [sys.executable, script, *args[1:]]
        plain = run_measured(command, marker=script)
        limit = 3 * plain.peak_rss
        with tempfile.TemporaryDirectory() as tmp:
            prof = run_measured(pitstop_cmd(Path(tmp) / "out", steps, warmup, command), marker=script,
                                rss_limit=limit)
            doc_path = Path(tmp) / "out" / "profile.json"
            doc = json.loads(doc_path.read_text()) if doc_path.exists() else {}
        row = {"case": name, "plain": plain.to_dict(), "profiled": prof.to_dict(),
               "bound_mb": round(rss_bound(plain.peak_rss) / 2**20, 1),
               "within_bound": prof.peak_rss <= rss_bound(plain.peak_rss) and not prof.killed,
               "rss_ratio": round(prof.peak_rss / plain.peak_rss, 3) if plain.peak_rss else None,
               "verdict": doc.get("verdict"),
               "probe_ops": ((doc.get("facts") or {}).get("probe") or {}).get("ops_per_step"),
               "probe_budget_hit": ((doc.get("facts") or {}).get("probe") or {}).get("budget_hit")}
        if a.baseline_src:
            with tempfile.TemporaryDirectory() as tmp:
                base = run_measured(pitstop_cmd(Path(tmp) / "out", steps, warmup, command), marker=script,
                                    rss_limit=limit, env={"PYTHONPATH": str(a.baseline_src / "src")})
            row["baseline"] = base.to_dict()
        rows.append(row)
        print(f"{name}: plain {row['plain']['peak_rss_mb']} MB, profiled {row['profiled']['peak_rss_mb']} MB "
              f"(bound {row['bound_mb']} MB) {'OK' if row['within_bound'] else 'OVER'}"
              + (f"; baseline {row['baseline']['peak_rss_mb']} MB"
                 + (" KILLED" if row["baseline"]["killed"] else "") if "baseline" in row else ""),
              file=sys.stderr)
    print(f"load average after: {load_average()}", file=sys.stderr)
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'case':12} {'plain MB':>9} {'profiled MB':>12} {'bound MB':>9} {'ratio':>6} "
              f"{'probe ops':>10} {'plain s':>8} {'prof s':>7}  verdict")
        for r in rows:
            print(f"{r['case']:12} {r['plain']['peak_rss_mb']:>9} {r['profiled']['peak_rss_mb']:>12} "
                  f"{r['bound_mb']:>9} {r['rss_ratio']:>6} {r['probe_ops'] or '-':>10} "
                  f"{r['plain']['wall_s']:>8} {r['profiled']['wall_s']:>7}  {r['verdict']}"
                  + ("" if r["within_bound"] else "  OVER THE BOUND")
                  + (f"  (baseline pitstop: {r['baseline']['peak_rss_mb']} MB"
                     + (", killed by the watchdog" if r["baseline"]["killed"] else "") + ")"
                     if "baseline" in r else ""))
    return 0 if all(r["within_bound"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
