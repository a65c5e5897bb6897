"""The live bar the long-running commands (bench, tune) show on a terminal: rich,
transient (gone when the work is done), on the command's stderr console."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def open_bar(console: Console, counted: str | None = None) -> Progress:
    """A started bar: the task's description, the bar, ``N/M counted`` when ``counted``
    names what is counted ("steps"), and the elapsed time. Stop it with ``.stop()``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn()]
    if counted:
        columns += [MofNCompleteColumn(), TextColumn(counted)]
    bar = Progress(*columns, TimeElapsedColumn(), console=console, transient=True)
    bar.start()
    return bar
