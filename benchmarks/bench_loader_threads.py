"""On a CPU, should the training process use fewer intra-op threads once DataLoader
workers take some of the cores?

`pitstop bench`'s rung 1 (workers) on a 2-core machine gives the loader 1 worker
process while torch keeps 2 intra-op threads in the training process: 3 busy
threads on 2 cores. This benchmark measures the bench's own workload (synthetic
JPEGs decoded and augmented in the workers, the "small" CNN, loss read every step
as in rung 1) with the same loader, in this one process, in interleaved rounds
(the order alternates each round so drifting machine load hits every configuration
alike), and prints the median samples/s of each configuration and the ratio.

Configurations (W = the worker count pitstop.train.loader chooses here, C = usable CPUs):
  threads=C      torch's default thread count (what rung 1 measured before)
  threads=C-W    one intra-op thread per CPU the workers leave free
                 (pitstop.train.loader's settings["torch_threads"])

    .venv/bin/python benchmarks/bench_loader_threads.py            # ~1-2 minutes
    .venv/bin/python benchmarks/bench_loader_threads.py --rounds 3 --steps 6   # ~30 s
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from pitstop.bench.dataset import ImageDataset, SyntheticSpec, open_data
from pitstop.bench.ladder import Knobs, Trainer, Workload
from pitstop.bench.measure import Plan
from pitstop.bench.model import spec_for
from pitstop.bench.transforms import TrainTransform
from pitstop.train.loader import usable_cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round and config")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()

    device = torch.device("cpu")
    spec = spec_for("small", device)
    source = open_data(None, SyntheticSpec(num_images=1024))
    dataset = ImageDataset(source.items, TrainTransform(spec.image_size))
    # One trainer and one loader serve every configuration (only the thread count changes);
    # the loader is sized for all rounds of both so that it never runs dry.
    plan = Plan(warmup=3, steps=args.steps, repeats=2 * args.rounds)
    workload = Workload(device=device, dataset=dataset, model_spec=spec,
                        num_classes=source.num_classes, batch_size=spec.batch_size, plan=plan)
    trainer = Trainer(workload, Knobs(workers=True))
    cpus, _why = usable_cpus()
    default_threads = torch.get_num_threads()
    trainer.run(1, lambda: None)  # starts the loader's workers
    workers = int(trainer.applied["num_workers"])
    threads = {"threads=default": default_threads,
               "threads=C-W": max(1, cpus - workers)}
    console = Console()
    console.print(f"{cpus} usable CPUs, {workers} DataLoader worker(s), torch default "
                  f"{default_threads} intra-op threads; load average {os.getloadavg()[0]:.2f}")
    rates: dict[str, list[float]] = {name: [] for name in threads}
    names = list(threads)
    for name in names:  # warm-up for both thread counts
        torch.set_num_threads(threads[name])
        trainer.run(1, lambda: None)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            torch.set_num_threads(threads[name])
            t0 = time.perf_counter()
            samples = trainer.run(args.steps, lambda: None)
            rates[name].append(samples / (time.perf_counter() - t0))
    torch.set_num_threads(default_threads)
    trainer.close()

    table = Table(title="rung 1 (workers) on CPU: intra-op threads in the training process")
    for col in ("configuration", "intra-op threads", "samples/s median", "min-max", "ratio"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    base = statistics.median(rates[names[0]])
    result: dict[str, Any] = {"cpus": cpus, "workers": workers, "rounds": args.rounds,
                              "steps": args.steps, "configs": {}}
    for name in names:
        med = statistics.median(rates[name])
        table.add_row(name, str(threads[name]), f"{med:.1f}",
                      f"{min(rates[name]):.1f}-{max(rates[name]):.1f}", f"{med / base:.2f}x")
        result["configs"][name] = {"threads": threads[name], "median": med,
                                   "rates": [round(x, 2) for x in rates[name]]}
    console.print(table)
    ratio = statistics.median(rates[names[1]]) / base
    result["ratio"] = ratio
    result["load_average_end"] = os.getloadavg()[0]
    console.print(f"threads=C-W / threads=default: {ratio:.2f}x  "
                  f"(load average {os.getloadavg()[0]:.2f})")
    if args.json:
        from pitstop.fileio import atomic_write_json

        atomic_write_json(args.json, result)


if __name__ == "__main__":
    main()
