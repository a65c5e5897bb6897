"""Helpers for running the real ``pitstop`` CLI in tests (importable as ``pitstop_testing``;
a module named ``conftest`` is ambiguous when several test folders have one)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
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


# ---------------------------------------------------------------- running as `nobody`

NOBODY_SETUID_FAILED = 98  # the child could not drop to `nobody` (no CAP_SETUID here)


def run_cli_in_process(argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in this process; return (exit code, stdout, stderr)."""
    import contextlib
    import io

    import pitstop.cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            pitstop.cli.main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def run_cli_as_nobody(argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in a forked child that has dropped to `nobody` with setuid; return
    (exit code, stdout, stderr). Skips the test where setuid is not permitted.

    A fork, not a fresh interpreter: the interpreter, the venv and the checkout may
    live where `nobody` cannot read (/root here; a 0700 clone under /tmp in CI), so
    `nobody` can import nothing new. Callers first run the same command in this
    process (as root) so that every module it uses is already imported when the
    child forks, and keep it in one process (no worker pools that spawn).
    """
    import json
    import pwd

    import pytest

    nobody = pwd.getpwnam("nobody")
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 99
        try:
            os.close(rfd)
            try:
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            except OSError as exc:
                os.write(wfd, json.dumps(["", f"cannot drop to nobody: {exc}"]).encode())
                code = NOBODY_SETUID_FAILED
            else:
                code, out, err = run_cli_in_process(argv)
                if os.geteuid() != nobody.pw_uid:
                    code, out, err = 99, "", f"still euid {os.geteuid()}"
                os.write(wfd, json.dumps([out, err]).encode())
        except BaseException as exc:  # report anything to the parent, never return
            os.write(wfd, json.dumps(["", f"child failed: {exc!r}"]).encode())
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, encoding="utf-8", errors="replace") as fh:
        raw = fh.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        out, err = json.loads(raw)
    except ValueError:
        out, err = "", raw
    if code == NOBODY_SETUID_FAILED:
        pytest.skip(err)
    return code, out, err


# ---------------------------------------------------------------- a disk that is full

@contextlib.contextmanager
def tiny_tmpfs(mountpoint: Path, size_kib: int = 64) -> Iterator[Path]:
    """A real tmpfs of ``size_kib`` mounted at ``mountpoint`` (made here), for writes that
    must fail with ENOSPC; skips the test where mounting is not permitted."""
    import pytest

    mountpoint.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs",
                           str(mountpoint)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(folder: Path) -> None:
    """Fill the filesystem under ``folder`` to the last byte."""
    fd = os.open(folder / ".filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
