"""The live screen in a real terminal (tmux) at 80x24 and 200x60: it draws the panels
with nothing cut mid-word, and ends on q with exit code 0."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from monitor_helpers import NVML_SETS
from pitstop_testing import REPO, SRC

from pitstop.monitor.app import HELP_TEXT

TMUX = shutil.which("tmux")
pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux): "
                                            "the real-terminal test of the live screen needs it"),
    pytest.mark.slow,
]
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _vocabulary() -> set[str]:
    """Every word the screen can show whole: pitstop's own texts, the recorded GPU,
    this machine's command lines and host name."""
    text = [p.read_text() for p in (REPO / "src" / "pitstop" / "monitor").glob("*.py")]
    text.append((REPO / "src" / "pitstop" / "profile" / "verdict.py").read_text())
    text += [p.read_text() for p in NVML_SETS.glob("*.json")]
    text.append(socket.gethostname())
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                text.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                    "utf-8", "replace"))
                text.append(Path(f"/proc/{pid}/comm").read_text())
            except OSError:
                continue
    return {w for t in text for w in WORD.findall(t)}


def cut_words(screen: str, vocabulary: set[str]) -> list[str]:
    """Words on the screen that are the start of a longer known word but not a word
    themselves, and are not marked as shortened with '…'."""
    bad = []
    for line in screen.splitlines():
        for m in WORD.finditer(line):
            word = m.group()
            if line[m.end():m.end() + 1] == "…" or word in vocabulary or len(word) < 3:
                continue
            if any(v.startswith(word) for v in vocabulary):
                bad.append(f"{word!r} in {line.strip()!r}")
    return bad


class Tmux:
    def __init__(self, width: int, height: int, command: str) -> None:
        self.socket = f"pitstop-test-{os.getpid()}-{width}"
        self.run("new-session", "-d", "-s", "mon", "-x", str(width), "-y", str(height), command)
        self.run("set-option", "-t", "mon", "remain-on-exit", "on")

    def run(self, *args: str) -> str:
        return subprocess.run([TMUX or "tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "mon")

    def wait_for(self, *needles: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(n in screen for n in needles):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{needles} never appeared on:\n{screen}")
            time.sleep(0.2)

    def wait_until_gone(self, needle: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while needle in self.screen():
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} still on the screen after {timeout} s")
            time.sleep(0.2)

    def _zombie_exit_status(self) -> int | None:
        """The exit status of the pane's process once it has exited but tmux has not
        reaped it yet (seen on a loaded machine: the process a zombie for seconds while
        the pane still reads alive). proc(5): field 52 of /proc/PID/stat is the exit
        status as waitpid(2) gives it."""
        pid = self.run("display-message", "-p", "-t", "mon", "#{pane_pid}").strip()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return None
        if fields[0] != "Z" or len(fields) < 50:
            return None
        return os.waitstatus_to_exitcode(int(fields[49]))

    def exit_status(self, timeout: float) -> int:
        """The command's exit status once it has ended (the pane stays, remain-on-exit)."""
        deadline = time.monotonic() + timeout
        while True:
            dead, _, status = self.run("display-message", "-p", "-t", "mon",
                                       "#{pane_dead} #{pane_dead_status}").strip().partition(" ")
            if dead == "1" and status.strip().lstrip("-").isdigit():
                return int(status)
            code = self._zombie_exit_status()
            if code is not None:
                return code
            if time.monotonic() > deadline:
                # Python runs with -X faulthandler: SIGABRT prints where every thread is.
                pid = int(self.run("display-message", "-p", "-t", "mon", "#{pane_pid}").strip())
                os.kill(pid, signal.SIGABRT)
                time.sleep(2)
                where = self.run("capture-pane", "-p", "-S", "-300", "-t", "mon")
                raise AssertionError(f"still running 20 s after q:\n{where}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.mark.parametrize(("width", "height"), [(80, 24), (200, 60)])
def test_draws_whole_words_and_ends_on_q(width: int, height: int) -> None:
    env = f"PYTHONPATH={shlex.quote(str(SRC))} TERM=xterm-256color"
    cmd = (f"{env} {shlex.quote(sys.executable)} -X faulthandler -m pitstop monitor --interval 0.4 "
           f"--nvml-recording {shlex.quote(str(NVML_SETS / 'h100-sxm-compute.json'))}")
    tmux = Tmux(width, height, cmd)
    try:
        tmux.wait_for("HOST", "GPU 0", "PID", "COMMAND", "Quit")
        time.sleep(2.0)  # a few samples: sparklines and rates filled in
        screen = tmux.screen()
        lines = screen.splitlines()
        assert len(lines) <= height and all(len(line) <= width for line in lines)
        for whole in ("NVIDIA H100 80GB HBM3", "SM act", "occupancy", "tensor", "memory", "power",
                      "iowait", "/dev/shm", "Quit", "Pause", "Sort", "Filter", "Tree", "Help"):
            assert whole in screen, (whole, screen)
        # The verdict line (which process it names depends on what runs on this machine).
        assert re.search(r"^▶ .+", screen, re.M), screen
        bad = cut_words(screen, _vocabulary())
        assert not bad, "\n".join(bad) + "\n" + screen
        # The help box: every line of it whole on the screen, none wrapped mid-sentence.
        tmux.run("send-keys", "-t", "mon", "?")
        shown = tmux.wait_for("Press any key to close.")
        for line in HELP_TEXT.format(window="30 s").splitlines():
            assert line.strip() in shown, (line, shown)
        tmux.run("send-keys", "-t", "mon", "x")
        tmux.wait_until_gone("Press any key to close.")  # else q only closes the help
        tmux.run("send-keys", "-t", "mon", "q")
        assert tmux.exit_status(timeout=20) == 0
    finally:
        tmux.close()


def test_the_cut_word_check_can_fail() -> None:
    vocab = {"occupancy", "train_loop", "python"}
    assert cut_words("occupanc    40 %", vocab) == ["'occupanc' in 'occupanc    40 %'"]
    assert cut_words("python tests/monitor/train_lo", vocab)
    assert cut_words("python tests/monitor/train_lo…", vocab) == []
    assert cut_words("occupancy 40 %", vocab) == []
