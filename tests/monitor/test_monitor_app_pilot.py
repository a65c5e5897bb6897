"""The Textual screen driven headless by Textual's pilot, over the real collector (real
/proc, real threads) and a recorded H100: it starts, draws the host and GPU panels,
reacts to every key and to a click on a column header, and exits cleanly on q."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")

from monitor_helpers import NVML_SETS, busy_process, wait_until

from pitstop.monitor.app import HelpScreen, MonitorApp
from pitstop.monitor.collector import Collector
from pitstop.monitor.feeds import LiveFeed, ReplayFeed
from pitstop.monitor.recording import Recorder, read_recording
from pitstop.telemetry.recorded_nvml import load_recorded_nvml


def _text(app: MonitorApp, selector: str) -> str:
    from textual.widgets import Static

    return str(app.query_one(selector, Static).render())


async def _until(pilot: Any, check: Any, timeout: float = 20.0) -> None:
    waited = 0.0
    while not check():
        if waited > timeout:
            raise AssertionError("the screen never got there")
        await pilot.pause(0.1)
        waited += 0.1


def test_starts_shows_panels_reacts_to_keys_and_quits(tmp_path: Path) -> None:
    nv = load_recorded_nvml(NVML_SETS / "h100-sxm-compute.json")
    recorder = Recorder(tmp_path / "ui.jsonl", interval_s=0.3)
    feed = LiveFeed(Collector(interval_s=0.3, nvml=nv), recorder)
    app = MonitorApp(feed)
    seen: dict[str, Any] = {}

    async def drive() -> None:
        from textual.widgets import DataTable

        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.snapshot is not None and "HOST" in _text(app, "#host"))
            host = _text(app, "#host")
            assert "memory" in host and "/dev/shm" in host and "iowait" in host and "load" in host
            gpus = _text(app, "#gpus")
            assert "NVIDIA H100 80GB HBM3" in gpus and "SM act" in gpus and "tensor" in gpus
            assert _text(app, "#verdict").startswith("▶ ")
            # Other torch processes on the machine may come first; the GPU's line is there.
            assert any(v["line"].startswith("GPU 0 busy") for v in app.snapshot["verdicts"])
            table = app.query_one("#procs", DataTable)
            # Busy processes are ranked from two scans 2 s apart: the first screens have none.
            await _until(pilot, lambda: table.row_count > 0)
            seen["rows"] = table.row_count
            await pilot.press("p")
            assert feed.paused and "PAUSED" in _text(app, "#header")
            held = app.snapshot
            await pilot.pause(1.0)
            assert app.snapshot is held  # the screen holds still...
            await pilot.press("space")
            assert not feed.paused
            await _until(pilot, lambda: app.snapshot is not held)  # ...and moves on again
            await pilot.press("s")
            assert app.sort == "rss"
            await pilot.press("t")
            assert app.tree_view is False
            await pilot.press("t")
            await pilot.press("slash")
            await pilot.press(*"zz-no-such-process")
            await _until(pilot, lambda: table.row_count == 0)
            await pilot.press("escape")
            await _until(pilot, lambda: table.row_count > 0)
            await pilot.press("question_mark")
            await _until(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("x")
            await _until(pilot, lambda: not isinstance(app.screen, HelpScreen))
            # Mouse: a click on the GPU MEM header sorts by GPU memory. Columns: PID (8),
            # CPU % (6), RSS (9), GPU MEM, each with one space of padding on both sides.
            # Paused first: a verdict that wraps to one more line moves the table down.
            await pilot.press("p")
            await pilot.click("#procs", offset=(8 + 2 + 6 + 2 + 9 + 2 + 3, 0))
            await _until(pilot, lambda: app.sort == "gpu_mem")
            await pilot.press("p")
            await pilot.press("q")
        seen["exited"] = True

    with busy_process():  # a row in the table even on a machine where nothing else runs
        try:
            asyncio.run(drive())
        finally:
            feed.close()
    assert seen["exited"] and app.return_code in (0, None)
    assert seen["rows"] > 0
    assert len(read_recording(tmp_path / "ui.jsonl").snapshots) >= 3  # recorded while shown


def test_replay_plays_a_recording_and_pauses_its_clock(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rec = Recorder(path, interval_s=0.2)
    nv = load_recorded_nvml(NVML_SETS / "h100-sxm-input.json")
    collector = Collector(interval_s=0.2, nvml=nv)
    collector.prime()
    for _ in range(6):
        collector.prime()
        snap = collector.assemble()
        snap["t"] = snap["t"]  # real times, a few ms apart
        rec.write(snap)
    rec.close()
    recording = read_recording(path)
    for i, s in enumerate(recording.snapshots):  # spread them 1 s apart, as recorded at 1 Hz
        s["t"] = 1000.0 + i
    feed = ReplayFeed(recording, speed=20.0)
    app = MonitorApp(feed)

    async def drive() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: app.snapshot is not None)
            assert "replay of r.jsonl" in _text(app, "#header")
            assert "GPU 0" in _text(app, "#gpus")
            await pilot.press("p")
            t = feed.latest()["t"]
            await pilot.pause(0.5)
            assert feed.latest()["t"] == t
            await pilot.press("p")
            await _until(pilot, lambda: feed.finished)
            await _until(pilot, lambda: "replay ended" in _text(app, "#header"))
            await pilot.press("q")

    asyncio.run(drive())


def test_eight_gpus_on_a_small_screen_get_one_line_each() -> None:
    import json

    from textual.widgets import DataTable

    from pitstop.telemetry.recorded_nvml import RecordedNvml

    one = json.loads((NVML_SETS / "h100-sxm-compute.json").read_text())
    eight = dict(one, gpus=[dict(one["gpus"][0], static=dict(one["gpus"][0]["static"], uuid=f"GPU-{i}"))
                            for i in range(8)])
    feed = LiveFeed(Collector(interval_s=0.3, nvml=RecordedNvml(eight)))
    app = MonitorApp(feed)

    async def drive() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: "GPU 7" in _text(app, "#gpus"))
            gpus = _text(app, "#gpus")
            assert gpus.startswith("8 GPUs  NVIDIA H100 80GB HBM3")
            assert len(gpus.splitlines()) == 9 and all(len(line) <= 80 for line in gpus.splitlines())
            assert app.query_one("#procs", DataTable).size.height >= 3  # the table still shows
            await pilot.press("q")

    try:
        asyncio.run(drive())
    finally:
        feed.close()


def test_the_wheel_and_the_cursor_survive_the_refill_of_every_sample(tmp_path: Path) -> None:
    """A refill each sample must not throw the view back to the top (DataTable.clear()
    resets it) nor move the cursor to another process when the order changes."""
    from textual import events
    from textual.widgets import DataTable

    collector = Collector(interval_s=0.2, gpu=False)

    def with_a_process() -> Any:
        collector.prime()
        snap = collector.assemble()
        return snap if snap["processes"] or snap["other_processes"] else None

    with busy_process():  # a process to copy, even on a machine where nothing else runs
        base = wait_until(with_a_process, every=0.3)
    collector.close()
    path = tmp_path / "many.jsonl"
    rec = Recorder(path, interval_s=0.25)
    for i in range(80):  # 40 busy processes whose CPU order turns over every sample
        others = [dict(base["processes"][0] if base["processes"] else base["other_processes"][0],
                       pid=50000 + k, ppid=1, role="other", trainer=None, cmdline=f"job {k}",
                       cpu_cores=((k + i) % 40) / 40) for k in range(40)]
        rec.write(dict(base, t=1000.0 + 0.25 * i, processes=[], other_processes=others))
    rec.close()
    feed = ReplayFeed(read_recording(path))
    app = MonitorApp(feed)

    async def drive() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: app.snapshot is not None)
            table = app.query_one("#procs", DataTable)
            await _until(pilot, lambda: table.max_scroll_y > 10)
            for _ in range(4):  # the mouse wheel, over the table
                await pilot._post_mouse_events([events.MouseScrollDown], "#procs", offset=(10, 4))
            await pilot.pause(0.1)
            scrolled = table.scroll_y
            assert scrolled > 0
            shown = app._shown_t
            await _until(pilot, lambda: app._shown_t != shown)  # at least one refill later
            await pilot.pause(0.6)
            assert table.scroll_y == scrolled
            table.move_cursor(row=3)
            pid = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            shown = app._shown_t
            await _until(pilot, lambda: app._shown_t != shown)
            row = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            assert row == pid and table.cursor_row != 3  # same process, elsewhere in the order
            await pilot.press("q")

    asyncio.run(drive())


def test_without_gpus_the_host_panel_takes_a_wide_terminal_whole() -> None:
    feed = LiveFeed(Collector(interval_s=0.3, gpu=False))
    app = MonitorApp(feed)

    async def drive() -> None:
        from textual.widgets import Static

        async with app.run_test(size=(200, 60)) as pilot:
            await _until(pilot, lambda: app.snapshot is not None and "HOST" in _text(app, "#host"))
            await pilot.pause(0.3)
            assert app.query_one("#panels").has_class("narrow")
            assert app.query_one("#host", Static).size.width == 200
            assert "no GPU panels" in _text(app, "#gpus")
            await pilot.press("q")

    try:
        asyncio.run(drive())
    finally:
        feed.close()
