"""``pitstop doctor``: collect facts about this machine and diagnose them."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from pitstop.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from pitstop.options import FiniteFloatRange


def _check_args(collect: bool, from_file: str | None, sysroot: str | None, data: str | None,
                io: bool, torch: bool, output: str | None, as_json: bool) -> None:
    if from_file and collect:
        raise UsageError("--from and --collect exclude each other: --collect gathers facts "
                         "here, --from diagnoses facts gathered elsewhere")
    if from_file:
        bad = [name for name, on in (("--sysroot", sysroot), ("--data", data), ("--io", io),
                                     ("--torch", torch)) if on]
        if bad:
            raise UsageError(f"--from diagnoses recorded facts; {', '.join(bad)} only apply when "
                             "collecting (run them with --collect on the machine itself)")
    # --torch with --sysroot reads the recorded import (pitstop-recorded/torch_runtime.json):
    # importing this machine's torch would describe the wrong machine.
    if sysroot and not os.path.isdir(sysroot):
        raise UsageError(f"--sysroot {sysroot}: no such directory")
    if output and not (collect or as_json):
        raise UsageError("-o/--output writes JSON: use it with --collect or --json")
    if output:
        from pitstop.fileio import check_output_path

        check_output_path(output, what="the JSON", option="-o")


def _data_path(data: str | None, sysroot: str | None) -> str:
    from pitstop.sysroot import Sysroot

    if sysroot:
        path = data or "/"
        if not path.startswith("/"):
            raise UsageError(f"--data {path}: under --sysroot give the absolute path on that "
                             "machine, e.g. --data /data/imagenet")
        if not Sysroot.of(sysroot).path(path).exists():
            raise UsageError(f"--data {path}: does not exist under --sysroot {sysroot}")
        return os.path.normpath(path)
    path = os.path.abspath(data or os.getcwd())
    if not os.path.exists(path):
        raise UsageError(f"--data {data}: no such file or directory; pass the folder that "
                         "holds the training data")
    return path


@click.command()
@click.option("--collect", is_flag=True,
              help="Only collect facts and print them as JSON (diagnose later with --from).")
@click.option("--from", "from_file", metavar="FILE",
              help="Diagnose a facts file written by --collect (on another machine); - is stdin.")
@click.option("--data", metavar="PATH",
              help="Where the training data lives (default: the current directory).")
@click.option("--io", is_flag=True,
              help="Measure random reads under --data (4 KiB and 128 KiB, ~3 s; never writes "
                   "to your data).")
@click.option("--torch", "import_torch", is_flag=True,
              help="Import torch in a subprocess to test CUDA init, cuDNN and threads (+1-3 s); "
                   "with --sysroot, read the recorded result instead.")
@click.option("--python", "python", metavar="PATH",
              help="The Python that runs training, if not this one (its torch is inspected).")
@click.option("--sysroot", metavar="DIR",
              help="Read /sys, /proc, /etc, /dev under DIR (a recorded or fake machine).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {schema_version, facts, checks} as JSON instead of the table.")
@click.option("-o", "--output", metavar="FILE",
              help="Write the JSON (--collect or --json) to FILE atomically instead of stdout.")
@click.option("--all", "show_all", is_flag=True, help="Also list checks that do not apply.")
@click.option("--ignore", metavar="CODES",
              help="Comma-separated DR codes not to run (e.g. DR052,DR018 on purpose).")
@click.option("--io-seconds", type=FiniteFloatRange(0.4, 60.0), default=3.0, show_default=True,
              hidden=True)
def doctor(collect: bool, from_file: str | None, data: str | None, io: bool, import_torch: bool,
           python: str | None, sysroot: str | None, as_json: bool, output: str | None, show_all: bool,
           ignore: str | None, io_seconds: float) -> int:
    """Find what on this machine slows PyTorch training, with the exact fix for each.

    \b
    Checks the NVIDIA driver and the torch build, the GPUs' PCIe links, clocks,
    temperature, power and other users, the disk under --data, the CPU governor,
    /dev/shm, swap, thread counts, containers, and environment variables left on.
    Without --io and --torch it takes well under a second and never imports torch.

    \b
    Exit status: 0 nothing wrong, 1 warnings or problems found, 2 bad usage.

    \b
      pitstop doctor                          diagnose this machine
      pitstop doctor --data /data/imagenet --io
      pitstop doctor --collect -o node7.json  on a cluster node
      pitstop doctor --from node7.json        anywhere else
    """
    _check_args(collect, from_file, sysroot, data, io, import_torch, output, as_json)
    python = _python(python, sysroot, from_file)
    ignored = _ignored_codes(ignore)
    from pitstop.doctor.facts import collect as collect_facts
    from pitstop.doctor.facts import load_facts

    if from_file:
        facts: dict[str, Any] = load_facts(from_file)
    else:
        from pitstop.doctor.probes import ProbeContext
        from pitstop.sysroot import Sysroot

        ctx = ProbeContext(sysroot=Sysroot.of(sysroot), data_path=_data_path(data, sysroot),
                           environ=os.environ, measure_io=io, import_torch=import_torch,
                           io_seconds=io_seconds, python=python)
        if (io or import_torch) and sys.stderr.isatty():
            from rich.console import Console

            what = " and ".join(w for w, on in (("measuring random reads", io),
                                                ("importing torch", import_torch)) if on)
            with Console(stderr=True).status(f"collecting facts ({what})..."):
                facts = collect_facts(ctx)
        else:
            facts = collect_facts(ctx)
    if collect:
        import json

        _emit(json.dumps(facts, indent=2, default=str) + "\n", output)
        return EXIT_OK
    from pitstop.doctor.checks import run_checks

    results = run_checks(facts, skip=ignored)
    if as_json:
        from pitstop.doctor.report import report_json

        _emit(report_json(facts, results) + "\n", output)
    else:
        from rich.console import Console

        from pitstop.doctor.report import render_terminal

        render_terminal(facts, results, Console(), verbose=show_all)
    wrong = any(r.status in ("warning", "problem") for r in results)
    return EXIT_FINDINGS if wrong else EXIT_OK


def _python(python: str | None, sysroot: str | None, from_file: str | None) -> str | None:
    if python is None:
        return None
    if sysroot or from_file:
        raise UsageError("--python inspects an interpreter on this machine; it cannot be "
                         "combined with --sysroot or --from")
    import shutil

    found = shutil.which(python)
    if found is None:
        raise UsageError(f"--python {python}: not an executable; pass the path of the "
                         "interpreter that runs training, e.g. ~/venv/bin/python")
    return found


def _ignored_codes(ignore: str | None) -> set[str]:
    if not ignore:
        return set()
    from pitstop.doctor.checks import all_checks

    known = {c.code for c in all_checks()}
    codes = {c.strip().upper() for c in ignore.split(",") if c.strip()}
    unknown = sorted(codes - known)
    if unknown:
        raise UsageError(f"--ignore {ignore}: {', '.join(unknown)} is not a doctor code; "
                         "`pitstop explain --list` lists them")
    return codes


def _emit(text: str, output: str | None) -> None:
    if output:
        from pitstop.fileio import atomic_write_text

        try:
            atomic_write_text(output, text)
        except OSError as err:
            raise UsageError(f"-o {output}: cannot write it ({err.strerror or err})") from None
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
