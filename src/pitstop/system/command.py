"""``pitstop system show|apply|revert``: the OS settings a training machine wants.

Exit codes: ``show`` 0 when every setting is at its training value (or the machine has
no such knob), 1 when some setting differs. ``apply``/``revert`` 0 when everything asked
for was done (or, without ``--yes``, after printing the plan), 1 when something was
skipped or failed (and was rolled back), 2 for bad input or missing root.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

import click
from rich.markup import escape

from pitstop.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from pitstop.sysroot import Sysroot
from pitstop.system.machine import INSTALL_HINTS, find_tool
from pitstop.system.settings import (
    PROFILES,
    SETTING_NAMES,
    Change,
    Machine,
    Reading,
    Setting,
    Status,
    inspect_all,
)
from pitstop.system.state import STATE_PATH, UNIT_PATH, State

# Below this many columns `show` prints the notes under the table, not in a column.
NOTE_COLUMN_MIN_WIDTH = 120
STATUS_STYLE = {Status.OK: "green", Status.DIFFERS: "bold yellow",
                Status.UNSUPPORTED: "dim", Status.UNKNOWN: "cyan"}


# ---------------------------------------------------------------- option parsing


def _sysroot(value: str | None) -> Sysroot:
    if value is None:
        return Sysroot.of(None)
    if not os.path.isdir(value):
        raise UsageError(f"--sysroot {value!r} is not a directory; give the root of a "
                         "machine tree (a copy of /sys, /proc, /etc ...)")
    return Sysroot.of(os.path.abspath(value))


def _data_path(sr: Sysroot, value: str | None) -> str | None:
    if value is None:
        return None
    if not sr.is_live:
        # A path on the fake machine: it need not exist on this one.
        if not value.startswith("/"):
            raise UsageError(f"--data {value!r}: with --sysroot give an absolute path "
                             "on that machine")
        return os.path.normpath(value)
    if not os.path.exists(value):
        raise UsageError(f"--data {value!r} does not exist; give the dataset directory")
    return os.path.realpath(value)


def _names(only: tuple[str, ...], profile: str) -> tuple[str, ...]:
    if profile not in PROFILES:
        raise UsageError(f"unknown --profile {profile!r}; available: {', '.join(PROFILES)}")
    if not only:
        return PROFILES[profile]
    wanted = [n.strip() for item in only for n in item.split(",") if n.strip()]
    if not wanted:
        raise UsageError(f"--only {','.join(only)!r} names no setting; choose from: "
                         f"{', '.join(SETTING_NAMES)}")
    for n in wanted:
        if n not in SETTING_NAMES:
            raise UsageError(f"unknown setting {n!r} for --only; choose from: "
                             f"{', '.join(SETTING_NAMES)}")
    return tuple(n for n in SETTING_NAMES if n in wanted)


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def _environment(m: Machine) -> dict[str, Any]:
    sys_mount = m.read_only_reason("/sys/devices/system/cpu")
    return {"sysroot": str(m.sr.root), "live": m.sr.is_live, "euid": os.geteuid(),
            "container": m.container, "sysfs_read_only": bool(sys_mount),
            "data": m.data_path}


def _environment_notes(m: Machine) -> list[str]:
    notes = []
    ro = m.read_only_reason("/sys/devices/system/cpu")
    if ro:
        notes.append(f"{ro}: pitstop cannot change CPU or kernel settings from here; "
                     "the host must run the host commands below (or "
                     "`sudo pitstop system apply --yes` on the host).")
    elif m.container:
        notes.append(f"this is a {m.container} container with a writable /sys: kernel "
                     "settings changed here are the HOST's, for every container on it.")
    return notes


def _suggest(m: Machine, verb: str, names: tuple[str, ...],
             extra: tuple[str, ...] = ()) -> str:
    """The pitstop command line that does ``verb`` on this same machine."""
    argv = ["pitstop", "system", verb, *extra]
    if names and set(names) != set(SETTING_NAMES):
        argv += ["--only", ",".join(names)]
    if m.data_path and (not names or "readahead" in names):
        argv += ["--data", m.data_path]
    if not m.sr.is_live:
        argv += ["--sysroot", str(m.sr.root)]
    return shlex.join(argv)


# ---------------------------------------------------------------- the group


@click.group()
def system() -> None:
    """The OS settings a training machine wants: show, apply (with consent), revert.

    \b
    pitstop system show                    every setting: current, wanted, why
    pitstop system apply                   dry run: the exact writes and commands
    sudo pitstop system apply --yes        apply them (previous values saved first)
    sudo pitstop system revert --yes       restore exactly what was saved
    """


_sysroot_opt = click.option("--sysroot", metavar="DIR", default=None,
                            help="The machine tree under DIR instead of / (a fake or recorded "
                                 "machine; apply and revert change it).")
_json_opt = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_data_opt = click.option("--data", "data", metavar="PATH", default=None,
                         help="The dataset directory: check the readahead of its disk.")
_only_opt = click.option("--only", "only", multiple=True, metavar="NAME",
                         help=f"Only these settings (repeat or comma-separate): "
                              f"{', '.join(SETTING_NAMES)}.")


@system.command()
@_sysroot_opt
@_data_opt
@_only_opt
@_json_opt
def show(sysroot: str | None, data: str | None, only: tuple[str, ...], as_json: bool) -> int:
    """Every setting: its current value, the value training wants, and why."""
    sr = _sysroot(sysroot)
    names = _names(only, "training")
    m = Machine.probe(sr, _data_path(sr, data),
                      gpus=any(n.startswith("gpu-") for n in names))
    readings = inspect_all(m, names)
    differs = any(r.status is Status.DIFFERS for _, r in readings)
    state = _state_or_none(sr)
    if as_json:
        click.echo(json.dumps({
            "environment": _environment(m),
            "settings": [r.to_dict(s) for s, r in readings],
            "findings": [f.to_dict() for f in _findings(m, readings)],
            "saved_state": state.to_dict() if state else None,
        }, indent=2))
        return EXIT_FINDINGS if differs else EXIT_OK
    _print_show(m, readings, state)
    return EXIT_FINDINGS if differs else EXIT_OK


def _state_or_none(sr: Sysroot) -> State | None:
    try:
        return State.load(sr)
    except UsageError:
        return None


def _findings(m: Machine, readings: list[tuple[Setting, Reading]]) -> list[Any]:
    from pitstop.findings import Finding, Remedy, Severity

    out = []
    ro = m.read_only_reason("/sys/devices/system/cpu")
    if ro:
        out.append(Finding("SY012", "sysfs is read-only here (container)", Severity.INFO,
                           {"mount": ro, "container": m.container or "unknown"},
                           Remedy.advice("run `sudo pitstop system apply --yes` on the host")))
    for s, r in readings:
        if r.status is not Status.DIFFERS:
            continue
        out.append(Finding(
            s.code, s.title, Severity.WARNING,
            {"current": r.current, "wanted": r.wanted, "changes": len(r.changes)},
            Remedy.pitstop("sudo " + _suggest(m, "apply", (s.name,), ("--yes",)),
                           "previous values are saved; `pitstop system revert --yes` "
                           "restores them")))
    return out


def _print_show(m: Machine, readings: list[tuple[Setting, Reading]],
                state: State | None) -> None:
    from rich.table import Table

    console = _console()
    # A note column is readable only on a wide terminal; on a narrow one the notes
    # follow the table, one per line, so the columns keep their words whole.
    wide = console.width >= NOTE_COLUMN_MIN_WIDTH
    table = Table(title="pitstop system: OS settings for training")
    table.add_column("setting", no_wrap=True, min_width=max(len(n) for n in SETTING_NAMES))
    table.add_column("status", no_wrap=True)
    table.add_column("current", overflow="fold", ratio=3)
    table.add_column("wanted", overflow="fold", ratio=2)
    if wide:
        table.add_column("note", overflow="fold", ratio=4)
    for s, r in readings:
        row = [s.name, f"[{STATUS_STYLE[r.status]}]{r.status.value}[/]",
               escape(r.current), escape(r.wanted)]
        if wide:
            row.append(f"[dim]{escape(r.detail)}[/]" if r.detail else "")
        table.add_row(*row)
    console.print(table)
    notes = [(s.name, r.detail) for s, r in readings if r.detail]
    if notes and not wide:
        console.print("[bold]Notes:[/]")
        console.print(_name_grid([(n, f"[dim]{escape(d)}[/]") for n, d in notes]))
    console.print("[bold]Why:[/]")
    console.print(_name_grid([(s.name, escape(s.why)) for s, _r in readings]))
    for note in _environment_notes(m):
        console.print(f"[bold]note:[/] {escape(note)}")
    differ = [s.name for s, r in readings if r.status is Status.DIFFERS]
    if differ:
        console.print(f"{len(differ)} setting(s) differ: {', '.join(differ)}. "
                      f"See the exact changes: {escape(_suggest(m, 'apply', tuple(differ)))}")
    if m.read_only_reason("/sys/devices/system/cpu") or m.container:
        _print_host_commands(console, m, readings, blocked_only=False)
    if state is not None:
        console.print(f"pitstop changed this machine on {state.created} "
                      f"({len(state.entries)} values saved in {STATE_PATH}); "
                      "`sudo pitstop system revert --yes` restores them.")


def _name_grid(rows: list[tuple[str, str]]) -> Any:
    """Setting names beside texts that wrap under themselves, not under the name."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for name, text in rows:
        grid.add_row(f"  {name}", text)
    return grid


