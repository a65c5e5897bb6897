"""``pitstop bench``: climb the optimisation ladder on this machine and print the table."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pitstop.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from pitstop.options import FiniteFloatRange
from pitstop.progress_bar import open_bar

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from pitstop.bench.ladder import RungResult

# (warm-up steps, timed steps per repeat, repeats)
QUICK_PLAN = (2, 6, 3)
DEFAULT_PLAN = (5, 20, 5)


class ConsoleReporter:
    """Progress on stderr: a live bar on a terminal, one line per finished rung otherwise."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.label = ""
        self.started = 0.0

    def __enter__(self) -> ConsoleReporter:
        if self.live:
            self.progress = open_bar(self.console, counted="steps")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def rung_started(self, label: str, total_steps: int) -> None:
        self.label = label
        self.started = time.perf_counter()
        if self.progress is not None:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(f"rung {label}: warm-up", total=total_steps)

    def phase(self, text: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=f"rung {self.label}: {text}")

    def tick(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)

    def rung_finished(self, result: RungResult) -> None:
        from rich.markup import escape

        label = f"{result.index} {result.name}" if result.index is not None else result.name
        if result.measurement is not None:
            m = result.measurement
            took = time.perf_counter() - self.started
            text = (f"rung {label}: {m.median:,.1f} samples/s (min {m.min:,.1f}, max {m.max:,.1f})"
                    f" [{result.status}] in {took:.1f} s")
        else:
            text = f"rung {label}: {result.status}" + (f" ({result.reason})" if result.reason else "")
        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(escape(text), style="yellow", highlight=False, soft_wrap=True)


def _resolve_device(name: str) -> Any:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        why = ("this torch is a CPU-only build" if torch.version.cuda is None
               else "no CUDA device is visible (driver, CUDA_VISIBLE_DEVICES?)")
        raise UsageError(f"--device cuda: {why}; use --device cpu or --device auto")
    return torch.device(name)


@click.command("bench")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="Where to train: cuda when available under auto.")
@click.option("--quick", is_flag=True,
              help="Fewer, shorter repeats and no torch.compile: under a minute on a small CPU.")
@click.option("--rungs", metavar="LIST",
              help="Rungs to measure: numbers, ranges or names, e.g. 0-2,no-sync. "
                   "Rung 0 (naive) is always measured.")
@click.option("--steps", type=click.IntRange(1, 1_000_000), help="Timed steps per repeat.")
@click.option("--repeats", type=click.IntRange(1, 1000),
              help="Timed repeats per rung (median taken).")
@click.option("--warmup", type=click.IntRange(0, 1_000_000), help="Untimed warm-up steps per rung.")
@click.option("--batch-size", type=click.IntRange(1, 65536), help="Samples per step (per rank).")
@click.option("--data", "data_dir", type=click.Path(path_type=Path),
              help="A folder for the synthetic image cache, or your own ImageFolder "
                   "(DIR/<class>/<image>.jpg). Default: ~/.cache/pitstop/bench.")
@click.option("--images", type=click.IntRange(8, 10_000_000),
              help="Size of the synthetic image set [default: 1024 on CPU, 4096 on CUDA].")
@click.option("--model", "model_size", type=click.Choice(["auto", "tiny", "small", "large"]),
              default="auto", show_default=True,
              help="Network size: auto = large on CUDA, small on CPU; tiny for smoke tests.")
@click.option("--image-size", type=click.IntRange(8, 4096), help="Crop size in pixels.")
@click.option("--compile-timeout", type=FiniteFloatRange(0, 86400), default=180.0,
              show_default=True,
              help="Seconds torch.compile may take before rung 7 is skipped (0: no bound).")
@click.option("--log-every", type=click.IntRange(1, 1_000_000_000), default=50, show_default=True,
              help="From rung 4 on, read the loss on the host every N steps.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the results (machine, rungs, ideal) as JSON.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a bar chart of the ladder (PNG).")
