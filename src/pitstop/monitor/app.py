"""The live screen (Textual): the verdict line, GPU and host panels, the process table.

It reads only the feed's latest snapshot (a few times a second; sampling runs on the
collector's threads and never waits for the screen) and lays the panels out for the
terminal's size: side by side from :data:`WIDE` columns, stacked below. Keys: ``q``
quit, ``p``/space pause, ``s`` sort, ``/`` filter, ``t`` tree on/off, ``?`` help; a click
on a column header sorts by it, the footer's keys are clickable, the table scrolls
with the wheel.

Only this module imports Textual (``pitstop[monitor]``); everything else in the monitor
works without it.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

from pitstop.monitor.feeds import Feed
from pitstop.monitor.history import History
from pitstop.monitor.panels import (
    SORT_KEYS,
    fit_words,
    gpu_panel,
    host_panel,
    process_columns,
    process_rows,
    verdict_text,
)

__all__ = ["HELP_TEXT", "WIDE", "MonitorApp"]

WIDE = 160  # columns from which the GPU and host panels sit side by side
REFRESH_S = 0.25

# Short lines: the box must fit 80x24 without a line wrapping mid-sentence.
HELP_TEXT = """\
pitstop monitor: keys

  q          quit
  p, space   pause the screen (sampling and recording go on)
  s          sort: CPU, RSS, GPU memory, PID, command
  /          filter (Enter keeps it, Escape clears it)
  t          tree on/off (DataLoader workers under their trainer)
  ?          this help

Mouse: click a column header to sort by it, click a key
in the footer, scroll the table with the wheel.

The top line is the verdict: pitstop profile's rules over
the last {window} of samples (see docs/monitor.md).

Press any key to close."""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; max-width: 100%; height: auto; max-height: 100%;
                          border: round $accent; padding: 0 1; background: $surface; }
    """

    def __init__(self, window: str = "30 s") -> None:
        super().__init__()
        self.window = window

    def compose(self) -> ComposeResult:
        yield Static(HELP_TEXT.format(window=self.window), id="help-text")

    def on_key(self) -> None:
        self.dismiss()

    def on_click(self) -> None:
        self.dismiss()


