"""``pitstop profile -- COMMAND``: the click command (a thin layer over launch + report)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["profile"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=click.IntRange(1), default=50, show_default=True,
              help="Steps to measure after the warm-up.")
@click.option("--warmup", type=click.IntRange(0), default=5, show_default=True,
              help="Steps to skip first (one of them is profiled operator by operator).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              default=Path("pitstop-profile"), show_default=True,
              help="Folder for profile.json and report.html.")
@click.option("--json", "as_json", is_flag=True, help="Print profile.json to stdout instead of a summary.")
@click.option("--no-probe", is_flag=True, help="Skip the operator probe (torch.profiler over one warm-up step).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def profile(steps: int, warmup: int, out_dir: Path, as_json: bool, no_probe: bool,
            command: tuple[str, ...]) -> int:
    """Run a training command unchanged and show where each step's time goes.

    \b
      pitstop profile -- python train.py --epochs 1
      pitstop profile --steps 30 -- torchrun --nproc-per-node 2 train.py

    The script runs as it would without pitstop (same arguments, output and exit code);
    pitstop records the DataLoader wait, copies, forward, backward and optimizer step
    of `--warmup` + `--steps` steps, samples CPU/disk/GPU at 10 Hz, then names the
    bottleneck (input-bound, io-bound, host-bound, compute-bound, memory-bound) and the
    fixes. Exit code: the script's (128+N when a signal N ended it); 2 when pitstop
    cannot start it (nothing after `--`, not found, --out not writable).
    """
    import json

    from rich.console import Console
    from rich.markup import escape

    from pitstop.fileio import atomic_write_json, atomic_write_text
    from pitstop.hostinfo.cpu import usable_cpus
    from pitstop.profile.launch import check_command, prepare_out_dir, run_instrumented
    from pitstop.profile.report import build_document, render_html, render_terminal

    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    check_command(cmd)
    prepare_out_dir(out_dir)
    console = Console(stderr=True, highlight=False)
    console.print(f"[dim]pitstop profile: {warmup} warm-up + {steps} steps of "
                  f"`{escape(' '.join(cmd))}` → {escape(str(out_dir))}/[/]")
    result = run_instrumented(cmd, out_dir, steps=steps, warmup=warmup, probe=not no_probe)
    doc = build_document(result.captures, result.samples, command=cmd, exit_code=result.exit_code,
                         steps=steps, warmup=warmup, not_measured=result.not_measured,
                         started_wall=result.started_wall, duration_s=result.duration_s,
                         cpu_count=usable_cpus()[0])
    doc["notes"] = result.notes + doc["notes"]
    if not doc.get("ranks") and result.exit_code > 128:
        # The recorder writes its capture at exit or when the window is full; SIGKILL
        # (the OOM killer, `kill -9`) before that leaves nothing to read.
        doc["notes"].append(f"no capture: the command was killed by signal "
                            f"{result.exit_code - 128} before pitstop's recorder could write "
                            "it (SIGKILL cannot be caught); profile with fewer --steps to "
                            "finish the window before that point")
    try:
        atomic_write_json(out_dir / "profile.json", doc)
        atomic_write_text(out_dir / "report.html", render_html(doc))
    except OSError as err:
        # --out was writable when the run started; the script's exit code still wins.
        console.print(f"pitstop: error: --out {out_dir}: cannot write the profile "
                      f"({err.strerror or err}); the script exited with {result.exit_code}",
                      markup=False)
        return result.exit_code or 2
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_terminal(doc, console, out_dir=str(out_dir))
    return result.exit_code
