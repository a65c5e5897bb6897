"""How much do two independent experts agree on what `pitstop lint` must find?

Two labellers labelled the same programs (same repository, commit, files and run),
neither seeing the other's labels. Scoring one set of "must" labels against the other
with the rules of ``bench_lint_real.py`` (per-place rules by file, rule and line;
program-level rules per program) gives the precision and recall that a perfect linter
agreeing with expert B would get when judged by expert A: the ceiling for the linter's
own figures on one labeller's set.

    python benchmarks/bench_label_agreement.py benchmarks/lint_real/heldout/L17A \\
        benchmarks/lint_real/agreement/L17A2 [--slack 2] [--list]

``--slack N`` lets per-place labels match within N lines (a multi-line call labelled on
its first or its offending line).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

PROGRAM_RULES = frozenset({"LT005", "LT006", "LT010", "LT011"})

Key = tuple[str, str]  # (repository, program name)


def load(folder: Path) -> dict[Key, list[dict]]:
    """Every program's "must" labels of one labeller's folder."""
    out: dict[Key, list[dict]] = {}
    for f in sorted(folder.glob("*.json")):
        data = json.loads(f.read_text())
        for prog in data["programs"]:
            out[(data["repo"], prog["name"])] = [
                lab for lab in prog["labels"] if lab["verdict"] == "must"]
    return out


def match(truth: list[dict], other: list[dict], slack: int) -> tuple[list[dict], list[dict]]:
    """(labels of ``truth`` that ``other`` also has, labels of ``other`` that match none)."""
    found: list[dict] = []
    used: set[int] = set()
    for lab in truth:
        for j, cand in enumerate(other):
            if j in used or cand["rule"] != lab["rule"]:
                continue
            if lab["rule"] in PROGRAM_RULES or (
                    cand["path"] == lab["path"] and abs(cand["line"] - lab["line"]) <= slack):
                used.add(j)
                found.append(lab)
                break
    extra = [c for j, c in enumerate(other) if j not in used]
    return found, extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path, help="labeller A's folder (taken as the truth)")
    ap.add_argument("second", type=Path, help="labeller B's folder (taken as predictions)")
    ap.add_argument("--slack", type=int, default=0, help="lines a per-place label may differ")
    ap.add_argument("--list", action="store_true", help="print every disagreement")
    args = ap.parse_args(argv)
    for folder in (args.first, args.second):
        if not folder.is_dir():
            ap.error(f"{folder}: no such folder")
    a, b = load(args.first), load(args.second)
    common = sorted(set(a) & set(b))
    if not common:
        ap.error("the two folders label no program in common")
    must = Counter[str]()
    hit = Counter[str]()
    extra_n = Counter[str]()
    lines: list[str] = []
    for key in common:
        found, extra = match(a[key], b[key], args.slack)
        for lab in a[key]:
            must[lab["rule"]] += 1
        for lab in found:
            hit[lab["rule"]] += 1
        for lab in extra:
            extra_n[lab["rule"]] += 1
        if args.list:
            got = {id(x) for x in found}
            lines += [f"ONLY-A {key[0]} [{key[1]}] {x['path']}:{x['line']} {x['rule']} -- "
                      f"{x['why']}" for x in a[key] if id(x) not in got]
            lines += [f"ONLY-B {key[0]} [{key[1]}] {x['path']}:{x['line']} {x['rule']} -- "
                      f"{x['why']}" for x in extra]
    print(f"{len(common)} programs labelled by both ({len(set(a) ^ set(b))} by one only)")
    print(f"{'rule':6} {'A must':>6} {'B must':>6} {'both':>5} {'P(B|A)':>7} {'R(B|A)':>7}")
    by_rule: defaultdict[str, int] = defaultdict(int)
    for rule in sorted(set(must) | set(extra_n)):
        by_rule[rule] = hit[rule] + extra_n[rule]
        p = hit[rule] / by_rule[rule] if by_rule[rule] else float("nan")
        r = hit[rule] / must[rule] if must[rule] else float("nan")
        print(f"{rule:6} {must[rule]:6} {by_rule[rule]:6} {hit[rule]:5} {p:7.3f} {r:7.3f}")
    tm, tb, th = sum(must.values()), sum(by_rule.values()), sum(hit.values())
    print(f"{'total':6} {tm:6} {tb:6} {th:5} {th / tb:7.3f} {th / tm:7.3f}")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