class ProcessTable(DataTable[Text]):
    """The process table; a click on its header row sorts by that column.

    DataTable's own HeaderSelected needs the hover state of the cell under the mouse,
    which every refill (each sample) resets: a click between two refills would be lost.
    The header row and the columns' widths are fixed, so the column is found from x."""

    columns_spec: tuple[tuple[str, str, int], ...] = ()

    def on_click(self, event: Any) -> None:
        if event.y != 0 or not self.columns_spec:
            return
        x = event.x + int(self.scroll_x)
        for key, _, width in self.columns_spec:
            x -= width + 2 * self.cell_padding
            if x < 0:
                self.post_message(self.SortBy(key))
                return

    class SortBy(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key


class MonitorApp(App[None]):
    """See the module docstring."""

    TITLE = "pitstop monitor"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #header { height: 1; background: $primary; color: $text; }
    #verdict { height: auto; min-height: 2; max-height: 10; padding: 0 0; }
    #panels { height: auto; }
    #panels.wide { layout: horizontal; }
    #panels.narrow { layout: vertical; }
    #gpus, #host { height: auto; }
    #panels.wide > #gpus { width: 1fr; margin-right: 1; }
    #panels.wide > #host { width: 1fr; }
    #procs { height: 1fr; min-height: 3; }
    #filter { dock: bottom; display: none; height: 3; }
    #filter.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause"),
        Binding("space", "pause", "Pause", show=False),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter"),
        Binding("t", "tree", "Tree"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, feed: Feed, *, history: int = 240) -> None:
        super().__init__()
        self.feed = feed
        self.history = History(history)
        self.sort = "cpu"
        self.tree_view = True
        self.filter_text = ""
        self._shown_t: float | None = None
        self._columns: list[tuple[str, str, int]] = []
        self.snapshot: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="header")
        yield Static(Text("starting…", style="dim"), id="verdict")
        with Horizontal(id="panels", classes="narrow"):
            yield Static("", id="gpus")
            yield Static("", id="host")
        yield ProcessTable(id="procs", cursor_type="row", zebra_stripes=False, cell_padding=1)
        yield Input(placeholder="filter processes (Enter keeps it, Escape clears it)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self.refresh_view)
        self.refresh_view()

    # ------------------------------------------------------------------ drawing
    def _wide(self) -> bool:
        """GPU and host panels side by side: a wide terminal, and GPUs to show (without
        them the host panel takes the whole width)."""
        return self.size.width >= WIDE and bool((self.snapshot or {}).get("gpus"))

    def _panel_width(self) -> int:
        width = self.size.width
        return (width - 1) // 2 if self._wide() else width

    def _verdict_lines(self) -> int:
        """How many verdicts the top shows: one on a small terminal, more on taller ones."""
        height = self.size.height
        return 1 if height < 40 else 3 if height < 60 else 5

    def _header(self) -> Text:
        snap = self.snapshot or {}
        # What matters most first: the line is shortened from its end on narrow screens.
        bits = ["pitstop monitor" + ("  PAUSED (p resumes)" if self.feed.paused else "")]
        if getattr(self.feed, "finished", False) and "replay" in self.feed.label:
            bits.append("replay ended")
        bits.append(self.feed.label)
        if snap:
            bits.append(f"every {snap.get('interval_s', 0):g} s")
        bits.append(f"sort: {self.sort}" + (f" · filter: {self.filter_text}" if self.filter_text else ""))
        return Text(fit_words("  ·  ".join(bits), self.size.width), style="bold")

    def refresh_view(self, force: bool = False) -> None:
        if getattr(self.feed, "finished", False) and "live" in self.feed.label:
            self.exit()
            return
        if self.feed.paused and self.snapshot is not None:
            return  # what is on the screen stays there
        snap = self.feed.latest()
        if snap is None:
            self.query_one("#header", Static).update(self._header())
            return
        if snap["t"] == self._shown_t and not force:
            return
        self._shown_t = snap["t"]
        self.snapshot = snap
        self.history.push(snap)
        self._draw()

    def _draw(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        panels = self.query_one("#panels", Horizontal)
        wide = self._wide()
        panels.set_class(wide, "wide")
        panels.set_class(not wide, "narrow")
        w = self._panel_width()
        core_rows = 4 if self.size.height >= 40 else 1
        disks = 4 if self.size.height >= 40 else 1
        self.query_one("#header", Static).update(self._header())
        shown = None
        if self.filter_text:
            shown = {r.pid for r in process_rows(snap, width=self.size.width,
                                                 filter_text=self.filter_text)}
        self.query_one("#verdict", Static).update(
            verdict_text(snap, self.size.width, lines=self._verdict_lines(), pids=shown))
        # Full GPU panels take ~8 rows each: more than a third of the screen, one line each.
        gpus = len(snap.get("gpus") or [])
        compact = gpus * 8 > self.size.height // (1 if wide else 3) + (8 if gpus == 1 else 0)
        self.query_one("#gpus", Static).update(gpu_panel(snap, self.history, w, compact=compact))
        self.query_one("#host", Static).update(host_panel(snap, self.history, w,
                                                          core_rows=core_rows, max_disks=disks))
        self._fill_table(snap)

    def _fill_table(self, snap: dict[str, Any]) -> None:
        table = self.query_one("#procs", DataTable)
        width = self.size.width - 2  # the table's scrollbar
        columns = process_columns(snap, width)
        if columns != self._columns:
            table.clear(columns=True)
            for key, head, w in columns:
                table.add_column(head, width=w, key=key)
            self._columns = columns
            if isinstance(table, ProcessTable):
                table.columns_spec = tuple(columns)
        # A refill (every sample) must not undo what the user did: the cursor stays on
        # the same process wherever it moves, and the view stays where the wheel put it
        # (DataTable.clear() resets both).
        keep_row, keep_y = table.cursor_row, table.scroll_y
        keep_pid = None
        if table.row_count:
            with contextlib.suppress(Exception):
                keep_pid = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        rows = process_rows(snap, width=width, sort=self.sort, tree=self.tree_view,
                            filter_text=self.filter_text)
        for r in rows:
            table.add_row(*(Text(r.cells[k], style=r.style) for k, _, _ in columns), key=str(r.pid))
        if rows:
            at = next((i for i, r in enumerate(rows) if str(r.pid) == keep_pid),
                      min(keep_row, len(rows) - 1))
            table.move_cursor(row=at, scroll=False)
            table.scroll_to(y=keep_y, animate=False, immediate=True)

    def on_resize(self) -> None:
        self._columns = []
        self._draw()

    # ------------------------------------------------------------------ keys & mouse
    def action_pause(self) -> None:
        self.feed.set_paused(not self.feed.paused)
        self.query_one("#header", Static).update(self._header())

    def action_sort(self) -> None:
        self.sort = SORT_KEYS[(SORT_KEYS.index(self.sort) + 1) % len(SORT_KEYS)]
        self._draw()

    def action_tree(self) -> None:
        self.tree_view = not self.tree_view
        self._draw()

    def action_help(self) -> None:
        # The window the verdicts on the screen were computed over (a replay: as recorded).
        windows = [v.get("window_s") for v in (self.snapshot or {}).get("verdicts") or []
                   if v.get("window_s")]
        window = getattr(getattr(self.feed, "collector", None), "window_s", None)
        shown = f"{window:g} s" if window else (f"~{max(windows):.0f} s" if windows else "30 s")
        self.push_screen(HelpScreen(shown))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("shown")
        box.value = ""
        self.filter_text = ""
        self.query_one("#procs", DataTable).focus()
        self._draw()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._draw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value
        event.input.remove_class("shown")
        self.query_one("#procs", DataTable).focus()
        self._draw()

    def on_process_table_sort_by(self, event: ProcessTable.SortBy) -> None:
        if event.key in SORT_KEYS and event.key != self.sort:
            self.sort = event.key
            self._draw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key in SORT_KEYS and key != self.sort:
            self.sort = key
            self._draw()
