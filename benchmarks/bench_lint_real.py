"""How much of what an expert flags in real training programs does ``pitstop lint`` find?

Scores ``pitstop lint`` against hand-written labels of public training programs
(``benchmarks/lint_real/labels/<labeller>/OWNER__NAME.json``, format in
``benchmarks/lint_real/README.md``). For every labelled program it copies the program's
files out of a bare git mirror at the pinned commit (``git show COMMIT:PATH``; nothing is
checked out, nothing third-party enters this repository) into a temporary folder, keeping
their paths, lints them as ONE invocation (``python -m pitstop lint --format json f1 f2
...``, a real subprocess, as a user would run it), and matches the findings with the
"must" labels:

- per-place rules: same file, same rule, and the finding's reported line range
  (``line``..``end_line``) covers the label's line; each finding matches one label;
- program-level rules (LT005, LT006, LT010, LT011): per program -- a must label is found
  when the program has a finding of that rule anywhere;
- every finding on a file of a labelled program that matches no must label is a false
  alarm (whether or not an ``ok`` label marks the place; those are printed as such).

Prints per-rule and total precision/recall, every miss and every false alarm.

    .venv/bin/python benchmarks/bench_lint_real.py /work/.mirror [--labels DIR] [--labeller L1]
        [--json OUT] [--repo OWNER/NAME] [--program NAME]

MIRROR_ROOT holds ``OWNER+NAME/repo`` bare git directories (what the ``fetch`` tool makes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_LABELS = HERE / "lint_real" / "labels"
PROGRAM_RULES = frozenset({"LT005", "LT006", "LT010", "LT011"})


@dataclass(frozen=True)
class Label:
    labeller: str
    repo: str
    program: str
    path: str
    line: int
    rule: str
    verdict: str
    why: str


@dataclass
class Program:
    labeller: str
    repo: str
    commit: str
    name: str
    files: list[str]
    device: str
    labels: list[Label] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.labeller}:{self.repo}:{self.name}"


@dataclass
class Outcome:
    program: Program
    findings: list[dict[str, object]]
    errors: list[str]
    seconds: float
    tp: list[tuple[Label, dict[str, object]]] = field(default_factory=list)
    misses: list[Label] = field(default_factory=list)
    false_alarms: list[tuple[dict[str, object], Label | None]] = field(default_factory=list)


def load_programs(labels_dir: Path, only_labeller: str | None = None) -> list[Program]:
    programs: list[Program] = []
    for path in sorted(labels_dir.rglob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or "programs" not in doc:
            continue
        labeller = str(doc.get("labeller") or path.parent.name)
        if only_labeller and labeller != only_labeller and path.parent.name != only_labeller:
            continue
        for p in doc["programs"]:
            prog = Program(labeller, doc["repo"], doc["commit"], p["name"], list(p["files"]),
                           p.get("device", "gpu"))
            for lab in p.get("labels", []):
                prog.labels.append(Label(labeller, doc["repo"], p["name"], lab["path"],
                                         int(lab["line"]), lab["rule"], lab["verdict"],
                                         lab.get("why", "")))
            programs.append(prog)
    return programs


def mirror_dir(root: Path, repo: str) -> Path:
    owner, name = repo.split("/", 1)
    base = root / f"{owner}+{name}"
    repo = base / "repo" if (base / "repo").exists() else base
    # (a mirror that is a clone with a work tree keeps its git directory in .git)
    return repo / ".git" if (repo / ".git").is_dir() else repo


def materialize(prog: Program, mirror_root: Path, dest: Path, *, tree: bool = False) -> list[Path]:
    """Copy the program's files at the pinned commit into ``dest`` (paths kept); with
    ``tree``, every other ``.py`` file of the commit too, as they lie around the program in
    the user's checkout (packages' ``__init__`` files the labels leave out, modules found
    beside the script). Only the program's files are named to ``pitstop lint``."""
    git_dir = mirror_dir(mirror_root, prog.repo)
    if tree:
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", prog.commit,
                                  "--", "*.py"], capture_output=True)
        if archive.returncode == 0:
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout,
                           capture_output=True)
    out = []
    for rel in prog.files:
        data = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{prog.commit}:{rel}"],
                              capture_output=True, check=True).stdout
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        out.append(target)
    return out