def bench(device: str, quick: bool, rungs: str | None, steps: int | None, repeats: int | None,
          warmup: int | None, batch_size: int | None, data_dir: Path | None, images: int | None,
          model_size: str, image_size: int | None, compile_timeout: float, log_every: int,
          json_path: Path | None, plot_path: Path | None) -> int:
    """Climb the optimisation ladder on this machine: naive loop -> tuned, one knob per rung.

    \b
    Rungs (each adds one knob to the rung below; a knob that is slower here is left out):
      0 naive            num_workers=0, loss.item() every step, fp32, no autotuner
      1 workers          DataLoader worker processes (pitstop.train.loader);
                         on a CPU also with fewer torch threads (faster kept)
      2 pinned           pin_memory + non_blocking + DevicePrefetcher (CUDA)
      3 cudnn-benchmark  cuDNN autotuner (CUDA)
      4 no-sync          loss kept on the device, read every --log-every steps
      5 mixed-precision  TrainStep(precision="auto"): bf16/fp16
      6 channels-last    NHWC memory format
      7 compile          torch.compile (compile time excluded)
      ideal              the best configuration on a batch already on the device

    Under `torchrun --nproc-per-node N` a DDP rung reports scaling efficiency.
    """
    from pitstop.bench.rungs import parse_rungs
    from pitstop.deps import require_modules, require_torch
    from pitstop.fileio import check_output_dir, check_output_path

    # Every option is checked before any work, and nothing is created from a typo.
    if rungs is not None:
        try:
            selected: set[int] | None = parse_rungs(rungs)
        except ValueError as err:
            raise UsageError(f"--rungs {rungs!r}: {err}") from None
        if not selected:
            raise UsageError(f"--rungs {rungs!r} names no rung; give numbers, ranges or names, "
                             "e.g. --rungs 0-2,no-sync")
    else:
        selected = None
    if plot_path is not None and plot_path.suffix.lower() != ".png":
        raise UsageError(f"--plot {plot_path}: the chart is a PNG; give a file name ending in .png")
    if json_path is not None:
        check_output_path(json_path, what="the JSON results", option="--json")
    if plot_path is not None:
        check_output_path(plot_path, what="the chart", option="--plot")
    if data_dir is not None and data_dir.exists() and not data_dir.is_dir():
        raise UsageError(f"--data {data_dir}: not a folder; pass an ImageFolder "
                         f"(DIR/<class>/<image>.jpg) or an empty folder for the synthetic set")
    if data_dir is not None and not data_dir.exists():
        # A new cache folder may be made, but never its parents: `--data /typo/dir` fails.
        check_output_dir(data_dir, what="the synthetic image cache", option="--data")
    require_torch("pitstop bench")
    require_modules("pitstop bench", {"PIL": "Pillow", "numpy": "numpy"}, "bench")
    if plot_path is not None:
        require_modules("pitstop bench --plot", {"matplotlib": "matplotlib"}, "bench")

    from rich.console import Console

    from pitstop.bench import distributed

    torch_device = _resolve_device(device)
    info = distributed.detect()
    group = None
    if info is not None:
        torch_device = distributed.device_for(info, torch_device)
        group = distributed.Group(info, torch_device)
    try:
        code = _run(torch_device=torch_device, quick=quick, selected=selected, steps=steps,
                    repeats=repeats, warmup=warmup, batch_size=batch_size, data_dir=data_dir,
                    images=images, model_size=model_size, image_size=image_size,
                    compile_timeout=compile_timeout, log_every=log_every, json_path=json_path,
                    plot_path=plot_path, group=group,
                    err_console=Console(stderr=True), out_console=Console())
        if group is not None:
            # Tear the group down together: a rank that destroys it while rank 0 still
            # writes its report can abort in gloo's teardown. (If a rank failed instead,
            # torchrun stops the others.)
            group.barrier()
        return code
    finally:
        if group is not None:
            group.close()


