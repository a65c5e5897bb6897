"""The panels' text layout: whole words and whole numbers at any width."""

from __future__ import annotations

from pitstop.monitor.history import History
from pitstop.monitor.panels import fit_words, host_panel, process_rows, sparkline, verdict_text


def test_fit_words_cuts_only_at_words_and_says_so() -> None:
    assert fit_words("python train.py --epochs 10", 40) == "python train.py --epochs 10"
    assert fit_words("python train.py --epochs 10", 20) == "python train.py…"
    assert fit_words("/a/very/long/single/path", 10) == "/a/very/l…"
    assert fit_words("anything", 0) == ""


def test_sparkline_scales_and_pads() -> None:
    assert sparkline([0, 50, 100], 3, 100) == "▁▅█"
    assert sparkline([None, 100], 4, 100) == "   █"
    assert sparkline([5, 5], 2) == "██"


def _snap(load: list[float]) -> dict:
    return {"host": "node7", "cpu": {"count": 2, "busy_pct": 50.0, "per_core_pct": [40.0, 60.0],
                                     "iowait_pct": 12.0, "load_avg": load},
            "memory": {"total_bytes": 2**35, "used_bytes": 2**34, "swap_total_bytes": 0,
                       "swap_used_bytes": 0, "shm_total_bytes": 2**33, "shm_used_bytes": 2**30},
            "disks": [{"name": "nvme0n1", "read_bps": 3.2e8, "write_bps": 1e6, "busy_pct": 90.0}],
            "gpus": [], "processes": [], "other_processes": [], "verdicts": []}


def test_host_panel_keeps_every_number_whole_at_80_columns() -> None:
    text = str(host_panel(_snap([10.32, 10.23, 8.72]), History(), 80))
    assert "10.3 10.2 8.72" in text
    assert "320.0 MB/s" in text and "nvme0n1 r" in text and "12 %" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_tree_rows_and_the_filter_keep_a_trainer_with_its_workers() -> None:
    def p(pid: int, role: str, cmd: str, trainer: int | None = None, ppid: int = 1) -> dict:
        return {"pid": pid, "ppid": ppid, "role": role, "trainer": trainer, "name": "python",
                "cmdline": cmd, "state": "running", "cpu_cores": 0.5, "rss_bytes": 2**28, "gpus": []}

    snap = _snap([0.1, 0.1, 0.1]) | {
        "processes": [p(10, "training", "python train.py"), p(11, "worker", "python train.py", 10, 10),
                      p(12, "worker", "python train.py", 10, 10), p(20, "training", "python other.py")],
        "verdicts": [{"pid": 10, "gpus": [], "verdict": "input-bound", "line": "PID 10 → input-bound"},
                     {"pid": 20, "gpus": [], "verdict": "compute-bound", "line": "PID 20 → compute-bound"}]}
    rows = process_rows(snap, width=100, filter_text="train.py")
    assert [r.pid for r in rows] == [10, 11, 12]
    assert [r.cells["command"] for r in rows[1:]] == ["├ DataLoader worker", "└ DataLoader worker"]
    shown = str(verdict_text(snap, 100, lines=3, pids={r.pid for r in rows}))
    assert "PID 10" in shown and "PID 20" not in shown


def test_commands_keep_kernel_thread_names_and_option_names_whole() -> None:
    def row(cmd: str, width: int) -> str:
        snap = _snap([0.1, 0.1, 0.1]) | {"other_processes": [
            {"pid": 7, "ppid": 2, "role": "other", "name": "x", "cmdline": cmd, "state": "sleeping",
             "cpu_cores": 0.1, "rss_bytes": 0, "gpus": []}]}
        return process_rows(snap, width=width)[0].cells["command"]

    assert row("[ksoftirqd/1]", 80) == "[ksoftirqd/1]"
    assert row("[kworker/u8:2-events_unbound]", 80) == "[kworker/u8:2-events_unbound]"
    long = ("/usr/bin/python3 /home/me/projects/detector/train.py --data=/mnt/datasets/coco/train2017 "
            "--epochs 300")
    assert row(long, 90) == "python3 …/train.py --data=…/train2017 --epochs 300"
    assert row(long, 80) == "python3 …/train.py --data=…/train2017…"
