"""The ``pitstop`` command line: one group, every subcommand a thin function over its package.

Subcommands are imported only when they run, so ``pitstop doctor`` never pays for
importing the linter, and nothing imports torch unless the command needs it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any, NoReturn

import click

from pitstop import __version__
from pitstop.errors import (
    EXIT_CODES,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    Terminated,
    UsageError,
)
from pitstop.signals import terminate_as_exception
from pitstop.stdio import flush_stdout, guard_standard_streams, output_failure, silence_stdout

DEBUG_ENV = "PITSTOP_DEBUG"

# name -> "module:attribute" of a click.Command
COMMANDS: dict[str, str] = {
    "bench": "pitstop.bench.command:bench",
    "doctor": "pitstop.doctor.command:doctor",
    "explain": "pitstop.explain:explain",
    "lint": "pitstop.lint.command:lint",
    "monitor": "pitstop.monitor.command:monitor",
    "plot": "pitstop.monitor.command:plot",
    "profile": "pitstop.profile.command:profile",
    "system": "pitstop.system.command:system",
    "tune": "pitstop.tune.command:tune",
}


def _spec_exists(target: str) -> bool:
    module = target.split(":", 1)[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, target in COMMANDS.items() if _spec_exists(target))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _spec_exists(target):
            return None
        module_name, attr = target.split(":", 1)
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


def _exit_codes_help() -> str:
    rows = "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)
    return f"\b\nExit status (every command; docs/cli.md):\n{rows}"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=_exit_codes_help())
@click.version_option(__version__, prog_name="pitstop")
@click.option("--debug", is_flag=True, expose_value=False,
              help=f"Print the traceback of an internal error (also: {DEBUG_ENV}=1).")
def cli() -> None:
    """Find what makes PyTorch training slow on this machine, fix it, and prove it.

    \b
    Start with:
      pitstop doctor          the machine: driver, GPU link, storage, CPU, OS
      pitstop lint train.py   the training code: syncs, loader, precision
      pitstop bench           the speed-up ladder, measured here
      pitstop explain CODE    what a finding code means and how to fix it
    """


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point: the one error boundary of every command.

    A user mistake (:class:`UsageError`, click's usage errors) is one line and exit 2;
    an output that cannot be written is one line and exit 74; Ctrl-C, SIGTERM and
    SIGHUP unwind the command (its ``finally`` blocks remove temp files and end child
    processes) and exit 130, 143, 129; anything else is a bug: one line naming the
    command, exit 70, and the traceback only with ``--debug`` or ``PITSTOP_DEBUG=1``.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    guard_standard_streams()
    with terminate_as_exception():
        code = _guarded(args)
    sys.exit(code)


def _invoke(args: list[str]) -> int:
    try:
        with cli.make_context("pitstop", list(args)) as ctx:
            rv: Any = cli.invoke(ctx)
    except click.exceptions.Exit as done:  # --help, --version
        return done.exit_code
    return rv if isinstance(rv, int) else EXIT_OK


def _guarded(args: list[str]) -> int:
    try:
        code = _invoke(args)
        flush_stdout()  # a broken pipe or a full disk shows here, not at exit
        return code
    except UsageError as err:
        _say(f"pitstop: error: {err.message}")
        return EXIT_USAGE
    except click.exceptions.Abort:
        _say("Aborted.")
        return EXIT_INTERRUPTED
    except click.UsageError as err:  # one line, like every other usage error
        where = err.ctx.command_path if err.ctx is not None else "pitstop"
        _say(f"pitstop: error: {err.format_message()} (see `{where} --help`)")
        return EXIT_USAGE
    except click.ClickException as err:
        with contextlib.suppress(OSError):
            err.show()
        # click's generic exit code 1 would read as "findings"
        return EXIT_USAGE if err.exit_code == EXIT_FINDINGS else err.exit_code
    except KeyboardInterrupt:
        _say("Interrupted.")
        return EXIT_INTERRUPTED
    except SystemExit as err:
        # rich's Console answers a broken pipe with SystemExit(1), which would read as
        # "findings"; a command's own sys.exit keeps its code.
        if isinstance(err.__context__, BrokenPipeError):
            silence_stdout()
            _say("pitstop: error: cannot write standard output (broken pipe); nothing more "
                 "was written")
            return EXIT_OUTPUT
        if err.code is None or isinstance(err.code, int):
            return err.code or EXIT_OK
        _say(str(err.code))  # sys.exit("message"): Python prints it and exits 1
        return EXIT_FINDINGS
    except Terminated as err:
        _say(f"pitstop: terminated ({err})")
        return 128 + err.signum
    except OSError as err:
        what = output_failure(err)
        if what is None:
            return _internal_error(err, args)
        silence_stdout()
        _say(f"pitstop: error: cannot write {what} ({err.strerror or err}); "
             "nothing more was written")
        return EXIT_OUTPUT
    except Exception as err:
        return _internal_error(err, args)


def _say(line: str) -> None:
    """One line on stderr; a stderr that cannot be written is not worth a traceback."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(line, err=True)


def _debug(args: list[str]) -> bool:
    if os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    for arg in args:  # pitstop's own options stand before the command name
        if not arg.startswith("-"):
            return False
        if arg == "--debug":
            return True
    return False


def command_path(args: list[str]) -> str:
    """``pitstop lint``, ``pitstop system revert``: the command ``args`` run, as far as
    it can be told from them (for messages; never raises)."""
    words = ["pitstop"]
    try:
        group: click.Command = cli
        ctx = click.Context(cli, info_name="pitstop")
        rest = [a for a in args if a != "--"]
        while isinstance(group, click.Group):
            name = next((a for a in rest if not a.startswith("-")), None)
            sub = group.get_command(ctx, name) if name else None
            if sub is None:
                break
            words.append(name)  # type: ignore[arg-type]
            rest = rest[rest.index(name) + 1:]  # type: ignore[arg-type]
            group = sub
    except Exception:  # a command that fails to import: its name is enough
        pass
    return " ".join(words)


def _internal_error(err: BaseException, args: list[str]) -> int:
    command = command_path(args)
    debug = _debug(args)
    if debug:
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exception(err, file=sys.stderr)
    detail = (str(err).strip().splitlines() or [""])[0][:300]
    what = f"{type(err).__name__}: {detail}" if detail else type(err).__name__
    how = ("report it with the traceback above and `pitstop --version`" if debug else
           f"rerun with {DEBUG_ENV}=1 (or `pitstop --debug ...`) for the traceback, and "
           "report it with that and `pitstop --version`")
    _say(f"pitstop: internal error in `{command}` ({what}); this is a bug in pitstop: {how}")
    return EXIT_INTERNAL
