"""How much does `pitstop profile`'s instrumentation slow a training step?

Workload: the one `pitstop bench` trains, taken from `pitstop.bench` itself (read
only): its synthetic JPEG cache (~/.cache/pitstop/bench, written on first use), its
decode + random-crop/flip/normalise transform run in 2 DataLoader worker processes, its
ResNet-style model (`small` on CPU: 64 px, batch 32) and its SGD optimizer. In this one
process, blocks of steps run alternately

- plain: no pitstop at all;
- recorder: what `pitstop profile -- python train.py` adds to the training process: the
  hooks (DataLoader wait, optimizer step hooks, backward, module forward hooks,
  collectives) and the thread that samples the main thread's Python stack every 10 ms
  (2-10 ms: it samples faster when the warm-up shows a short window); the 10 Hz machine
  sampler then runs in pitstop's own process, not here;
- recorder+sampler: the same plus the 10 Hz sampler thread inside this process, as the
  `pitstop.profile.profile()` API runs it (the worst case: its reads hold the GIL);

interleaved in short blocks (the order rotating) so that drifting machine load hits
all alike, and the ratios of median step time and of median main-thread CPU time
(instrumented / plain) are printed. The first step of every block is dropped for
every variant (the recorder's first step uses global module hooks to find the
outermost modules; a real run has one such step in its warm-up). The operator probe
(one warm-up step under a counting dispatch mode) and the precision A/B at the end of the
window are not included: they run once, outside the measured steps, by design.

    .venv/bin/python benchmarks/bench_profile_overhead.py            # 150 steps per variant
    .venv/bin/python benchmarks/bench_profile_overhead.py --quick    # 40 steps per variant
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from torch import nn
from torch.utils.data import DataLoader

from pitstop.profile.recorder import Recorder
from pitstop.telemetry.sampler import Sampler, default_readers


def bench_workload(model_size: str, num_workers: int) -> tuple[Any, nn.Module, torch.optim.Optimizer, str]:
    """The ``pitstop bench`` workload on CPU, built from the bench package itself: its
    synthetic JPEG cache (created on first use, reused later), its decode + augment
    transform, its ResNet-style model and its optimizer; a plain DataLoader with
    ``num_workers`` persistent workers (the bench's naive rung has none; workers are what a
    tuned run uses, and the recorder hooks the iterator either way)."""
    from pitstop.bench.dataset import ImageDataset, RepeatedView, SyntheticSpec, open_data
    from pitstop.bench.model import build_model, spec_for
    from pitstop.bench.transforms import TrainTransform

    spec = spec_for(model_size, torch.device("cpu"))
    source = open_data(None, SyntheticSpec(num_images=1024))
    dataset = ImageDataset(source.items, TrainTransform(spec.image_size))
    model = build_model(spec, source.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # as the bench
    loader = DataLoader(RepeatedView(dataset, 10**7), batch_size=spec.batch_size,
                        num_workers=num_workers, persistent_workers=num_workers > 0,
                        prefetch_factor=4 if num_workers else None)
    desc = (f"pitstop bench workload ({spec.name} model, {spec.image_size} px, batch "
            f"{spec.batch_size}, {len(source.items)} cached JPEGs, {num_workers} workers, CPU)")
    return iter(loader), model, opt, desc


def one_step(it: Any, model: nn.Module, opt: torch.optim.Optimizer) -> tuple[float, float]:
    """Wall and main-thread CPU seconds of one step, from the batch request to the update."""
    t, c = time.perf_counter(), time.thread_time()
    x, y = next(it)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return time.perf_counter() - t, time.thread_time() - c


class VariantBlock:
    """A few consecutive steps of one variant; the recorder lives for the whole block."""

    def __init__(self, kind: str, steps: int) -> None:
        self.kind, self.steps = kind, steps

    def run(self, it: Any, model: nn.Module, opt: torch.optim.Optimizer) -> list[tuple[float, float]]:
        rec = smp = None
        if self.kind != "plain":
            rec = Recorder(steps=10**9, warmup=0, capture_path=None, probe=False,
                           precision_ab=False)
            rec.install(torch)
            if self.kind == "recorder+sampler":
                smp = Sampler(default_readers([os.getpid()], gpu=False)[0]).start()
        try:
            # The first step of a block is not kept, for every variant alike: the
            # recorder uses it to find the outermost modules (global hooks).
            out = [one_step(it, model, opt) for _ in range(self.steps)][1:]
        finally:
            if smp is not None:
                smp.stop()
            if rec is not None:
                rec.finish("complete")
        if rec is not None:  # the recorder did its job
            assert len(rec.boundaries) == self.steps and len(rec.intervals["data"]) == self.steps
            assert len(rec.intervals["forward"]) >= self.steps
        return out


def fixed_cost_us(rounds: int, steps: int) -> tuple[float, float]:
    """Microseconds the recorder adds to one step, measured on a step that does almost
    nothing else (a 2-layer 4-wide MLP fed one sample at a time), so that the hooks'
    own cost is not buried under the noise of a busy machine. Returns (plain step µs,
    added µs) as medians over interleaved blocks."""
    from torch.utils.data import TensorDataset

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    it = iter(DataLoader(TensorDataset(torch.randn(10**6, 4), torch.randn(10**6, 1)), batch_size=1))

    def block(instrumented: bool) -> float:
        rec = None
        if instrumented:
            rec = Recorder(steps=10**9, warmup=0, capture_path=None, probe=False,
                           precision_ab=False)
            rec.install(torch)
        times = []
        try:
            for _ in range(steps):
                t = time.perf_counter()
                x, y = next(it)
                loss = F.mse_loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t)
        finally:
            if rec is not None:
                rec.finish("complete")
        return statistics.median(times[1:]) * 1e6

    block(False)
    plain, instr = [], []
    for r in range(rounds):
        for flag in ((False, True) if r % 2 == 0 else (True, False)):
            (instr if flag else plain).append(block(flag))
    diffs = [b - a for a, b in zip(plain, instr, strict=True)]
    return statistics.median(plain), statistics.median(diffs)


def window_end_stall_ms(rounds: int = 5) -> float:
    """How much longer the step in which the window ends takes than the median step, with
    the recorder as `pitstop profile` configures it (probe, stack sampler, precision A/B,
    a capture file written): uninstalling, the A/B and the write all happen there."""
    import tempfile

    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randn(32, 1)
    extra = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            rec = Recorder(steps=20, warmup=3, capture_path=os.path.join(tmp, "capture.json"))
            rec.install(torch)
            times = []
            for _ in range(30):
                t = time.perf_counter()
                loss = F.mse_loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t)
            rec.finish("complete")
        end = times[22]  # boundary 23 (3 warm-up + 20 steps) ends the window inside step 23
        rest = statistics.median(times[5:22] + times[24:])
        extra.append((end - rest) * 1e3)
    return statistics.median(extra)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer steps (noisier)")
    ap.add_argument("--steps", type=int, default=None, help="steps per variant")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (1 keeps OpenMP spin-waits out of the "
                         "main-thread CPU figures on a small, shared machine)")
    ap.add_argument("--model-size", choices=("tiny", "small"), default="small",
                    help="the bench's model size (small: what `pitstop bench` runs on CPU)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    steps = args.steps or (40 if args.quick else 150)
    per_block = 5
    console = Console(stderr=True)
    torch.manual_seed(0)
    it, model, opt, workload = bench_workload(args.model_size, args.workers)
    for _ in range(8):  # warm-up: workers started, allocator and kernels warm
        one_step(it, model, opt)

    order = ["plain", "recorder", "recorder+sampler"]
    variants = dict.fromkeys(order)
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    with Progress(console=console, transient=True) as progress:
        rounds = -(-steps // (per_block - 1))
        task = progress.add_task("measuring", total=rounds * len(order))
        for r in range(rounds):
            # Interleave short blocks, rotating the order, so that load from other
            # processes on the machine falls on every variant alike.
            rot = order[r % len(order):] + order[:r % len(order)]
            for name in rot:
                for w, c in VariantBlock(name, per_block).run(it, model, opt):
                    wall[name].append(w)
                    cpu[name].append(c)
                progress.advance(task)
    fixed_plain_us, fixed_added_us = fixed_cost_us(rounds=10 if args.quick else 20, steps=200)
    stall_ms = window_end_stall_ms(3 if args.quick else 5)
    base_w, base_c = statistics.median(wall["plain"]), statistics.median(cpu["plain"])
    rows = []
    for name in variants:
        mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
        rows.append({"variant": name, "steps": len(wall[name]),
                     "median_step_ms": round(mw * 1e3, 3), "wall_ratio": round(mw / base_w, 4),
                     "median_main_thread_cpu_ms": round(mc * 1e3, 3), "cpu_ratio": round(mc / base_c, 4)})
    if args.json:
        print(json.dumps({"rows": rows, "steps_per_variant": steps, "cpu_count": os.cpu_count(),
                          "workload": workload, "torch_threads": torch.get_num_threads(),
                          "fixed_cost": {"tiny_step_us": round(fixed_plain_us, 2),
                                         "recorder_added_us": round(fixed_added_us, 2),
                                         "share_of_bench_step": round(fixed_added_us / (base_w * 1e6), 6)},
                          "window_end_stall_ms": round(stall_ms, 2),
                          "torch": torch.__version__}, indent=2))
        return
    table = Table(title=f"pitstop profile overhead: {workload} "
                        f"({len(wall['plain'])} steps per variant, interleaved in blocks of {per_block - 1})")
    for col in ("variant", "steps", "median step ms", "ratio", "main-thread CPU ms", "CPU ratio"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["variant"], str(row["steps"]), f"{row['median_step_ms']:.2f}",
                      f"{row['wall_ratio']:.4f}", f"{row['median_main_thread_cpu_ms']:.2f}",
                      f"{row['cpu_ratio']:.4f}")
    out = Console()
    out.print(table)
    for row in rows[1:]:
        out.print(f"{row['variant']}: {100 * (row['wall_ratio'] - 1):+.2f} % step time, "
                  f"{100 * (row['cpu_ratio'] - 1):+.2f} % main-thread CPU (target < 2 %)")
    out.print(f"recorder's own cost per step (tiny-step measurement): {fixed_added_us:.1f} µs "
              f"on a {fixed_plain_us:.0f} µs step = {100 * fixed_added_us / (base_w * 1e6):.3f} % "
              f"of the {base_w * 1e3:.1f} ms bench step (target < 2 %)")
    out.print(f"the step in which the window ends (uninstall, precision A/B, capture write): "
              f"{stall_ms:+.1f} ms over the median step")


if __name__ == "__main__":
    main()
