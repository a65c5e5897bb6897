"""``pitstop tune [loader|model]``: the command line over :mod:`pitstop.tune`."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

# The bench's own --device check and its "could not write an output" error, shared.
from pitstop.bench.command import _load_average, _output_errors, _resolve_device
from pitstop.errors import EXIT_OK, UsageError
from pitstop.options import FiniteFloatRange

if TYPE_CHECKING:
    from rich.console import Console

EXIT_INTERRUPTED = 130
DEFAULT_BUDGETS = {"loader": "60s", "model": "120s", "both": "180s"}


@click.command("tune")
@click.argument("what", required=False, type=click.Choice(["loader", "model"]))
@click.option("--dataset", metavar="MODULE:FACTORY",
              help="The dataset: FACTORY() returns a Dataset or a dict of DataLoader arguments "
                   "holding one. MODULE is a dotted module or a path to a .py file.")
@click.option("--model", "model_spec", metavar="MODULE:FACTORY",
              help="The model: FACTORY() returns a dict with model, batch (or batch_fn), loss_fn "
                   "(omit it when the model returns its own loss) and optionally optimizer.")
@click.option("--batch-size", type=click.IntRange(min=1),
              help="Samples per batch [default: the dataset dict's or the model batch's, else 32].")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="Where training runs: cuda when available under auto.")
@click.option("--budget", metavar="DURATION",
              help="Time the search may spend, e.g. 90, 60s, 2m [default: 60s loader, "
                   "120s model, 180s both].")
@click.option("--steps", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Planned length of the run in steps: compile time is amortised over it.")
@click.option("--out", type=click.Path(path_type=Path),
              help="Write the chosen config: pitstop-loader.json (read by pitstop.train.loader) "
                   "for loader and both, pitstop-model.json for model.")
@click.option("--model-out", type=click.Path(path_type=Path),
              help="With both: write the model config here.")
@click.option("--json", "json_path", type=click.Path(path_type=Path),
              help="Write every trial and decision as JSON.")
@click.option("--max-workers", type=click.IntRange(min=0),
              help="Largest num_workers to try [default: the CPUs this process may use, more "
                   "when the workers wait on I/O].")
@click.option("--grid", is_flag=True,
              help="Loader: measure every configuration instead of searching (slow: the "
                   "reference the search is judged by).")
@click.option("--skip", "skip", metavar="GROUPS",
              help="Model option groups not to try, comma-separated: cudnn, tf32, precision, "
                   "layout, optimizer, batch-size, compile.")
@click.option("--loss-tolerance", type=FiniteFloatRange(min=0, min_open=True, max=10),
              default=0.05, show_default=True,
              help="Model: how far (relative, at most 10 = 1000 %) an option's first losses "
                   "may drift from fp32's.")
def tune(what: str | None, dataset: str | None, model_spec: str | None, batch_size: int | None,
         device: str, budget: str | None, steps: int, out: Path | None, model_out: Path | None,
         json_path: Path | None, max_workers: int | None, grid: bool, skip: str | None,
         loss_tolerance: float) -> int:
    """Measure DataLoader and training-step settings on YOUR dataset and model.

    \b
      pitstop tune loader --dataset data.py:make_dataset [--model model.py:make]
      pitstop tune model  --model model.py:make --steps 20000
      pitstop tune --dataset data.py:make_dataset --model model.py:make   # both
    \b
    loader: num_workers (0 to the CPUs this process may use), prefetch_factor,
            pin_memory (GPU), persistent_workers (across an epoch boundary), start
            method where it matters; with --model the objective is the whole step:
            the cheapest settings that keep the step fed.
    model:  precision (fp32, TF32, bf16, fp16+GradScaler), channels_last,
            cudnn.benchmark, fused/foreach optimizer, batch size (fastest with 10%
            memory headroom), torch.compile modes (amortised over --steps); each
            option's first losses are checked against fp32.
    \b
    A search, not a grid: it reports what it tried, what it skipped and why, and
    what it cost. Ctrl-C stops it and still prints and writes what was measured.
    Exit status: 0 done, 2 bad input, 130 interrupted.
    """
    from pitstop.tune.budget import parse_budget

    mode = _mode(what, dataset, model_spec)
    try:
        seconds = parse_budget(budget or DEFAULT_BUDGETS[mode])
    except ValueError as err:
        raise UsageError(str(err)) from None
    if grid and mode == "model":
        raise UsageError("--grid searches loader settings: use it with pitstop tune loader")
    from pitstop.tune.groups import SKIPPABLE

    skipped = tuple(s.strip() for s in (skip or "").split(",") if s.strip())
    bad = [s for s in skipped if s not in SKIPPABLE]
    if bad:
        raise UsageError(f"--skip {','.join(bad)}: not an option group; choose from "
                         f"{', '.join(SKIPPABLE)}")
    if skipped and mode == "loader":
        raise UsageError("--skip names model option groups: use it with pitstop tune model "
                         "or pitstop tune (both)")
    loader_out, model_cfg_out = _outputs(mode, out, model_out)
    from pitstop.fileio import check_output_path

    if loader_out is not None:
        check_output_path(loader_out, what="the loader config", option="--out")
    if model_cfg_out is not None:
        check_output_path(model_cfg_out, what="the model config",
                          option="--out" if mode == "model" else "--model-out")
    if json_path is not None:
        check_output_path(json_path, what="the JSON report", option="--json")
    from pitstop.deps import require_modules, require_torch

    with warnings.catch_warnings():
        # torch's "Failed to initialize NumPy" when numpy is missing: the next line says it.
        warnings.simplefilter("ignore", UserWarning)
        require_torch("pitstop tune")  # which build to install for this machine, if missing
    # The trials time steps with the bench's machinery, which imports its image set.
    require_modules("pitstop tune", {"PIL": "Pillow", "numpy": "numpy"}, "tune")

    from rich.console import Console

    err_console = Console(stderr=True)
    out_console = Console()
    from pitstop.bench.distributed import detect

    info = detect()
    if info is not None and mode != "model":
        raise UsageError("under torchrun only `pitstop tune model` runs (all ranks agree on one "
                         "answer); run `pitstop tune loader` once without torchrun, with "
                         f"LOCAL_WORLD_SIZE={info.local_world_size} set, to plan for that many "
                         "ranks per machine")
    torch_device = _resolve_device(device)
    return _run(mode, dataset=dataset, model_spec=model_spec, batch_size=batch_size,
                device=torch_device, seconds=seconds, steps=steps, loader_out=loader_out,
                model_out=model_cfg_out, json_path=json_path, max_workers=max_workers, grid=grid,
                skip=skipped, tolerance=loss_tolerance, info=info, err_console=err_console,
                out_console=out_console)


def _mode(what: str | None, dataset: str | None, model_spec: str | None) -> str:
    if what == "loader":
        if dataset is None:
            raise UsageError("pitstop tune loader needs --dataset MODULE:FACTORY")
        return "loader"
    if what == "model":
        if model_spec is None:
            raise UsageError("pitstop tune model needs --model MODULE:FACTORY")
        if dataset is not None:
            raise UsageError("--dataset is for the loader: to tune both, run `pitstop tune "
                             "--dataset ... --model ...` (no loader/model word)")
        return "model"
    if dataset is None or model_spec is None:
        raise UsageError("pitstop tune needs what to tune: `pitstop tune loader --dataset M:F`, "
                         "`pitstop tune model --model M:F`, or both options for both")
    return "both"


def _outputs(mode: str, out: Path | None, model_out: Path | None) -> tuple[Path | None, Path | None]:
    if mode == "loader":
        if model_out is not None:
            raise UsageError("--model-out is for the model config: use it with pitstop tune "
                             "(both) or pitstop tune model")
        return out, None
    if mode == "model":
        if out is not None and model_out is not None:
            raise UsageError("pitstop tune model writes one config: give --out or --model-out")
        return None, out or model_out
    return out, model_out


def _print_block(console: Console, lines: list[str]) -> None:
    from rich.markup import escape

    for line in lines:
        console.print(escape(line), highlight=False, soft_wrap=True)


def _print_code(console: Console, code: str) -> None:
    if not code:
        return
    if console.is_terminal:
        from rich.syntax import Syntax

        console.print(Syntax(code, "python", theme="ansi_dark", background_color="default",
                             word_wrap=True))
    else:
        console.print(code, soft_wrap=True, markup=False, highlight=False)


def _run(mode: str, *, dataset: str | None, model_spec: str | None, batch_size: int | None,
         device: Any, seconds: float, steps: int, loader_out: Path | None,
         model_out: Path | None, json_path: Path | None, max_workers: int | None, grid: bool,
         skip: tuple[str, ...], tolerance: float, info: Any, err_console: Console, out_console: Console) -> int:
    from pitstop.tune import report
    from pitstop.tune.factory import as_dataset_target, as_model_target, call_factory
    from pitstop.tune.progress import ConsoleReporter, SilentReporter

    dataset_target = model_target = None
    if dataset is not None:
        dataset_target = as_dataset_target(call_factory(dataset, option="--dataset"),
                                           named=f"--dataset {dataset}")
    if model_spec is not None:
        model_target = as_model_target(call_factory(model_spec, option="--model"),
                                       named=f"--model {model_spec}")
        if mode in ("model", "both") and not model_target.has_batch:
            raise UsageError(f"--model {model_spec}: the factory returned no batch; return "
                             f"'batch' (or 'batch_fn(n)') with the model so the step can be "
                             f"timed on its own")

    group = None
    main = True
    agree = None
    if info is not None:
        from pitstop.tune.distributed import RankAgreement

        group = RankAgreement(info, device)
        device = group.device
        main = info.rank == 0
        agree = group.reduce
    model_result = loader_result = None
    interrupted = False
    from pitstop.tune import interrupt

    reporter: Any = ConsoleReporter(err_console) if main else SilentReporter()
    load_start = _load_average()
    try:
        with interrupt.guarded(), reporter:
            if mode == "both":
                from pitstop.tune.both import tune_both

                both = tune_both(dataset_target, model_target, budget=seconds, device=device,
                                 steps=steps, tolerance=tolerance, batch_size=batch_size,
                                 reporter=reporter, named=f"--dataset {dataset}",
                                 model_named=f"--model {model_spec}", max_workers=max_workers,
                                 strategy="grid" if grid else "search", skip=skip)
                model_result, loader_result = both.model, both.loader
                interrupted = both.interrupted
            elif mode == "model":
                from pitstop.tune.model_tune import tune_model

                model_result = tune_model(model_target, device=device, budget=seconds,
                                          steps=steps, tolerance=tolerance, reporter=reporter,
                                          batch_size=batch_size, agree=agree,
                                          world_size=info.world_size if info else 1,
                                          skip=skip, named=f"--model {model_spec}")
                interrupted = model_result.interrupted
            else:
                from pitstop.tune.loader_tune import tune_loader

                loader_result = tune_loader(
                    dataset_target, batch_size, device=device, budget=seconds,
                    model=model_target, strategy="grid" if grid else "search",
                    max_workers=max_workers, reporter=reporter, named=f"--dataset {dataset}",
                    model_named=f"--model {model_spec}")
                interrupted = loader_result.interrupted
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if group is not None:
            group.close()
    if not main:
        return EXIT_INTERRUPTED if interrupted else EXIT_OK

    if model_result is not None:
        out_console.print(report.model_table(model_result))
        _print_block(out_console, report.model_summary(model_result))
    if loader_result is not None:
        out_console.print(report.loader_table(loader_result))
        _print_block(out_console, report.loader_summary(loader_result))
    if model_result is not None and loader_result is not None:
        _print_block(out_console, report.both_summary(loader_result, model_result))
    loads = [v for v in (load_start, _load_average()) if v is not None]
    if loads:
        from pitstop.hostinfo.cpu import usable_cpus

        _print_block(out_console, [
            f"1-minute load average {' -> '.join(f'{v:g}' for v in loads)} on "
            f"{usable_cpus()[0]} CPUs while this ran (above the CPU count, other processes "
            f"competed for them: compare figures with care)"])
    if model_result is None and loader_result is None:
        err_console.print("pitstop tune: interrupted before any trial finished; nothing written")
        return EXIT_INTERRUPTED
    if loader_result is not None:
        _print_code(out_console, report.loader_snippet(
            loader_result, config_path=str(loader_out) if loader_out else None))
    if model_result is not None:
        _print_code(out_console, report.model_snippet(model_result))
    written = []
    if loader_out is not None and loader_result is not None and loader_result.settings:
        with _output_errors("--out", loader_out):
            loader_result.save(loader_out)
        written.append(str(loader_out))
    if model_out is not None and model_result is not None and model_result.settings:
        with _output_errors("--out" if mode == "model" else "--model-out", model_out):
            model_result.save(model_out)
        written.append(str(model_out))
    if json_path is not None:
        from pitstop.fileio import atomic_write_json

        with _output_errors("--json", json_path):
            atomic_write_json(json_path, report.doc(
                command=sys.argv[1:], mode=mode, interrupted=interrupted,
                load_average=loads,
                model=model_result.as_dict() if model_result is not None else None,
                loader=loader_result.as_dict() if loader_result is not None else None))
        written.append(str(json_path))
    for path in written:
        err_console.print(f"pitstop tune: wrote {path}", highlight=False, markup=False)
    if loader_out is None and loader_result is not None and loader_result.settings:
        err_console.print("pitstop tune: pass --out pitstop-loader.json to write the loader "
                          "config (pitstop.train.loader() reads it)", highlight=False)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
