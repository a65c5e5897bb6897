"""Run the user's command with the recorder injected, sample the machine meanwhile,
and collect what every instrumented process wrote."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError
from pitstop.telemetry.sampler import Sampler, default_readers

__all__ = ["RunResult", "check_command", "prepare_out_dir", "run_instrumented"]

INJECT_DIR = Path(__file__).resolve().parent / "_inject"
PKG_PARENT = Path(__file__).resolve().parents[2]


@dataclass
class RunResult:
    exit_code: int
    captures: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    not_measured: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started_wall: float = 0.0
    duration_s: float = 0.0


def check_command(command: Sequence[str]) -> None:
    """Raise :class:`UsageError` unless ``command`` names a program that can start
    (and, for ``python SCRIPT.py``, an existing script)."""
    if not command:
        raise UsageError("no command to profile: put it after `--`, e.g. "
                         "`pitstop profile -- python train.py`")
    exe = command[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise UsageError(f"{exe}: not an executable file; give the command that starts "
                             "training, e.g. `-- python train.py`")
    elif shutil.which(exe) is None:
        raise UsageError(f"{exe}: command not found on PATH; give the command that starts "
                         "training, e.g. `-- python train.py`")
    if len(command) >= 2 and os.path.basename(exe).startswith("python") and command[1].endswith(".py") \
            and not os.path.exists(command[1]):
        raise UsageError(f"{command[1]}: no such script; check the path (relative to "
                         f"{os.getcwd()})")


def prepare_out_dir(out_dir: Path) -> Path:
    """Create ``out_dir/captures`` (emptied of old captures) or raise :class:`UsageError`
    naming ``--out``; returns the captures folder. Done before the script starts, so that
    an unwritable ``--out`` never costs a training run."""
    from pitstop.fileio import check_output_dir

    # --out itself may be new, never its parents: a typo fails instead of a folder tree
    check_output_dir(out_dir, what="the profile", option="--out")
    capture_dir = out_dir / "captures"
    try:
        out_dir.mkdir(exist_ok=True)
        capture_dir.mkdir(exist_ok=True)
        for old in capture_dir.glob("capture-*.json"):
            old.unlink()
        probe = capture_dir / f".pitstop-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise UsageError(f"--out {out_dir}: cannot write there ({err.strerror or err}); "
                         "pick a writable folder") from None
    return capture_dir


def child_env(capture_dir: Path, *, steps: int, warmup: int, probe: bool = True) -> dict[str, str]:
    """The environment that makes every Python process of the command load the recorder."""
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(INJECT_DIR) + (os.pathsep + old if old else "")
    env["PITSTOP_PROFILE_DIR"] = str(capture_dir)
    env["PITSTOP_PROFILE_STEPS"] = str(steps)
    env["PITSTOP_PROFILE_WARMUP"] = str(warmup)
    env["PITSTOP_PROFILE_PROBE"] = "1" if probe else "0"
    env["PITSTOP_PROFILE_PKG_PARENT"] = str(PKG_PARENT)
    return env


def read_captures(capture_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    caps, notes = [], []
    for path in sorted(capture_dir.glob("capture-*.json")):
        try:
            caps.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as err:
            notes.append(f"unreadable capture {path.name}: {err}")
    return caps, notes


def run_instrumented(command: Sequence[str], out_dir: Path, *, steps: int, warmup: int,
                     probe: bool = True, sample: bool = True) -> RunResult:
    """Run ``command`` to completion under the recorder; the script's own exit code is kept."""
    check_command(command)
    capture_dir = prepare_out_dir(out_dir)
    env = child_env(capture_dir.resolve(), steps=steps, warmup=warmup, probe=probe)
    started_wall, t0 = time.time(), time.monotonic()
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as err:
        raise UsageError(f"{command[0]}: cannot start it: {err}") from None
    not_measured: dict[str, str] = {}
    sampler: Sampler | None = None
    if sample:
        readers, missing = default_readers([proc.pid])
        not_measured.update({f"{k}_telemetry": v for k, v in missing.items()})
        sampler = Sampler(readers).start()

    # Ctrl-C reaches the script through the terminal; pitstop stays to write the report.
    # A SIGTERM/SIGHUP sent to pitstop itself is passed on to the script.
    def forward(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous: dict[int, Any] = {}
    for sig, handler in ((signal.SIGINT, signal.SIG_IGN), (signal.SIGTERM, forward),
                         (signal.SIGHUP, forward)):
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, handler)
    try:
        rc = proc.wait()
    finally:
        for old_sig, old_handler in previous.items():
            signal.signal(old_sig, old_handler)
    samples = sampler.stop() if sampler is not None else []
    if sampler is not None and sampler.errors:
        not_measured.update({f"telemetry:{k}": v for k, v in sampler.errors.items()})
    exit_code = rc if rc >= 0 else 128 - rc
    caps, notes = read_captures(capture_dir)
    return RunResult(exit_code, caps, samples, not_measured, notes, started_wall,
                     time.monotonic() - t0)
