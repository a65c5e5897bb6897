"""How fast is ``pitstop lint``? Lint the installed ``torch`` package (about 2,300 files)
and compare, in the same run, with

- a bare ``ast.parse`` of every file, single-threaded (the floor of any AST linter), and
- TorchFix (``torchfix --select ALL``), when it is installed: by default on a sample of
  files (it needs minutes for the whole package), with ``--torchfix-all`` on every file.

Every tool runs as a real subprocess on the same files; the times are wall-clock seconds
including interpreter start-up. Prints a table and the ratios; ``--json FILE`` writes them.

    .venv/bin/python benchmarks/bench_lint_torch.py [--torchfix-sample 200 | --torchfix-all]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")  # does not import torch
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def time_parse(files: list[Path]) -> tuple[float, float]:
    """Wall and CPU seconds of a bare single-threaded ast.parse of every file."""
    start, cpu0 = time.perf_counter(), time.process_time()
    for p in files:
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(p.read_bytes())
    return time.perf_counter() - start, time.process_time() - cpu0


def time_pitstop(target: list[str]) -> tuple[float, dict[str, object]]:
    cmd = [sys.executable, "-m", "pitstop", "lint", *target, "--format", "json",
           "--no-gitignore"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 1, 2):
        sys.exit(f"pitstop lint failed ({r.returncode}):\n{r.stderr[-2000:]}")
    findings = json.loads(r.stdout or "[]")
    diags = [ln for ln in r.stderr.splitlines() if ": error: " in ln or ": internal error: " in ln]
    return wall, {"findings": len(findings), "diagnostics": diags, "cpu_s": round(cpu, 2),
                  "internal_errors": [d for d in diags if "internal error" in d]}


def time_torchfix(target: list[str]) -> tuple[float, int]:
    exe = shutil.which("torchfix") or str(Path(sys.executable).with_name("torchfix"))
    start = time.perf_counter()
    r = subprocess.run([exe, "--select", "ALL", *target], capture_output=True, text=True)
    wall = time.perf_counter() - start
    return wall, sum(1 for ln in r.stdout.splitlines() if ": TOR" in ln)


def sample_dir(files: list[Path], root: Path, n: int) -> tuple[Path, list[Path]]:
    """Every k-th file copied into a temporary tree (same relative paths)."""
    step = max(1, len(files) // n)
    chosen = files[::step][:n]
    tmp = Path(tempfile.mkdtemp(prefix="pitstop-bench-"))
    for p in chosen:
        dest = tmp / p.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
    return tmp, chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torchfix-sample", type=int, default=200,
                    help="files for the side-by-side run with TorchFix (default 200)")
    ap.add_argument("--torchfix-all", action="store_true",
                    help="run TorchFix on every file too (about 12 minutes on 2 cores)")
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args(argv)

    root = torch_dir()
    files = py_files(root)
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    print(f"torch package: {root} ({len(files)} .py files, {size_mb:.1f} MB); {cpus} CPUs usable")
    out: dict[str, object] = {"files": len(files), "megabytes": round(size_mb, 1), "cpus": cpus}

    try:
        load = os.getloadavg()[0]
        print(f"load average now: {load:.2f} (other jobs share the CPUs: wall times grow with it)")
    except OSError:
        pass
    parse_s, parse_cpu = time_parse(files)
    print(f"{'bare ast.parse, 1 thread':34s} {parse_s:8.2f} s wall {parse_cpu:8.2f} s CPU")
    lint_s, info = time_pitstop([str(root)])
    print(f"{'pitstop lint (all cores)':34s} {lint_s:8.2f} s wall {info['cpu_s']:8.2f} s CPU   "
          f"{info['findings']} findings, "
          f"{len(info['diagnostics'])} files not parsed, "  # type: ignore[arg-type]
          f"{len(info['internal_errors'])} internal errors")  # type: ignore[arg-type]
    for d in info["diagnostics"]:  # type: ignore[attr-defined]
        print(f"    {d}")
    print(f"    pitstop lint / bare parse = {lint_s / parse_s:.2f}x wall, "
          f"{float(info['cpu_s']) / parse_cpu:.2f}x CPU")  # type: ignore[arg-type]
    out.update(parse_s=round(parse_s, 3), parse_cpu_s=round(parse_cpu, 3),
               pitstop_s=round(lint_s, 3), pitstop=info)

    have_torchfix = shutil.which("torchfix") or Path(sys.executable).with_name("torchfix").exists()
    if args.no_torchfix or not have_torchfix:
        print("TorchFix: not run" + ("" if args.no_torchfix else
                                     " (not installed: pip install torchfix)"))
    elif args.torchfix_all:
        tf_s, tf_n = time_torchfix([str(root)])
        print(f"{'TorchFix --select ALL (all files)':34s} {tf_s:8.2f} s   {tf_n} findings")
        print(f"    TorchFix / pitstop lint = {tf_s / lint_s:.1f}x")
        out.update(torchfix_s=round(tf_s, 3), torchfix_findings=tf_n, torchfix_files=len(files))
    else:
        tmp, chosen = sample_dir(files, root, args.torchfix_sample)
        try:
            p_s, p_info = time_pitstop([str(tmp)])
            tf_s, tf_n = time_torchfix([str(tmp)])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"sample of {len(chosen)} files (every {max(1, len(files) // len(chosen))}th):")
        print(f"{'  pitstop lint':34s} {p_s:8.2f} s   {p_info['findings']} findings")
        print(f"{'  TorchFix --select ALL':34s} {tf_s:8.2f} s   {tf_n} findings")
        print(f"    TorchFix / pitstop lint = {tf_s / p_s:.1f}x on the same {len(chosen)} files")
        out.update(sample_files=len(chosen), sample_pitstop_s=round(p_s, 3),
                   sample_torchfix_s=round(tf_s, 3), sample_torchfix_findings=tf_n)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 1 if info["internal_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