def _print_host_commands(console: Any, m: Machine, readings: list[tuple[Setting, Reading]],
                         *, blocked_only: bool) -> None:
    """What an admin runs by hand (on the host, for a container) for each setting."""
    hosts = [(s.name, r.host_command) for s, r in readings
             if r.status is Status.DIFFERS and r.host_command
             and (not blocked_only or any(c.blocked for c in r.changes))]
    if hosts:
        console.print("[bold]On the host (or by hand), run:[/]")
        for name, cmd in hosts:
            console.print(f"  {escape(cmd)}    [dim]# {name}[/]", soft_wrap=True)
        if any("cpupower" in cmd for _, cmd in hosts) and find_tool(m.sr, "cpupower") is None:
            console.print(f"  [dim](cpupower is not installed here: "
                          f"{INSTALL_HINTS['cpupower']})[/]")


# ---------------------------------------------------------------- apply


def _print_plan(m: Machine, readings: list[tuple[Setting, Reading]],
                changes: list[Change], dry_run: bool) -> None:
    console = _console()
    if dry_run:
        console.print("[bold]Dry run[/]: nothing was changed. Exact writes and commands:"
                      if changes else "Dry run: nothing to change.")
    for s, r in readings:
        if not r.changes:
            continue
        console.print(f"[bold]{s.name}[/]  {escape(r.current)} -> {escape(r.wanted)}")
        for c in r.changes:
            line = f"  {escape(c.action.describe())}"
            if c.blocked:
                line = (f"  [dim]{escape(c.action.describe())}[/]  "
                        f"[red]skipped: {escape(c.blocked)}[/]")
            console.print(line, soft_wrap=True)
    ok = [s.name for s, r in readings if r.status is Status.OK]
    if ok:
        console.print(f"[green]already at the training value:[/] {', '.join(ok)}")
    for s, r in readings:
        if r.status in (Status.UNSUPPORTED, Status.UNKNOWN):
            console.print(f"[dim]{s.name}: {r.status.value}: {escape(r.detail)}[/]")
    for note in _environment_notes(m):
        console.print(f"[bold]note:[/] {escape(note)}")
    _print_host_commands(console, m, readings, blocked_only=True)


