"""``pitstop monitor`` and ``pitstop plot``: the click commands (thin layers over the package).

Every user mistake (an unwritable or existing record path, an unknown extension, a
port in use, a corrupt recording, Textual missing for the live screen) is found
before anything starts and becomes one line and exit code 2.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from pitstop.errors import UsageError
from pitstop.options import FiniteFloatRange

__all__ = ["monitor", "plot"]

# A year: a deadline the clocks can hold (1e300 s overflowed them), longer than any run.
MAX_DURATION_S = 366 * 86400

TEXTUAL_MISSING = ("the live screen needs Textual: pip install 'pitstop[monitor]' (or "
                   "pip install textual); --once, --record, --prometheus and pitstop plot "
                   "work without it")


def _print_once(snap: dict[str, Any], width: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from pitstop.monitor.history import History
    from pitstop.monitor.panels import (
        gpu_panel,
        host_panel,
        process_columns,
        process_rows,
        verdict_text,
    )

    console = Console(width=width, highlight=False)
    h = History()
    h.push(snap)
    console.print(verdict_text(snap, width, lines=max(1, len(snap.get("verdicts") or []))))
    console.print(gpu_panel(snap, h, width))
    console.print(host_panel(snap, h, width, core_rows=8, max_disks=8))
    columns = process_columns(snap, width - 2)
    table = Table(box=None, pad_edge=False, header_style="bold", width=width)
    for _, head, w in columns:
        table.add_column(head, width=w, no_wrap=True, overflow="ellipsis")
    for r in process_rows(snap, width=width - 2):
        table.add_row(*(r.cells[k] for k, _, _ in columns), style=r.style)
    console.print(table)
    for note in snap.get("notes") or []:
        console.print(f"note: {note}", markup=False, style="dim")


def _wait(duration_s: float | None, done: threading.Event) -> None:
    """Until ``duration_s`` passes, SIGINT/SIGTERM arrives, or ``done`` is set."""
    def stop(signum: int, frame: Any) -> None:
        done.set()

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        done.wait(duration_s)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@click.command(context_settings={"max_content_width": 100})
@click.option("--once", is_flag=True, help="Print one snapshot and exit (for scripts and bug reports).")
@click.option("--json", "as_json", is_flag=True, help="With --once: the snapshot as JSON "
              "(schema: docs/monitor-snapshot.schema.json). Implies --once.")
@click.option("--record", "record", type=click.Path(path_type=Path), metavar="FILE",
              help="Record every sample to FILE (.jsonl: everything; .csv: one column per number); "
                   "headless when stdout is not a terminal.")
@click.option("--overwrite", is_flag=True, help="Let --record replace an existing file.")
@click.option("--interval", type=FiniteFloatRange(0.1, 3600), default=1.0, show_default=True,
              metavar="S", help="Seconds between samples.")
@click.option("--duration", type=FiniteFloatRange(0.1, MAX_DURATION_S), default=None, metavar="S",
              help="Stop after S seconds (recording, exporter or screen); without it, run until "
                   "stopped.")
@click.option("--window", type=FiniteFloatRange(1, 3600), default=30.0, show_default=True, metavar="S",
              help="Seconds of samples the verdict is computed over.")
@click.option("--replay", type=click.Path(path_type=Path), metavar="FILE",
              help="Play a recording back in the live screen.")
@click.option("--speed", type=FiniteFloatRange(0.1, 1000), default=1.0, show_default=True, metavar="X",
              help="With --replay: how many times faster than recorded.")
@click.option("--prometheus", metavar="[HOST:]PORT",
              help="Serve Prometheus metrics (DCGM names where they mean the same) on "
                   "127.0.0.1:PORT unless HOST is given; headless.")
@click.option("--pid", "pids", type=click.IntRange(1), multiple=True, metavar="PID",
              help="Follow this process as a training process (repeatable); training "
                   "processes are otherwise found by their DataLoader workers, GPU use or torch.")
@click.option("--no-gpu", is_flag=True, help="Do not open NVML (host panels only).")
@click.option("--nvml-recording", type=click.Path(path_type=Path), hidden=True,
              help="Replay recorded NVML values instead of the real NVML (tests, screenshots).")
def monitor(once: bool, as_json: bool, record: Path | None, overwrite: bool, interval: float,
            duration: float | None, window: float, replay: Path | None, speed: float,
            prometheus: str | None, pids: tuple[int, ...], no_gpu: bool,
            nvml_recording: Path | None) -> int:
    """Live view of the GPUs, CPU cores, memory, disks and training processes, and why the
    GPU waits.

    \b
      pitstop monitor                         the live screen (q quits, ? for keys)
      pitstop monitor --once --json           one snapshot, for scripts and bug reports
      pitstop monitor --record run.jsonl      record every sample (Ctrl-C stops)
      pitstop monitor --replay run.jsonl      play a recording back
      pitstop monitor --prometheus 9400       Prometheus endpoint on 127.0.0.1:9400
      pitstop plot run.jsonl -o run.png       the recording's timelines

    The top line is the verdict: the rules of `pitstop profile` applied to what the
    last --window seconds show, e.g. "GPU 0 idle 55 % while the 8 loader workers of
    PID 1234 use 7.9 of 8 cores → input-bound".
    """
    from pitstop.monitor.recording import check_record_path, read_recording

    once = once or as_json
    modes = [n for n, on in (("--once", once), ("--replay", replay is not None),
                             ("--prometheus", prometheus is not None)) if on]
    if len(modes) > 1:
        raise UsageError(f"{' and '.join(modes)} cannot be combined")
    if replay is not None and record is not None:
        raise UsageError("--replay and --record cannot be combined (a replay is already recorded)")
    if once and record is not None:
        raise UsageError("--once and --record cannot be combined; use --record with --duration")
    if record is not None:
        check_record_path(record, overwrite=overwrite)
    for pid in pids:
        if not Path(f"/proc/{pid}").is_dir():
            raise UsageError(f"--pid {pid}: no such process")
    recording = read_recording(replay, option="--replay") if replay is not None else None
    interactive = sys.stdout.isatty() and sys.stdin.isatty()
    wants_ui = not once and prometheus is None and (recording is not None or record is None
                                                    or interactive)
    has_textual = importlib.util.find_spec("textual") is not None
    if wants_ui and not has_textual:
        if record is None:
            raise UsageError(TEXTUAL_MISSING)
        wants_ui = False  # still record, headless, and say why there is no screen
        click.echo(f"pitstop monitor: no live screen ({TEXTUAL_MISSING}); recording headless",
                   err=True)
    if wants_ui and not interactive and record is None:
        raise UsageError("the live screen needs a terminal (stdin and stdout are not one); "
                         "use --once [--json], --record FILE or --prometheus PORT")
    if recording is not None:
        from pitstop.monitor.app import MonitorApp
        from pitstop.monitor.feeds import ReplayFeed

        for note in recording.notes:
            click.echo(f"pitstop monitor: {replay}: {note}", err=True)
        MonitorApp(ReplayFeed(recording, speed)).run()
        return 0

    nvml = None
    if nvml_recording is not None:
        from pitstop.telemetry.recorded_nvml import load_recorded_nvml

        nvml = load_recorded_nvml(nvml_recording)
    server_spec = None
    if prometheus is not None:
        from pitstop.monitor.prometheus import parse_listen

        parse_listen(prometheus)  # a malformed spec fails before sampling starts
        server_spec = prometheus

    from pitstop.monitor.collector import Collector

    # --once: both reads rescan every process, so that the busiest others get a CPU figure.
    collector = Collector(interval_s=interval, window_s=window, follow=list(pids), nvml=nvml,
                          gpu=not no_gpu, rescan_s=0.0 if once else 2.0)
    if once:
        snap = collector.once()
        if as_json:
            sys.stdout.write(json.dumps(snap, indent=2) + "\n")
        else:
            _print_once(snap, shutil.get_terminal_size().columns if interactive else 120)
        return 0

    recorder = None
    if server_spec is not None:
        from pitstop.monitor.prometheus import serve

        try:
            _, url = serve(server_spec, collector.latest)
        except UsageError:
            collector.close()
            raise
        click.echo(f"pitstop monitor: Prometheus metrics on {url} (Ctrl-C stops)", err=True)
    if record is not None:
        from pitstop.monitor.recording import Recorder

        recorder = Recorder(record, interval_s=interval, command=sys.argv[1:])
    if wants_ui:
        from pitstop.monitor.app import MonitorApp
        from pitstop.monitor.feeds import LiveFeed

        feed = LiveFeed(collector, recorder, duration)
        try:
            MonitorApp(feed).run()
        finally:
            feed.close()
        if recorder is not None:
            click.echo(f"pitstop monitor: {recorder.samples} samples written to {record}", err=True)
        return 0
    # headless: recording and/or exporting until --duration, Ctrl-C or SIGTERM
    if recorder is not None:
        collector.listeners.append(recorder.write)
        click.echo(f"pitstop monitor: recording to {record} every {interval:g} s"
                   + (f" for {duration:g} s" if duration else " (Ctrl-C stops)"), err=True)
    collector.start()
    try:
        _wait(duration, threading.Event())
    finally:
        collector.stop()
        if recorder is not None:
            recorder.close()
            click.echo(f"pitstop monitor: {recorder.samples} samples written to {record}", err=True)
    return 0


@click.command()
@click.argument("recording", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), required=True,
              metavar="OUT.png|OUT.html", help="Where to draw the timelines (.png or .html).")
def plot(recording: Path, out: Path) -> int:
    """Draw a `pitstop monitor --record` recording: GPU, host, disks and training processes
    over time, with every change of the verdict marked.

    \b
      pitstop plot run.jsonl -o run.png
      pitstop plot run.csv -o run.html
    """
    from pitstop.deps import require_modules
    from pitstop.monitor.plot import check_plot_output, plot_recording
    from pitstop.monitor.recording import read_recording

    check_plot_output(out)
    require_modules("pitstop plot", {"matplotlib": "matplotlib"}, "plot")  # before reading
    rec = read_recording(recording)
    for note in rec.notes:
        click.echo(f"pitstop plot: {recording}: {note}", err=True)
    t0 = time.monotonic()
    plot_recording(rec, out)
    click.echo(f"pitstop plot: {len(rec.snapshots)} samples ({rec.duration_s:.0f} s) → {out} "
               f"in {time.monotonic() - t0:.1f} s", err=True)
    return 0
