"""What a tune run shows while it works: a rich progress bar per trial on a terminal,
one line per finished trial otherwise (logs, CI, pipes)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from pitstop.progress_bar import open_bar

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


class Reporter(Protocol):
    def trial_started(self, label: str, planned_seconds: float) -> None: ...
    def tick(self) -> None: ...
    def trial_finished(self, text: str) -> None: ...
    def note(self, text: str) -> None: ...


class SilentReporter:
    """Reports nothing (the API's default)."""

    def __enter__(self) -> SilentReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def trial_started(self, label: str, planned_seconds: float) -> None:
        pass

    def tick(self) -> None:
        pass

    def trial_finished(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class ConsoleReporter:
    """Progress on a rich console (stderr): a live bar on a terminal, lines otherwise.

    The bar of a trial fills with elapsed time against the trial's planned time (trials
    are sized in seconds, not steps); ticks come from the trial's steps.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.started = 0.0
        self.planned = 1.0
        self._last_refresh = 0.0

    def __enter__(self) -> ConsoleReporter:
        if self.live:
            self.progress = open_bar(self.console)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def trial_started(self, label: str, planned_seconds: float) -> None:
        self.started = time.perf_counter()
        self.planned = max(0.01, planned_seconds)
        if self.progress is not None:
            from rich.markup import escape

            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(escape(label), total=self.planned)

    def tick(self) -> None:
        if self.progress is None or self.task is None:
            return
        now = time.perf_counter()
        if now - self._last_refresh < 0.05:
            return
        self._last_refresh = now
        self.progress.update(self.task, completed=min(self.planned, now - self.started))

    def trial_finished(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(escape(text), style="yellow", highlight=False, soft_wrap=True)
