"""What profile tells the user to run exists, and its thresholds are documented with numbers."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import click
import pytest

import pitstop.train
from pitstop.cli import COMMANDS
from pitstop.findings import all_docs
from pitstop.profile import verdict as v
from pitstop.profile.probe import SMALL_NUMEL, TINY_OP_US

ROOT = Path(__file__).resolve().parents[2]
PROFILE_SRC = ROOT / "src" / "pitstop" / "profile"
SOURCES = [*sorted(PROFILE_SRC.glob("*.py")), ROOT / "docs" / "profile.md"]
# `pitstop lint`, "pitstop doctor --data PATH --io", ("pitstop bench",) ... in code or docs.
MENTION = re.compile(r"""[`"(]pitstop ([a-z][a-z-]*)([^`"\n)]*)""")


def _command(name: str) -> click.Command:
    module, attr = COMMANDS[name].split(":", 1)
    cmd = getattr(importlib.import_module(module), attr)
    assert isinstance(cmd, click.Command)
    return cmd


def _mentions() -> list[tuple[str, str, str]]:
    found = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for m in MENTION.finditer(text):
            found.append((f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}", m[1], m[2]))
    return found


def test_every_pitstop_command_named_by_profile_exists_with_its_options() -> None:
    mentions = _mentions()
    assert len(mentions) >= 10  # the scan does see the remedies
    names = {name for _, name, _ in mentions}
    assert {"bench", "doctor", "lint", "system"} <= names
    for where, name, rest in mentions:
        assert name in COMMANDS, f"{where}: `pitstop {name}` is not a pitstop command"
        cmd = _command(name)
        words = rest.split()
        if isinstance(cmd, click.Group) and words and not words[0].startswith("-"):
            sub = cmd.commands.get(words[0])
            assert sub is not None, f"{where}: `pitstop {name} {words[0]}` does not exist"
            cmd, words = sub, words[1:]
        options = {opt for p in cmd.params for opt in p.opts}
        for word in words:
            if word == "--":
                break
            if word.startswith("--"):
                assert word in options, f"{where}: `pitstop {name}` has no option {word}"


def test_no_remedy_names_a_command_that_does_not_exist() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)
    for missing in ("pitstop tune", "pitstop monitor"):
        assert missing not in text
    docs = [d for d in all_docs() if d.code.startswith("PF")]
    assert len(docs) == 15
    for d in docs:
        assert "pitstop tune" not in d.fix + d.what and "pitstop monitor" not in d.fix


def test_library_names_in_remedies_exist() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)
    names = set(re.findall(r"pitstop\.train\.([A-Za-z_]+)", text))
    assert "loader" in names
    for name in names:
        assert hasattr(pitstop.train, name), f"pitstop.train.{name} does not exist"


@pytest.mark.parametrize(("code", "numbers"), [
    ("PF001", [v.INPUT_SHARE, v.INPUT_WARN_SHARE]),
    ("PF002", [v.INPUT_SHARE, v.LOADER_DISK_WAIT_SHARE, v.LOADER_RUNNING_SHARE]),
    ("PF003", [v.HOST_OVERHEAD_SHARE, v.GPU_BUSY_SHARE]),
    ("PF005", [v.COMPUTE_SHARE]),
    ("PF006", [v.MATMUL_SHARE, v.COMPUTE_SHARE]),
    ("PF008", [v.H2D_SHARE]),
    ("PF012", [v.OTHER_SHARE]),
])
def test_explain_texts_state_the_thresholds(code: str, numbers: list[float]) -> None:
    doc = next(d for d in all_docs() if d.code == code)
    for share in numbers:
        assert f"{100 * share:.0f} %" in doc.what, (code, share, doc.what)


def test_docs_table_states_the_thresholds() -> None:
    md = (ROOT / "docs" / "profile.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in md.splitlines()
            if line.startswith("| `") and "-bound" in line}
    assert f"≥ {100 * v.INPUT_SHARE:.0f} %" in rows["input-bound"]
    io = rows["io-bound"]
    assert f"iowait ≥ {v.IOWAIT_PCT:.0f} %" in io and f"≥ {v.DISK_BUSY_PCT:.0f} % busy" in io
    host = rows["host-bound"]
    assert f"≥ {100 * v.HOST_OVERHEAD_SHARE:.0f} %" in host
    assert f"< {100 * v.GPU_BUSY_SHARE:.0f} %" in host
    assert f"{TINY_OP_US:.0f} µs" in md and f"{SMALL_NUMEL:,}".replace(",", " ") in md
    assert f"< {100 * v.MATMUL_SHARE:.0f} %" in rows["memory-bound"]
    assert f"≥ {100 * v.COMPUTE_SHARE:.0f} %" in rows["compute-bound"]
