"""Does ``pitstop lint`` cost time linear in the size of a file?

Generates single files of N small training functions (each builds a DataLoader, moves
batches to the device, steps an optimizer and prints ``loss.item()``: every function is
a hot loop with findings), 3,200 functions per megabyte, and lints each with the real
command (``python -m pitstop lint FILE --format json``, one subprocess per size). Prints
wall time, CPU time and peak memory against size, and the time per megabyte, which stays
flat when the cost is linear.

    .venv/bin/python benchmarks/bench_lint_scaling.py [--sizes 0.25,0.5,1,2,4,8,20] [--json OUT]

Targets (issue 10): 1 MB (3,200 functions) in 3 s or less; 20 MB in 60 s or less with at
most 1 GB of memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = ("import torch\nimport torch.nn.functional as F\n"
          "from torch.utils.data import DataLoader\n\n\n")
FUNCTION = '''def train_{i}(model, ds, opt, device):
    loader = DataLoader(ds, batch_size=32)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{{step}} {{loss.item():.3f}}")


'''
FUNCTIONS_PER_MB = 3200


def generate(path: Path, functions: int) -> int:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(HEADER)
        for i in range(functions):
            fh.write(FUNCTION.format(i=i))
    return path.stat().st_size


def lint(path: Path) -> dict[str, float | int]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent / "src") + os.pathsep + \
        env.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pitstop", "lint", str(path), "--format", "json"],
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        sys.exit(f"pitstop lint failed ({r.returncode}): {r.stderr[-1000:]}")
    findings = json.loads(r.stdout or "[]")
    return {"wall_s": round(wall, 2),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "max_rss_mb": round(after.ru_maxrss / 1024, 1),
            "findings": sum(1 for f in findings if f.get("code"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="0.25,0.5,1,2,4,8,20",
                    help="file sizes in MB, comma-separated")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args(argv)
    sizes = [float(x) for x in args.sizes.split(",") if x.strip()]
    with contextlib.suppress(OSError):
        print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    rows = []
    with tempfile.TemporaryDirectory(prefix="pitstop-scaling-") as tmp:
        print(f"{'functions':>9s} {'MB':>6s} {'wall s':>7s} {'CPU s':>7s} {'s/MB':>6s} "
              f"{'peak MB':>8s} {'findings':>8s}")
        for mb in sizes:
            n = max(1, round(mb * FUNCTIONS_PER_MB))
            path = Path(tmp) / f"gen_{n}.py"
            size = generate(path, n)
            # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run each size in a
            # fresh child of a fresh process so that the peak is this size's own.
            m = json.loads(subprocess.run(
                [sys.executable, __file__, "--_one", str(path)], capture_output=True,
                text=True, check=True).stdout)
            size_mb = size / 1e6
            row = {"functions": n, "megabytes": round(size_mb, 2), **m,
                   "s_per_mb": round(m["cpu_s"] / size_mb, 2)}
            rows.append(row)
            print(f"{n:9d} {size_mb:6.2f} {m['wall_s']:7.2f} {m['cpu_s']:7.2f} "
                  f"{row['s_per_mb']:6.2f} {m['max_rss_mb']:8.1f} {m['findings']:8d}")
            path.unlink()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_one":
        print(json.dumps(lint(Path(sys.argv[2]))))
        raise SystemExit(0)
    raise SystemExit(main())