@system.command()
@click.option("--profile", default="training", metavar="NAME", show_default=True,
              help="The set of settings to apply (only `training` exists).")
@_only_opt
@click.option("--yes", is_flag=True, help="Really apply (needs root). Without it: dry run.")
@click.option("--persist", is_flag=True,
              help=f"Also install {UNIT_PATH}, which re-applies them at boot.")
@_data_opt
@_sysroot_opt
@_json_opt
def apply(profile: str, only: tuple[str, ...], yes: bool, persist: bool, data: str | None,
          sysroot: str | None, as_json: bool) -> int:
    """Bring settings to their training values: a dry run unless --yes (and root)."""
    from pitstop.system.apply import apply_changes, boot_argv, exclusive, may_change, unit_text

    sr = _sysroot(sysroot)
    names = _names(only, profile)
    data_path = _data_path(sr, data)
    if not yes:
        m = Machine.probe(sr, data_path, gpus=any(n.startswith("gpu-") for n in names))
        readings = inspect_all(m, names)
        changes = [c for _, r in readings for c in r.changes]
        if as_json:
            click.echo(json.dumps({"dry_run": True, "environment": _environment(m),
                                   "plan": [c.to_dict() for c in changes]}, indent=2))
            return EXIT_OK
        _print_plan(m, readings, changes, dry_run=True)
        if any(not c.blocked for c in changes) or persist:
            extra = ("--yes", "--persist") if persist else ("--yes",)
            click.echo("To apply: sudo " + _suggest(m, "apply", names if only else (), extra))
            click.echo(f"(previous values are saved to {STATE_PATH} first; "
                       "`sudo pitstop system revert --yes` restores them)")
        return EXIT_OK

    refusal = may_change(sr)
    if refusal:
        raise UsageError(f"{refusal}: nothing was changed; rerun as root "
                         "(sudo pitstop system apply --yes ...), or drop --yes to see "
                         "the plan")
    unit = unit_text(boot_argv(sr, names, data_path)) if persist else None
    try:
        # The plan is read under the lock, so the saved values are the ones overwritten.
        with exclusive(sr):
            m = Machine.probe(sr, data_path, gpus=any(n.startswith("gpu-") for n in names))
            readings = inspect_all(m, names)
            changes = [c for _, r in readings for c in r.changes]
            outcome = apply_changes(sr, changes, persist_unit=unit)
    except OSError as err:
        raise UsageError(f"cannot save the previous values under {sr.path(STATE_PATH).parent} "
                         f"({err.strerror or err}); nothing was changed") from None
    if as_json:
        click.echo(json.dumps({"dry_run": False, "environment": _environment(m),
                               "plan": [c.to_dict() for c in changes],
                               "outcome": outcome.to_dict()}, indent=2))
    else:
        _print_outcome(outcome, "applied")
        if outcome.skipped:
            _print_host_commands(_console(), m, readings, blocked_only=True)
    return EXIT_OK if outcome.ok and not outcome.skipped else EXIT_FINDINGS


