"""How much time does pitstop.train.TrainStep add to a plain hand-written training step?

Both run the example model (examples/example_model.py, SmallResNet) on the same
fixed batch on CPU, in this one process, interleaved round by round (the order
alternates) so that drifting machine load hits both alike. Each row compares
TrainStep with the hand-written loop that does the same work (same precision, same
micro-batch split) and prints the ratio of median step times.

    .venv/bin/python benchmarks/bench_trainstep_overhead.py            # ~2-3 minutes
    .venv/bin/python benchmarks/bench_trainstep_overhead.py --quick    # ~20 s
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from example_model import IMAGE_SHAPE, NUM_CLASSES, SmallResNet

from pitstop.train import TrainStep
from pitstop.train.precision import choose_precision


def hand_written(model: torch.nn.Module, opt: torch.optim.Optimizer, precision: str,
                 accumulate: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loop a careful user writes by hand (nanoGPT style)."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if accumulate == 1:  # the plainest loop there is
            if precision == "fp32":
                loss = F.cross_entropy(model(x), y)
            else:
                with torch.autocast("cpu", dtype=dtype):
                    loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()
        total = torch.zeros(())
        for xs, ys in zip(x.chunk(accumulate), y.chunk(accumulate), strict=True):
            # No autocast context at all for fp32 (as TrainStep): a disabled one still
            # costs a few microseconds per micro-step.
            with (torch.autocast("cpu", dtype=dtype) if precision != "fp32"
                  else contextlib.nullcontext()):
                loss = F.cross_entropy(model(xs), ys) / accumulate
            loss.backward()
            total += loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total

    return step


def time_steps(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor,
               y: torch.Tensor, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        fn(x, y)
    return (time.perf_counter() - start) / steps


def tiny_model() -> torch.nn.Module:
    """A model whose step is ~0.1 ms, so TrainStep's fixed per-call cost is not hidden."""
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, NUM_CLASSES))