def run_lint(files: list[Path], cwd: Path, extra: list[str]) -> tuple[list[dict[str, object]],
                                                                      list[str], float]:
    env = dict(os.environ)
    src = HERE.parent / "src"
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("LOCAL_WORLD_SIZE", "1")
    cmd = [sys.executable, "-m", "pitstop", "lint", "--format", "json", "--no-gitignore",
           *extra, *[str(f.relative_to(cwd)) for f in files]]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    seconds = time.perf_counter() - start
    if r.returncode not in (0, 1):
        return [], [f"pitstop lint exited {r.returncode}: {r.stderr.strip()[-500:]}"], seconds
    entries = json.loads(r.stdout or "[]")
    findings = [e for e in entries if e.get("code")]
    errors = [f"{e.get('path')}: {e.get('message')}" for e in entries if not e.get("code")]
    errors += [ln for ln in r.stderr.splitlines() if ": error: " in ln or "internal error" in ln]
    return findings, sorted(set(errors)), seconds


def score(prog: Program, findings: list[dict[str, object]]) -> Outcome:
    out = Outcome(prog, findings, [], 0.0)
    files = set(prog.files)
    musts = [lab for lab in prog.labels if lab.verdict == "must"]
    oks = [lab for lab in prog.labels if lab.verdict != "must"]
    mine = [f for f in findings if f["path"] in files]
    used: set[int] = set()
    # program-level rules: one per program
    for rule in sorted(PROGRAM_RULES):
        want = [lab for lab in musts if lab.rule == rule]
        got = [f for f in mine if f["code"] == rule]
        if want and got:
            out.tp.append((want[0], got[0]))
        elif want:
            out.misses.append(want[0])
        for f in got[1 if want else 0:]:
            if want:
                used.add(id(f))  # extra findings of a matched program rule: not counted twice
            else:
                out.false_alarms.append((f, next((o for o in oks if o.rule == rule), None)))
        for f in got[:1]:
            used.add(id(f))
    # per-place rules
    for lab in sorted((m for m in musts if m.rule not in PROGRAM_RULES),
                      key=lambda m: (m.path, m.line, m.rule)):
        match = None
        for f in mine:
            if id(f) in used or f["code"] != lab.rule or f["path"] != lab.path:
                continue
            start = int(f["line"])  # type: ignore[call-overload]
            end = int(f.get("end_line") or start)  # type: ignore[call-overload]
            if start <= lab.line <= max(start, end):
                match = f
                break
        if match is None:
            out.misses.append(lab)
        else:
            used.add(id(match))
            out.tp.append((lab, match))
    for f in mine:
        if id(f) in used:
            continue
        ok = next((o for o in oks if o.rule == f["code"] and o.path == f["path"]
                   and int(f["line"]) <= o.line <= int(f.get("end_line") or f["line"])),  # type: ignore[call-overload]
                  None)
        out.false_alarms.append((f, ok))
    return out


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "  -  "


def report(outcomes: list[Outcome], title: str) -> dict[str, object]:
    tp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    for o in outcomes:
        for lab, _ in o.tp:
            tp[lab.rule] += 1
        for lab in o.misses:
            fn[lab.rule] += 1
        for f, _ in o.false_alarms:
            fp[str(f["code"])] += 1
    rules = sorted(set(tp) | set(fn) | set(fp))
    print(f"\n== {title}: {len(outcomes)} programs, "
          f"{len({o.program.repo for o in outcomes})} repositories, "
          f"{sum(len(o.program.files) for o in outcomes)} files")
    print(f"{'rule':6s} {'must':>5s} {'found':>5s} {'missed':>6s} {'false':>5s} "
          f"{'precision':>9s} {'recall':>7s}")
    per_rule = {}
    for r in rules:
        must = tp[r] + fn[r]
        print(f"{r:6s} {must:5d} {tp[r]:5d} {fn[r]:6d} {fp[r]:5d} "
              f"{_ratio(tp[r], tp[r] + fp[r]):>9s} {_ratio(tp[r], must):>7s}")
        per_rule[r] = {"must": must, "tp": tp[r], "fn": fn[r], "fp": fp[r]}
    T, N, P = sum(tp.values()), sum(fn.values()), sum(fp.values())
    print(f"{'total':6s} {T + N:5d} {T:5d} {N:6d} {P:5d} {_ratio(T, T + P):>9s} {_ratio(T, T + N):>7s}")
    # Strict precision counts every finding no must label matches; labellers also leave
    # out places they were unsure of, so the lenient figure counts only the findings an
    # `ok` label contradicts.
    contradicted = sum(1 for o in outcomes for _, ok in o.false_alarms if ok is not None)
    print(f"lenient precision (false only where an `ok` label says so: {contradicted}): "
          f"{_ratio(T, T + contradicted)}")
    return {"programs": len(outcomes), "rules": per_rule, "tp": T, "fn": N, "fp": P,
            "fp_on_ok_labels": contradicted,
            "precision": round(T / (T + P), 4) if T + P else None,
            "precision_lenient": round(T / (T + contradicted), 4) if T + contradicted else None,
            "recall": round(T / (T + N), 4) if T + N else None}


