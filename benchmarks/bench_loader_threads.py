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
  naive loader               no workers, torch's default threads (rung 0, for reference)
  workers, threads=default   W workers, torch's default thread count
  workers, threads=C-W       W workers, one intra-op thread per CPU they leave free
                             (pitstop.train.loader's settings["torch_threads"])

    .venv/bin/python benchmarks/bench_loader_threads.py            # ~1-2 minutes
    .venv/bin/python benchmarks/bench_loader_threads.py --rounds 3 --steps 6   # ~30 s
    .venv/bin/python benchmarks/bench_loader_threads.py --top   # the ladder's top rung instead
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
from pitstop.bench.ladder import Knobs, Trainer, Workload, probe_context
from pitstop.bench.measure import Plan
from pitstop.bench.model import spec_for
from pitstop.bench.transforms import TrainTransform
from pitstop.train.loader import usable_cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round and config")
    parser.add_argument("--top", action="store_true",
                        help="the top of the CPU ladder (+ no per-step sync, bf16 where the CPU "
                             "has it, channels_last) instead of rung 1's fp32 loop")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()

    device = torch.device("cpu")
    spec = spec_for("small", device)
    source = open_data(None, SyntheticSpec(num_images=1024))
    dataset = ImageDataset(source.items, TrainTransform(spec.image_size))
    # Each configuration keeps one trainer and one loader for all its rounds (sized so
    # that it never runs dry); only the thread count differs between the two with workers.
    plan = Plan(warmup=3, steps=args.steps, repeats=args.rounds + 1)
    workload = Workload(device=device, dataset=dataset, model_spec=spec,
                        num_classes=source.num_classes, batch_size=spec.batch_size, plan=plan)
    extra: dict[str, bool] = {}
    if args.top:
        extra = {"no_sync": True, "channels_last": True,
                 "mixed_precision": probe_context(device, quick=True).auto_precision != "fp32"}
    cpus, _why = usable_cpus()
    default_threads = torch.get_num_threads()
    trainers = {"naive loader": Trainer(workload, Knobs(**extra)),
                "workers, threads=default": Trainer(workload, Knobs(workers=True, **extra)),
                "workers, threads=C-W": Trainer(workload, Knobs(workers=True, **extra))}
    for trainer in trainers.values():
        trainer.run(1, lambda: None)  # builds the loader, starts its workers
    workers = int(trainers["workers, threads=C-W"].applied["num_workers"])
    threads = {"naive loader": default_threads, "workers, threads=default": default_threads,
               "workers, threads=C-W": max(1, cpus - workers)}
    console = Console()
    console.print(f"{cpus} usable CPUs, {workers} DataLoader worker(s), torch default "
                  f"{default_threads} intra-op threads, knobs "
                  f"{trainers['workers, threads=C-W'].knobs.active()}; "
                  f"load average {os.getloadavg()[0]:.2f}")
    names = list(trainers)
    rates: dict[str, list[float]] = {name: [] for name in names}
    load_start = os.getloadavg()[0]

    def timed(name: str, steps: int) -> float:
        trainer = trainers[name]
        # The bench's Trainer applies the loader's recommendation itself; here each
        # configuration states its thread count explicitly.
        trainer.threads = None
        torch.set_num_threads(threads[name])
        try:
            t0 = time.perf_counter()
            samples = trainer.run(steps, lambda: None)
            return samples / (time.perf_counter() - t0)
        finally:
            torch.set_num_threads(default_threads)

    for name in names:
        timed(name, 2)  # warm-up
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            rates[name].append(timed(name, args.steps))
    for trainer in trainers.values():
        trainer.close()

    table = Table(title="intra-op threads beside DataLoader workers (CPU); samples/s: median; "
                        "ratio: vs workers, threads=default")
    for col in ("configuration", "workers", "threads", "samples/s", "min-max", "ratio"):
        table.add_column(col, justify="left" if col == "configuration" else "right",
                         no_wrap=col != "configuration")
    base = statistics.median(rates["workers, threads=default"])
    result: dict[str, Any] = {"cpus": cpus, "workers": workers, "rounds": args.rounds,
                              "steps": args.steps, "top": args.top, "configs": {},
                              "load_average_start": load_start}
    for name in names:
        med = statistics.median(rates[name])
        table.add_row(name, "0" if name == "naive loader" else str(workers), str(threads[name]),
                      f"{med:.1f}", f"{min(rates[name]):.1f}-{max(rates[name]):.1f}",
                      f"{med / base:.2f}x")
        result["configs"][name] = {"threads": threads[name], "median": med,
                                   "rates": [round(x, 2) for x in rates[name]]}
    console.print(table)
    ratio = statistics.median(rates["workers, threads=C-W"]) / base
    result["ratio"] = ratio
    result["load_average_end"] = os.getloadavg()[0]
    console.print(f"threads=C-W / threads=default: {ratio:.2f}x  (1-minute load average "
                  f"{load_start:.2f} -> {result['load_average_end']:.2f})")
    if args.json:
        from pitstop.fileio import atomic_write_json

        atomic_write_json(args.json, result)


if __name__ == "__main__":
    main()