def _print_outcome(outcome: Any, verb: str) -> None:
    console = _console()
    for line in outcome.done:
        console.print(f"[green]{verb}[/] {escape(line)}", soft_wrap=True)
    for line in outcome.skipped:
        console.print(f"[yellow]skipped[/] {escape(line)}", soft_wrap=True)
    for path in outcome.persisted:
        console.print(f"[green]{'installed' if verb == 'applied' else 'removed'}[/] {path}")
    if outcome.failed:
        console.print(f"[bold red]failed[/] {escape(outcome.failed)}", soft_wrap=True)
    for line in outcome.rolled_back:
        console.print(f"[yellow]rolled back[/] {escape(line)}", soft_wrap=True)
    for line in outcome.rollback_failed:
        console.print(f"[bold red]could not restore[/] {escape(line)}", soft_wrap=True)
    if verb == "applied":
        if outcome.failed and not outcome.rollback_failed:
            console.print("Every change of this run was undone; the machine is as before.")
        elif outcome.rollback_failed:
            console.print(f"Some values could not be restored; they stay saved in "
                          f"{STATE_PATH}: fix the cause and run `sudo pitstop system "
                          "revert --yes`.")
        elif outcome.done or outcome.persisted:
            console.print(f"Previous values saved in {STATE_PATH}; "
                          "`sudo pitstop system revert --yes` restores them.")
        elif not outcome.skipped:
            console.print("Nothing to change: every setting is at its training value.")
    elif outcome.state_removed:
        console.print(f"Everything restored; removed {STATE_PATH}.")
    elif outcome.failed:
        console.print(f"{outcome.failed}; they stay saved in {STATE_PATH} for another try.")


# ---------------------------------------------------------------- revert


@system.command()
@click.option("--yes", is_flag=True, help="Really restore (needs root). Without it: dry run.")
@_sysroot_opt
@_json_opt
def revert(yes: bool, sysroot: str | None, as_json: bool) -> int:
    """Restore exactly the values saved by `apply`, then remove the saved state."""
    from pitstop.system.apply import may_change, revert_state

    sr = _sysroot(sysroot)
    refusal = may_change(sr) if yes else ""
    if refusal:
        raise UsageError(f"{refusal}: nothing was changed; rerun as root "
                         "(sudo pitstop system revert --yes)")
    state = State.load(sr)
    if state is None:
        if as_json:
            click.echo(json.dumps({"dry_run": not yes, "saved_state": None}, indent=2))
        else:
            click.echo(f"Nothing to revert: no saved state at {sr.path(STATE_PATH)}.")
        return EXIT_OK
    if not yes:
        if as_json:
            click.echo(json.dumps({"dry_run": True, "saved_state": state.to_dict()}, indent=2))
            return EXIT_OK
        console = _console()
        console.print(f"[bold]Dry run[/]: nothing was changed. Saved on {state.created}; "
                      "revert would run:")
        for e in state.entries:
            console.print(f"  {escape(e.undo.describe())}    [dim]# {escape(e.setting)} "
                          f"{escape(e.target)}: back to {escape(e.previous)}[/]", soft_wrap=True)
        for p in state.persist:
            console.print(f"  rm {p}")
        click.echo("To restore: sudo " + shlex.join(
            ["pitstop", "system", "revert", "--yes"]
            + ([] if sr.is_live else ["--sysroot", str(sr.root)])))
        return EXIT_OK
    outcome = revert_state(sr)
    if outcome is None:
        click.echo("Nothing to revert: the saved state is gone (another revert?).")
        return EXIT_OK
    if as_json:
        click.echo(json.dumps({"dry_run": False, "outcome": outcome.to_dict()}, indent=2))
    else:
        _print_outcome(outcome, "restored")
    return EXIT_OK if outcome.ok else EXIT_FINDINGS