def print_details(outcomes: list[Outcome]) -> None:
    print("\n-- misses (must labels without a finding)")
    for o in outcomes:
        for lab in o.misses:
            print(f"MISS {lab.labeller} {lab.repo} [{lab.program}] {lab.path}:{lab.line} "
                  f"{lab.rule}  -- {lab.why}")
    print("\n-- false alarms (findings that match no must label)")
    for o in outcomes:
        for f, ok in o.false_alarms:
            tag = f" (an `ok` label says: {ok.why})" if ok else ""
            print(f"FALSE {o.program.labeller} {o.program.repo} [{o.program.name}] "
                  f"{f['path']}:{f['line']} {f['code']}{tag}  -- {str(f['message'])[:160]}")
    errs = [(o, e) for o in outcomes for e in o.errors]
    if errs:
        print("\n-- files pitstop could not check")
        for o, e in errs:
            print(f"ERROR {o.program.repo} [{o.program.name}] {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirror_root", type=Path, help="folder of OWNER+NAME/repo bare git dirs")
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    ap.add_argument("--labeller", help="score only this labeller's set (default: each, then all)")
    ap.add_argument("--repo", help="only this OWNER/NAME")
    ap.add_argument("--program", help="only programs with this name")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--lint-arg", action="append", default=[],
                    help="extra argument for pitstop lint (repeatable)")
    ap.add_argument("--quiet", action="store_true", help="no miss / false-alarm lists")
    ap.add_argument("--tree", action="store_true",
                    help="lay every other .py file of the commit around the program's "
                    "files, as in the user's checkout (only the program's files are linted)")
    ap.add_argument("--findings", type=Path,
                    help="write every finding here (one JSON line each, paths relative to "
                    "the program): to check that a change leaves every result the same")
    args = ap.parse_args(argv)

    if not args.labels.is_dir():
        ap.error(f"--labels {args.labels}: no such folder")
    if not args.mirror_root.is_dir():
        ap.error(f"{args.mirror_root}: no such folder")
    programs = load_programs(args.labels, args.labeller)
    if args.repo:
        programs = [p for p in programs if p.repo == args.repo]
    if args.program:
        programs = [p for p in programs if p.name == args.program]
    if not programs:
        ap.error("no labelled programs found")
    try:
        load = os.getloadavg()
        print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    outcomes: list[Outcome] = []
    tmp = Path(tempfile.mkdtemp(prefix="pitstop-lint-real-"))
    try:
        for i, prog in enumerate(programs):
            dest = tmp / f"p{i:03d}"
            try:
                files = materialize(prog, args.mirror_root, dest, tree=args.tree)
            except subprocess.CalledProcessError as err:
                print(f"SKIP {prog.key}: cannot read from the mirror "
                      f"({err.stderr.decode(errors='replace').strip()[:200]})")
                continue
            findings, errors, seconds = run_lint(files, dest, args.lint_arg)
            o = score(prog, findings)
            o.errors, o.seconds = errors, seconds
            outcomes.append(o)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures: dict[str, object] = {}
    by_labeller: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_labeller[o.program.labeller].append(o)
    if not args.quiet:
        print_details(outcomes)
    for labeller, outs in sorted(by_labeller.items()):
        figures[labeller] = report(outs, f"labeller {labeller}")
    if len(by_labeller) > 1:
        figures["all"] = report(outcomes, "all labellers")
    print(f"\nlint time: {sum(o.seconds for o in outcomes):.1f} s over {len(outcomes)} "
          "invocations")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if args.findings:
        lines = sorted(json.dumps({"program": o.program.key, **f}, sort_keys=True)
                       for o in outcomes for f in o.findings)
        args.findings.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
