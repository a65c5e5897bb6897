"""Tables, summaries and code snippets of tune results. Pure functions of the results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitstop.tune.budget import format_seconds
from pitstop.tune.measure import robust_rate
from pitstop.tune.memory import mib
from pitstop.tune.search import FED

if TYPE_CHECKING:
    from rich.table import Table

    from pitstop.tune.loader_tune import LoaderTuneResult
    from pitstop.tune.model_tune import ModelTuneResult


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"


# ---------------------------------------------------------------- loader

def loader_table(result: LoaderTuneResult) -> Table:
    """Every loader trial: its settings, rates, start-up and boundary costs, verdict."""
    from rich.table import Table

    step = result.step_rate
    title = (f"pitstop tune loader — batch {result.batch_size}, {result.device}, consumer: "
             f"{result.consumer}")
    table = Table(title=title, title_justify="left", show_lines=False)
    for name, justify in (("#", "right"), ("trial", "left"), ("settings", "left"),
                          ("samples/s", "right"), ("min–max", "right"), ("start", "right"),
                          ("epoch boundary", "right"), ("effective/s", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    if step is not None:
        table.add_column("% of step", justify="right")
    table.add_column("CPU/worker", justify="right")
    table.add_column("in flight", justify="right")
    table.add_column("verdict", justify="left", overflow="fold")
    chosen = result.choice
    for i, t in enumerate(result.trials, 1):
        m = t.measurement
        if t is chosen:
            verdict = "chosen"
        elif t.status == "measured":
            verdict = ("same steady rate as #" + str(t.derived_from)) if t.derived_from else ""
        else:
            verdict = f"{t.status}: {t.reason}" if t.reason else t.status
        if t.rounds > 1:
            verdict = (verdict + "; " if verdict else "") + f"measured {t.rounds} times"
        row = [str(i), t.role, t.config.label(),
               _rate(m.median) if m is not None and t.derived_from is None else
               ("(#" + str(t.derived_from) + ")" if t.derived_from else ""),
               f"{m.min:,.0f}–{m.max:,.0f}" if m is not None and t.derived_from is None else "",
               format_seconds(t.startup_s) if t.startup_s is not None else "",
               format_seconds(t.boundary_s) if t.boundary_s is not None else "",
               _rate(t.effective)]
        if step is not None:
            row.append(f"{t.effective / step:.0%}" if t.effective is not None else "")
        row.append(f"{t.worker_cpu:.2f}" if t.worker_cpu is not None else "")
        row.append(mib(t.memory.in_flight * t.memory.batch_bytes)
                   if t.memory is not None and t.config.num_workers else "")
        row.append(verdict)
        style = "bold green" if t is chosen else ("dim" if t.status != "measured" else None)
        table.add_row(*row, style=style)
    return table


def loader_summary(result: LoaderTuneResult) -> list[str]:
    """The lines under the table: the choice and why, the step, the cost of the search."""
    lines: list[str] = []
    c = result.choice
    step = result.step
    if c is None:
        lines.append("no configuration was measured: nothing to choose from")
    else:
        eff = c.score
        text = f"chosen: {c.config.label()}: {eff:,.1f} samples/s"
        if c.boundary_s is not None:
            text += (f" over an epoch of {result.epoch_batches:,} batches (epoch boundary "
                     f"{format_seconds(c.boundary_s)})")
        lines.append(text)
        if step is not None:
            s = result.step_rate or robust_rate(step)
            fed = eff >= FED * s or c.fed_in_turns
            lines.append(
                f"the training step alone (batch already on {result.device}): {s:,.1f} samples/s; "
                f"fed by the chosen loader it runs at {eff:,.1f} samples/s "
                f"({eff / s:.0%})"
                + ("; fed: measured in turns with more workers, no slower" if c.fed_in_turns
                   else "" if fed else
                   ": the step is not fully fed; no configuration tried feeds it better"))
        yours = result.yours
        if yours is not None and yours.measured and yours is not c and yours.score > 0:
            lines.append(f"your settings ({yours.config.label()}): {yours.score:,.1f} "
                         f"samples/s; the choice is {eff / yours.score:.2f}x that")
        if c.memory is not None and c.config.num_workers:
            lines.append(f"memory: {c.memory.why}")
    lines.append(f"search: {len(result.trials)} trial(s) in {format_seconds(result.seconds)}; "
                 f"{result.untried} of the {result.grid_size} configurations of the full grid "
                 f"not tried (workers 0–{result.domain.io_max_workers} x prefetch "
                 f"{'/'.join(map(str, result.domain.prefetches))} x persistent on/off"
                 + (" x pinned on/off" if len(result.domain.pin_choices) > 1 else "") + ")")
    for note in result.notes:
        lines.append(f"  - {note}")
    if result.interrupted:
        lines.append("interrupted (Ctrl-C): results are those measured before it")
    return lines


def loader_snippet(result: LoaderTuneResult, *, config_path: str | None) -> str:
    if result.choice is None:
        return ""
    s = result.choice.config.settings()
    device = "cuda" if result.device.startswith("cuda") else "cpu"
    where = (f'config="{config_path}"' if config_path else
             "num_workers={num_workers}, prefetch_factor={prefetch_factor},\n"
             "               persistent_workers={persistent_workers}, pin_memory={pin_memory}"
             .format(**s))
    plain = ", ".join(f"{k}={v!r}" for k, v in s.items() if v is not None)
    return (f"# pitstop.train reads the settings from the config file:\n"
            f"from pitstop.train import loader\n"
            f"train = loader(dataset, {result.batch_size}, shuffle=True, device=\"{device}\",\n"
            f"               {where})\n"
            f"# or plain PyTorch:\n"
            f"train = torch.utils.data.DataLoader(dataset, batch_size={result.batch_size}, "
            f"shuffle=True, {plain})")


# ---------------------------------------------------------------- model

def model_table(result: ModelTuneResult) -> Table:
    from rich.table import Table

    ref = result.reference
    ref_rate = robust_rate(ref.measurement) if ref is not None and ref.measurement else None
    table = Table(title=f"pitstop tune model — {result.device}, run of {result.steps:,} steps",
                  title_justify="left")
    for name, justify in (("#", "right"), ("trial", "left"), ("settings", "left"),
                          ("samples/s", "right"), ("min–max", "right"), ("vs fp32", "right"),
                          ("peak memory", "right"), ("compile", "right"),
                          ("loss drift", "right"), ("verdict", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    chosen = result.config
    for i, t in enumerate(result.trials, 1):
        m = t.measurement
        drift = ""
        if ref is not None and t.losses and ref.losses and t.config.batch_size == ref.config.batch_size:
            from pitstop.tune.model_trials import loss_drift

            d = loss_drift(t.losses, ref.losses)
            drift = "inf" if d == float("inf") else f"{d:.2%}"
        verdict = t.verdict or t.status
        if t.reason and (t.status != "measured" or t.group == "compile"):
            verdict += f": {t.reason}"
        rate = robust_rate(m) if m is not None else None
        table.add_row(
            str(i), t.group, t.config.label(), _rate(m.median) if m else "",
            f"{m.min:,.0f}–{m.max:,.0f}" if m else "",
            f"{rate / ref_rate:.2f}x" if rate and ref_rate else "",
            mib(t.peak_bytes) if t.peak_bytes else "",
            format_seconds(t.compile_s) if t.compile_s is not None else "",
            drift, verdict,
            style="bold green" if chosen is not None and t.measured and t.config == chosen
            else ("dim" if t.status != "measured" else None))
    return table


def model_summary(result: ModelTuneResult) -> list[str]:
    lines: list[str] = []
    cfg = result.config
    ref = result.reference
    if cfg is None or result.rate is None:
        lines.append("no configuration was measured: nothing to choose from")
    else:
        text = f"chosen: {cfg.label()}: {result.rate:,.1f} samples/s"
        if ref is not None and ref.measurement is not None:
            text += f" ({result.rate / robust_rate(ref.measurement):.2f}x the fp32 reference)"
        lines.append(text)
        if result.batch is not None and result.batch.limit_bytes:
            lines.append(f"batch size: the fastest with headroom, memory limit "
                         f"{result.batch.limit_how}")
            for note in result.batch.notes:
                lines.append(f"  - {note}")
        if cfg.batch_size != (ref.config.batch_size if ref else cfg.batch_size):
            lines.append(f"  a batch of {cfg.batch_size} instead of {ref.config.batch_size if ref else '?'} "
                         f"changes the optimisation: scale the learning rate with it")
    for advice in result.compile:
        lines.append(f"torch.compile mode={advice.mode}: {advice.why}")
    if result.not_tried:
        lines.append("not tried here:")
        for option, why in result.not_tried:
            lines.append(f"  - {option}: {why}")
    for note in result.notes:
        lines.append(f"  - {note}")
    lines.append(f"search: {len(result.trials)} trial(s) in {format_seconds(result.seconds)}")
    if result.interrupted:
        lines.append("interrupted (Ctrl-C): results are those measured before it")
    return lines


def model_snippet(result: ModelTuneResult) -> str:
    cfg = result.config
    if cfg is None:
        return ""
    cuda = result.device.startswith("cuda")
    lines = ["import torch", "from pitstop.train import TrainStep", ""]
    if cfg.cudnn_benchmark:
        lines.append("torch.backends.cudnn.benchmark = True")
    if cfg.tf32:
        lines.append("torch.backends.cuda.matmul.allow_tf32 = True")
        lines.append("torch.backends.cudnn.allow_tf32 = True")
    device = '"cuda"' if cuda else '"cpu"'
    if cfg.channels_last:
        lines.append(f"model = model.to({device}, memory_format=torch.channels_last)")
    else:
        lines.append(f"model = model.to({device})")
    extra = {"fused": ", fused=True", "foreach": ", foreach=True",
             "for-loop": ", foreach=False"}.get(cfg.optimizer_impl, "")
    lines.append(f"optimizer = torch.optim.AdamW(model.parameters(), lr=...{extra})"
                 "  # your optimizer" + (f", with{extra.lstrip(',')}" if extra else ""))
    runnable = "model"
    if cfg.compile_mode:
        runnable = ("torch.compile(model)" if cfg.compile_mode == "default"
                    else f'torch.compile(model, mode="{cfg.compile_mode}")')
    lines.append(f'step = TrainStep({runnable}, optimizer, precision="{cfg.precision}")')
    lines.append(f"# batches of {cfg.batch_size} samples")
    if cfg.channels_last:
        lines.append("loss = step(inputs.contiguous(memory_format=torch.channels_last), targets)")
    else:
        lines.append("loss = step(inputs, targets)   # a device tensor: read it only to log")
    return "\n".join(lines)


def both_summary(loader: LoaderTuneResult, model: ModelTuneResult) -> list[str]:
    """The final expected rate against the ideal (the tuned model fed from device memory)."""
    ideal = loader.step_rate if loader.step_rate is not None else model.rate
    c = loader.choice
    if ideal is None or c is None or c.effective is None:
        return ["no final figure: the model or the loader had no measured configuration"]
    return [f"expected: {c.effective:,.1f} samples/s with the tuned loader and model = "
            f"{c.effective / ideal:.0%} of the ideal {ideal:,.1f} samples/s (the tuned model "
            f"fed from device memory)"]


def doc(**parts: Any) -> dict[str, Any]:
    """The JSON document of a run (``--json``)."""
    return {"schema": "pitstop.tune/1", **parts}
