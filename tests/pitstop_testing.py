"""Helpers for running the real ``pitstop`` CLI in tests (importable as ``pitstop_testing``;
a module named ``conftest`` is ambiguous when several test folders have one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def pitstop_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("COLUMNS", "200")
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def run_pitstop(*args: str, cwd: str | os.PathLike[str] | None = None,
                env: dict[str, str] | None = None, timeout: float = 240,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pitstop ARGS`` for real and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "pitstop", *args],
        cwd=cwd, env=pitstop_env(env), capture_output=True, text=True, timeout=timeout,
        input=input,
    )