def _run(*, torch_device: Any, quick: bool, selected: set[int] | None, steps: int | None,
         repeats: int | None, warmup: int | None, batch_size: int | None, data_dir: Path | None,
         images: int | None, model_size: str, image_size: int | None, compile_timeout: float,
         log_every: int, json_path: Path | None, plot_path: Path | None, group: Any,
         err_console: Console, out_console: Console) -> int:
    from dataclasses import replace

    from rich.markup import escape
    from rich.syntax import Syntax

    from pitstop.bench import distributed, report
    from pitstop.bench.dataset import SyntheticSpec, open_data
    from pitstop.bench.ladder import LadderResult, SilentReporter, probe_context, run_ladder
    from pitstop.bench.machine import collect_machine, short_description
    from pitstop.bench.measure import Plan
    from pitstop.bench.model import build_model, parameter_count, spec_for

    main = group is None or group.info.rank == 0
    spec = spec_for(model_size, torch_device)
    if batch_size is not None or image_size is not None:
        spec = replace(spec, batch_size=batch_size or spec.batch_size,
                       image_size=image_size or spec.image_size)
    w0, s0, r0 = QUICK_PLAN if quick else DEFAULT_PLAN
    plan = Plan(warmup=w0 if warmup is None else warmup, steps=steps or s0, repeats=repeats or r0)
    synthetic = SyntheticSpec(num_images=images or (4096 if torch_device.type == "cuda" else 1024))

    def open_images() -> Any:
        status_line = None
        if main and err_console.is_terminal:
            status_line = err_console.status("preparing the image cache")
            status_line.__enter__()
        try:
            return open_data(data_dir, synthetic)
        finally:
            if status_line is not None:
                status_line.__exit__(None, None, None)

    started = time.perf_counter()
    load_start = _load_average()
    result: LadderResult | None = None
    source = None
    workload: Any = None
    if main:
        source = open_images()
        for note in source.notes:
            err_console.print(f"pitstop bench: {escape(note)}", style="yellow", highlight=False)
        if source.cache is not None and source.cache.created:
            err_console.print(
                f"pitstop bench: wrote {len(source.items)} synthetic JPEGs "
                f"({source.cache.total_bytes / 2**20:.1f} MiB) to {escape(str(source.folder))} "
                f"in {source.cache.build_seconds:.1f} s (reused by later runs)", highlight=False)
        workload = _workload(source, spec, plan, torch_device, compile_timeout, log_every)
        ctx = probe_context(torch_device, quick=quick,
                            model=build_model(workload.model_spec, workload.num_classes))
        with ConsoleReporter(err_console) as reporter:
            result = run_ladder(workload, ctx, selected=selected, reporter=reporter)
    ddp_record = None
    if group is not None:
        group.barrier()  # the other ranks waited here while rank 0 climbed the ladder
        shared = group.broadcast(None if result is None else {
            "knobs": result.final_knobs, "interrupted": result.interrupted,
            "single": _top_median(result), "naive": _naive_median(result)})
        if shared is not None and not shared["interrupted"]:
            if source is None:
                source = open_data(data_dir, synthetic)
            if workload is None:
                workload = _workload(source, spec, plan, torch_device, compile_timeout,
                                     log_every)
            ddp_reporter: Any = ConsoleReporter(err_console) if main else SilentReporter()
            with ddp_reporter if main else _nullcontext():
                ddp_record = distributed.run_ddp_rung(
                    group, workload, shared["knobs"], single_rank=shared["single"],
                    naive=shared["naive"], reporter=ddp_reporter)
    if not main or result is None or workload is None or source is None:
        return EXIT_OK

    machine = collect_machine()
    model = build_model(spec, source.num_classes)
    workload_doc = {
        "device": str(torch_device),
        "dataset": source.describe(),
        "transform": repr(workload.dataset.transform),
        "model": {**spec.describe(), "parameters": parameter_count(model),
                  "architecture": "ResNet-style: conv stem, basic residual blocks with "
                                  "BatchNorm, global average pool, linear"},
        "batch_size": spec.batch_size,
        "optimizer": "SGD(lr=0.05, momentum=0.9)",
        "log_every": log_every,
        "world_size": group.info.world_size if group is not None else 1,
    }
    plan_doc = {**asdict(plan), "quick": quick, "compile_timeout_s": compile_timeout,
                "slower_rule": "left out when the median is >3% below the rung it builds on "
                               "and no repeat reaches that rung's median",
                "wall_seconds": round(time.perf_counter() - started, 1),
                # Other processes' demand for the CPUs while this ran: the main source of noise.
                "load_average_start": load_start, "load_average_end": _load_average()}
    rec = report.recommendation(result, device=str(torch_device.type), batch_size=spec.batch_size,
                                log_every=log_every)
    doc = report.build_document(result, machine=machine, workload=workload_doc, plan=plan_doc,
                                ddp=ddp_record, recommended=rec, command=sys.argv[1:])
    title = (f"pitstop bench — {short_description(machine)} — {torch_device.type}, "
             f"{spec.name} model, batch {spec.batch_size}, {spec.image_size}px, "
             f"{len(source.items)} {source.kind} images")
    out_console.print(report.table(doc, title=title))
    for line in report.reasons(doc):
        out_console.print(escape(line), style="dim", highlight=False)
    noisy = report.noisy_text(doc)
    if noisy:
        out_console.print(escape(noisy), style="yellow", highlight=False)
    ddp_line = report.ddp_text(ddp_record)
    if ddp_line:
        out_console.print(escape(ddp_line), highlight=False)
    if result.interrupted:
        measured = sum(1 for r in result.rungs if r.measurement is not None)
        out_console.print(f"[yellow]interrupted (Ctrl-C): showing the {measured} rung(s) "
                          f"measured so far[/]")
    out_console.print(escape(report.recommendation_text(rec)), highlight=False)
    if rec is not None and not result.interrupted:
        if out_console.is_terminal:
            out_console.print(Syntax(rec["snippet"], "python", theme="ansi_dark",
                                     background_color="default", word_wrap=True))
        else:  # piped or logged: whole lines, never cropped, so the code can be copied
            out_console.print(rec["snippet"], soft_wrap=True, markup=False, highlight=False)
    if json_path is not None:
        from pitstop.fileio import atomic_write_json

        with _output_errors("--json", json_path):
            atomic_write_json(json_path, doc)
        err_console.print(f"pitstop bench: wrote {escape(str(json_path))}", highlight=False)
    if plot_path is not None:
        from pitstop.bench.plot import write_plot

        with _output_errors("--plot", plot_path):
            write_plot(plot_path, doc, title=title)
        err_console.print(f"pitstop bench: wrote {escape(str(plot_path))}", highlight=False)
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


