"""The one error boundary in pitstop.cli.main, for every command: commands added later
(monitor, plot, tune) get it without a line of their own. Proved with commands made
up here and registered the way a new command is (one line in COMMANDS)."""

from __future__ import annotations

import errno
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pitstop_testing import run_cli_in_process

import pitstop.cli
from pitstop.errors import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT,
    EXIT_TERMINATED,
    EXIT_USAGE,
)

MODULE = '''
import click, errno, signal
from pitstop.errors import Terminated, UsageError

@click.command()
@click.argument("what")
def boom(what):
    """A command that fails in the way it is told."""
    if what == "bug":
        return {}["missing"]
    if what == "deep":
        def f(n): return f(n + 1)
        f(0)
    if what == "usage":
        raise UsageError("--thing x: no such thing; pass a real one")
    if what == "disk":
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out.json")
    if what == "ctrl-c":
        raise KeyboardInterrupt
    if what == "sigterm":
        raise Terminated(signal.SIGTERM)
    if what == "click":
        raise click.ClickException("a click error")
    return 0

@click.group()
def grp():
    """A group."""

@grp.command()
def sub():
    raise RuntimeError("kaboom\\nsecond line")
'''


@pytest.fixture
def made_up_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "madeup_cmds.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(pitstop.cli.COMMANDS, "boom", "madeup_cmds:boom")
    monkeypatch.setitem(pitstop.cli.COMMANDS, "grp", "madeup_cmds:grp")
    monkeypatch.delenv("PITSTOP_DEBUG", raising=False)
    yield
    sys.modules.pop("madeup_cmds", None)


@pytest.mark.parametrize("what, code, line", [
    ("bug", EXIT_INTERNAL, "pitstop: internal error in `pitstop boom` (KeyError: 'missing'); "
                           "this is a bug in pitstop: rerun with PITSTOP_DEBUG=1"),
    ("deep", EXIT_INTERNAL, "pitstop: internal error in `pitstop boom` (RecursionError: "),
    ("usage", EXIT_USAGE, "pitstop: error: --thing x: no such thing; pass a real one"),
    ("disk", EXIT_OUTPUT, "pitstop: error: cannot write /data/out.json (No space left on device)"),
    ("ctrl-c", EXIT_INTERRUPTED, "Interrupted."),
    ("sigterm", EXIT_TERMINATED, "pitstop: terminated (SIGTERM)"),
    ("click", EXIT_USAGE, "Error: a click error"),
])
def test_every_failure_is_one_line_and_its_code(made_up_commands: None, what: str, code: int,
                                                line: str) -> None:
    got, _out, err = run_cli_in_process(["boom", what])
    assert got == code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines
    assert "Traceback" not in err


def test_the_message_names_the_subcommand_of_a_group(made_up_commands: None) -> None:
    code, _out, err = run_cli_in_process(["grp", "sub"])
    assert code == EXIT_INTERNAL
    assert err.strip().startswith("pitstop: internal error in `pitstop grp sub` "
                                   "(RuntimeError: kaboom)")


@pytest.mark.parametrize("how", ["--debug", "env"])
def test_debug_shows_the_traceback(made_up_commands: None, monkeypatch: pytest.MonkeyPatch,
                                   how: str) -> None:
    argv = ["boom", "bug"]
    if how == "env":
        monkeypatch.setenv("PITSTOP_DEBUG", "1")
    else:
        argv = ["--debug", *argv]
    code, _out, err = run_cli_in_process(argv)
    assert code == EXIT_INTERNAL
    assert err.startswith("Traceback (most recent call last):")
    assert 'return {}["missing"]' in err
    assert err.strip().splitlines()[-1].startswith("pitstop: internal error in `pitstop boom`")


def test_a_command_that_succeeds_is_unaffected(made_up_commands: None) -> None:
    assert run_cli_in_process(["boom", "fine"])[0] == 0


def test_help_lists_every_exit_code(pitstop_cli) -> None:
    out = " ".join(pitstop_cli("--help").stdout.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning}" in out
    assert "--debug" in out and "PITSTOP_DEBUG=1" in out


def test_docs_list_the_same_exit_codes() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for code, meaning in EXIT_CODES:
        assert f"| {code} | {meaning} |" in text


def test_output_errors_name_standard_output() -> None:
    from pitstop.stdio import StdoutError, output_failure

    assert output_failure(StdoutError(errno.ENOSPC, "No space left on device")) == \
        "standard output"
    assert output_failure(OSError(errno.ENOSPC, "full", "/x/report.json")) == "/x/report.json"
    assert output_failure(OSError(errno.ENOENT, "missing")) is None  # not an output failure