def compare(precision: str, accumulate: int, *, batch: int, rounds: int, steps: int,
            progress: Progress, make_model: Callable[[], torch.nn.Module] = SmallResNet,
            label: str = "SmallResNet") -> dict[str, float | str | int]:
    torch.manual_seed(0)
    base = make_model()
    models = [copy.deepcopy(base), copy.deepcopy(base)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]
    plain = hand_written(models[0], opts[0], precision, accumulate)
    pitstop = TrainStep(models[1], opts[1], precision=precision, accumulate=accumulate)  # type: ignore[arg-type]
    x = torch.randn(batch, *IMAGE_SHAPE)
    y = torch.randint(0, NUM_CLASSES, (batch,))
    for fn in (plain, pitstop, plain, pitstop):  # warm-up: allocator, oneDNN primitives
        time_steps(fn, x, y, 2)
    t_plain: list[float] = []
    t_pit: list[float] = []
    task = progress.add_task(f"{label}: {precision}, accumulate={accumulate}", total=rounds)
    for r in range(rounds):
        order: list[tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], list[float]]] = [
            (plain, t_plain), (pitstop, t_pit)]
        if r % 2:
            order.reverse()
        for fn, sink in order:
            sink.append(time_steps(fn, x, y, steps))
        progress.advance(task)
    med_plain, med_pit = statistics.median(t_plain), statistics.median(t_pit)
    paired = statistics.median(b / a for a, b in zip(t_plain, t_pit, strict=True))
    return {"model": label, "precision": precision, "accumulate": accumulate, "batch": batch,
            "plain_ms": med_plain * 1e3, "trainstep_ms": med_pit * 1e3,
            "ratio": med_pit / med_plain, "paired_ratio": paired,
            "min_ratio": min(t_pit) / min(t_plain),
            "added_us_min": (min(t_pit) - min(t_plain)) * 1e6,
            "added_us_median": (med_pit - med_plain) * 1e6,
            "spread_pct": 100 * (max(t_plain) - min(t_plain)) / med_plain}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--steps", type=int, default=2,
                        help="steps per timed round (short rounds: load drift hits both sides alike)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: less noise from other load)")
    parser.add_argument("--quick", action="store_true", help="11 rounds of 1 step")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 11, 1
    torch.set_num_threads(args.threads)

    cases = [("fp32", 1), ("fp32", 4)]
    if choose_precision(torch.device("cpu")).precision == "bf16":
        cases.insert(1, ("bf16", 1))
    console = Console()
    results = []
    fixed = []
    with Progress(console=console, transient=True) as progress:
        for precision, accumulate in cases:
            results.append(compare(precision, accumulate, batch=args.batch, rounds=args.rounds,
                                   steps=args.steps, progress=progress))
        for precision, accumulate in cases:
            fixed.append(compare(precision, accumulate, batch=8, rounds=args.rounds,
                                 steps=40 * args.steps, progress=progress, make_model=tiny_model,
                                 label="tiny linear"))

    # Short headers and rows that never wrap: the tables stay readable at 80 columns.
    table = Table(title=f"1. TrainStep vs a hand-written step: SmallResNet, batch {args.batch}, "
                        f"CPU, {args.threads} thread(s), {args.rounds} rounds x {args.steps} steps",
                  box=box.SIMPLE_HEAD)
    for col in ("prec", "acc", "hand\nms", "pitstop\nms", "ratio", "paired", "best/\nbest",
                "over-\nhead", "spread"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in results:
        table.add_row(str(r["precision"]), str(r["accumulate"]), f"{r['plain_ms']:.1f}",
                      f"{r['trainstep_ms']:.1f}", f"{r['ratio']:.3f}", f"{r['paired_ratio']:.3f}",
                      f"{r['min_ratio']:.3f}", f"{100 * (float(r['paired_ratio']) - 1):+.2f}%",
                      f"{r['spread_pct']:.0f}%")
    console.print(table)
    console.print("prec = precision, acc = accumulate (micro-batches per step). hand ms / "
                  "pitstop ms: median time per step of the hand-written loop and of "
                  "TrainStep. ratio = their quotient; paired = median of per-round ratios (robust "
                  "to load drift; 'overhead' is paired - 1); best/best = fastest round over fastest "
                  "round; spread = (slowest - fastest) / median round of the hand-written loop.")

    table2 = Table(title="2. TrainStep's fixed cost per call, resolved on a tiny model "
                         "(Flatten+Linear, batch 8), as a share of the SmallResNet step",
                   box=box.SIMPLE_HEAD)
    for col in ("prec", "acc", "hand\nµs", "pitstop\nµs", "added µs\n(fastest)",
                "added µs\n(median)", "share of\nstep"):
        table2.add_column(col, justify="right", no_wrap=True)
    for f, r in zip(fixed, results, strict=True):
        # The larger of the two estimates: the conservative one.
        added = max(float(f["added_us_min"]), float(f["added_us_median"]))
        share = 100 * added / (1000 * float(r["plain_ms"]))
        f["share_of_example_step_pct"] = share
        table2.add_row(str(f["precision"]), str(f["accumulate"]), f"{1000 * float(f['plain_ms']):.1f}",
                       f"{1000 * float(f['trainstep_ms']):.1f}", f"{float(f['added_us_min']):+.1f}",
                       f"{float(f['added_us_median']):+.1f}", f"{share:+.3f}%")
    console.print(table2)
    worst_direct = max(100 * (float(r["paired_ratio"]) - 1) for r in results)
    worst_share = max(float(f["share_of_example_step_pct"]) for f in fixed)
    spread = max(float(r["spread_pct"]) for r in results)
    console.print(f"Target: TrainStep adds < 2 % to the example model's step. Direct: worst paired "
                  f"overhead {worst_direct:+.2f} % (run-to-run spread up to {spread:.0f} %: "
                  f"differences below that are noise). Fixed cost (larger of the two estimates): "
                  f"at most {worst_share:+.3f} % of a SmallResNet step.")
    results = results + fixed
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