@contextlib.contextmanager
def _output_errors(opt: str, path: Path) -> Iterator[None]:
    """An output that fails to write after the run: one line, exit 2 (the table is printed)."""
    try:
        yield
    except OSError as err:
        raise UsageError(f"{opt} {path}: cannot write it ({err.strerror or err}); "
                         f"the results are in the table above") from None


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _nullcontext() -> Any:
    return contextlib.nullcontext()


def _workload(source: Any, spec: Any, plan: Any, device: Any, compile_timeout: float,
              log_every: int) -> Any:
    from pitstop.bench.dataset import ImageDataset
    from pitstop.bench.ladder import Workload
    from pitstop.bench.transforms import TrainTransform

    dataset = ImageDataset(source.items, TrainTransform(spec.image_size))
    return Workload(device=device, dataset=dataset, model_spec=spec,
                        num_classes=source.num_classes, batch_size=spec.batch_size, plan=plan,
                        log_every=log_every, compile_timeout=compile_timeout)


def _top_median(result: Any) -> float | None:
    kept = [r for r in result.rungs if r.status in ("baseline", "kept") and r.measurement]
    return kept[-1].measurement.median if kept else None


def _naive_median(result: Any) -> float | None:
    base = result.baseline()
    return base.measurement.median if base is not None else None
