"""The ``pitstop`` command line: one group, every subcommand a thin function over its package.

Subcommands are imported only when they run, so ``pitstop doctor`` never pays for
importing the linter, and nothing imports torch unless the command needs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from pitstop import __version__
from pitstop.errors import EXIT_USAGE, UsageError

# name -> "module:attribute" of a click.Command
COMMANDS: dict[str, str] = {
    "bench": "pitstop.bench.command:bench",
    "doctor": "pitstop.doctor.command:doctor",
    "explain": "pitstop.explain:explain",
    "lint": "pitstop.lint.command:lint",
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pitstop")
def cli() -> None:
    """Find what makes PyTorch training slow on this machine, fix it, and prove it.

    \b
    Start with:
      pitstop doctor          the machine: driver, GPU link, storage, CPU, OS
      pitstop lint train.py   the training code: syncs, loader, precision
      pitstop bench           the speed-up ladder, measured here
      pitstop explain CODE    what a finding code means and how to fix it
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps user mistakes to exit code 2 without a traceback."""
    try:
        rv: Any = cli.main(args=argv, prog_name="pitstop", standalone_mode=False)
    except UsageError as err:
        click.echo(f"pitstop: error: {err.message}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # `pitstop doctor | head` closed our stdout: not an error worth a traceback.
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)
