"""Fix fixtures: ``fixtures/fixes/<mode>_<name>.input.py`` fixed by the real CLI must equal
``<mode>_<name>.output.py`` (``safe`` runs ``--fix``, ``unsafe`` adds ``--unsafe-fixes``);
fixing again changes nothing, and ``--diff`` shows the same change without writing."""

from __future__ import annotations

import shutil

import pytest
from lint_helpers import FIXTURES

from pitstop.lint.engine import cpus_usable
from pitstop.lint.rules._dataloader import suggested_workers

FIX_DIR = FIXTURES / "fixes"
CASES = sorted(FIX_DIR.glob("*.input.py"))


def _expected(path) -> str:
    text = path.with_name(path.name.replace(".input.py", ".output.py")).read_text()
    return text.replace("{workers}", str(suggested_workers(cpus_usable(), 1)))


@pytest.mark.parametrize("src", CASES, ids=[p.name.split(".")[0] for p in CASES])
def test_fix_output_and_idempotence(src, tmp_path, pitstop_cli) -> None:
    target = tmp_path / "train.py"
    shutil.copyfile(src, target)
    flags = ["--fix"] + (["--unsafe-fixes"] if src.name.startswith("unsafe") else [])
    env = {"LOCAL_WORLD_SIZE": "1"}
    r = pitstop_cli("lint", *flags, str(target), env=env)
    assert r.returncode in (0, 1), r.stderr
    assert "Fixed" in r.stderr
    assert target.read_text() == _expected(src)
    # fixing twice changes nothing the second time
    r2 = pitstop_cli("lint", *flags, str(target), env=env)
    assert "Fixed" not in r2.stderr
    assert target.read_text() == _expected(src)
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"


def test_diff_shows_without_writing(tmp_path, pitstop_cli) -> None:
    src = FIX_DIR / "safe_loader_and_amp.input.py"
    target = tmp_path / "train.py"
    shutil.copyfile(src, target)
    r = pitstop_cli("lint", "--diff", str(target))
    assert r.returncode == 1
    assert target.read_text() == src.read_text()
    assert "+    pin_memory=True," in r.stdout
    assert '-scaler = torch.cuda.amp.GradScaler()  # keep this comment' in r.stdout


def test_unsafe_fixes_need_fix_or_diff(pitstop_cli, tmp_path) -> None:
    r = pitstop_cli("lint", "--unsafe-fixes", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_fixes_leave_no_whitespace_only_lines(tmp_path, pitstop_cli) -> None:
    # Adding arguments to a multi-line call keeps one argument per line, indented like
    # the others, and never leaves a line of blanks (issue 10).
    target = tmp_path / "train.py"
    shutil.copyfile(FIX_DIR / "unsafe_multiline_call.input.py", target)
    r = pitstop_cli("lint", "--fix", "--unsafe-fixes", str(target), env={"LOCAL_WORLD_SIZE": "1"})
    assert "Fixed" in r.stderr, r.stderr
    lines = target.read_text().splitlines()
    assert not [ln for ln in lines if ln and not ln.strip()], lines
    added = [ln for ln in lines if "num_workers=" in ln or "persistent_workers=" in ln]
    assert added and all(ln.startswith("    ") and not ln.startswith("     ") for ln in added)
