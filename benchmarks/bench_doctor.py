"""How long `pitstop doctor` takes next to `python -m torch.utils.collect_env`.

    python benchmarks/bench_doctor.py [--repeats 7] [--json OUT]

All run as fresh subprocesses of the same interpreter, interleaved (doctor with its
table, doctor --json, collect_env, doctor, ...) so that background load hits both alike; one warm-up run of each is not
counted. The warm-up also writes pitstop's .pyc files, as `pip install` does (torch's come
with its install): PYTHONDONTWRITEBYTECODE is removed from the subprocesses'
environment, or every run would compile pitstop from source (~80 ms on a 2-core VM). Prints every wall time, the medians, and the ratio collect_env / doctor (the
slower of the two doctor forms).
collect_env checks far less (versions, and nvidia-smi's GPU list); doctor runs its 48
checks without importing torch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          cwd=REPO)
    return time.perf_counter() - t0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", metavar="OUT", help="also write the timings as JSON")
    args = ap.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    commands = {
        "pitstop doctor": [sys.executable, "-m", "pitstop", "doctor"],  # the rich table
        "pitstop doctor --json": [sys.executable, "-m", "pitstop", "doctor", "--json"],
        "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    codes: dict[str, set[int]] = {name: set() for name in commands}
    for cmd in commands.values():  # warm-up: page cache, .pyc files
        timed(cmd, env)
    for _ in range(args.repeats):
        for name, cmd in commands.items():
            seconds, rc = timed(cmd, env)
            times[name].append(seconds)
            codes[name].add(rc)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{'command':<36} {'median s':>9}  runs (s)  [exit codes]")
    for name, ts in times.items():
        runs = " ".join(f"{t:.3f}" for t in ts)
        print(f"{name:<36} {medians[name]:>9.3f}  {runs}  {sorted(codes[name])}")
    doctor = max(medians["pitstop doctor"], medians["pitstop doctor --json"])
    collect = medians["python -m torch.utils.collect_env"]
    ratio = collect / doctor if doctor else float("nan")
    print(f"\ncollect_env / doctor = {ratio:.1f}x  (slower doctor median {doctor * 1000:.0f} ms, "
          f"{args.repeats} interleaved runs each, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    if args.json:
        sys.path.insert(0, str(REPO / "src"))
        from pitstop.fileio import atomic_write_json

        atomic_write_json(args.json, {"times_s": times, "median_s": medians, "ratio": ratio})
    return 0


if __name__ == "__main__":
    sys.exit(main())
