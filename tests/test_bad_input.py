"""Every case in issue 11's "Why", run exactly as written there: exit 2 (or the
documented code for an output that cannot be written), one line, no traceback, and
nothing created or changed outside the targets named on the command line.

(The cases with their own homes: `system revert` paths, format and ownership in
tests/system/test_system_state_trust.py, SIGTERM in tests/test_signals.py, the install
in tests/test_packaging.py, the flaky Ctrl-C in tests/bench.)
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pitstop_testing import pitstop_env, run_cli_as_nobody, run_cli_in_process

from pitstop.errors import EXIT_OUTPUT, EXIT_USAGE

# A training loop with one safe fix (LT007: torch.cuda.amp.autocast -> torch.amp.autocast).
FIXABLE = ("import torch\n"
           "for x, y in loader:\n"
           "    with torch.cuda.amp.autocast():\n"
           "        loss = model(x.cuda())\n"
           "    loss.backward()\n")


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = EXIT_USAGE) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ---------------------------------------------------------------- tracebacks that exit 1

def test_tool_pitstop_not_a_table_in_pyproject(tmp_path: Path, pitstop_cli) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool]\npitstop="x"\n')
    (tmp_path / "x.py").write_text(FIXABLE)
    err = one_line_error(pitstop_cli("lint", "x.py", cwd=tmp_path))
    assert "[tool.pitstop] must be a table, not a string" in err and "pyproject.toml" in err


@pytest.mark.parametrize("content, needle", [
    (os.urandom(4096), "not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than"),
    (None, "nvml.gpus must be an array, got a string"),
])
def test_doctor_from_on_bad_facts(tmp_path: Path, pitstop_cli, content: bytes | None,
                                  needle: str) -> None:
    facts = tmp_path / "facts.json"
    if content is None:  # real facts, collected here, with nvml.gpus = "x"
        collected = pitstop_cli("doctor", "--collect")
        assert collected.returncode == 0, collected.stderr
        doc = json.loads(collected.stdout)
        doc["nvml"]["gpus"] = "x"
        content = json.dumps(doc).encode()
    facts.write_bytes(content)
    err = one_line_error(pitstop_cli("doctor", "--from", str(facts)))
    assert err.startswith(f"pitstop: error: --from {facts}: ") and needle in err


def _lint_with_stdout(tmp_path: Path, redirect: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "x.py").write_text(FIXABLE)
    cmd = f"exec {sys.executable} -m pitstop lint x.py {redirect}"
    return subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=pitstop_env(),
                          capture_output=True, text=True, timeout=120)


def test_lint_to_a_full_disk(tmp_path: Path) -> None:
    err = one_line_error(_lint_with_stdout(tmp_path, "> /dev/full"), EXIT_OUTPUT)
    assert err == ("pitstop: error: cannot write standard output (No space left on device); "
                   "nothing more was written")


def test_lint_with_stdout_closed(tmp_path: Path) -> None:
    err = one_line_error(_lint_with_stdout(tmp_path, ">&-"), EXIT_OUTPUT)
    assert "cannot write standard output (it is closed)" in err


def test_lint_into_a_pipe_whose_reader_left(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text(FIXABLE)
    proc = subprocess.Popen([sys.executable, "-m", "pitstop", "lint", "x.py"], cwd=tmp_path,
                            env=pitstop_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == EXIT_OUTPUT
    assert err.strip() == ("pitstop: error: cannot write standard output (Broken pipe); "
                           "nothing more was written")


@pytest.mark.parametrize("args", [["revert"], ["revert", "--yes"], ["show"], ["apply", "--yes"]])
def test_system_with_a_100k_deep_state_file(pitstop_cli, tmp_path: Path, args) -> None:
    root = tmp_path / "machine"
    shutil.copytree(Path(__file__).parent / "system" / "machines" / "workstation-4090", root,
                    symlinks=True)
    state = root / "var/lib/pitstop/state.json"
    state.parent.mkdir(parents=True)
    state.write_text("[" * 100_000 + "]" * 100_000)
    before = state.read_bytes()
    proc = pitstop_cli("system", *args, "--sysroot", str(root))
    assert "Traceback" not in proc.stderr
    if args == ["show"]:  # show reads the state only to mention it
        assert proc.returncode in (0, 1)
    else:
        assert "nested deeper than" in one_line_error(proc)
    assert state.read_bytes() == before


# ---------------------------------------------------------------- config never checked

@pytest.mark.parametrize("config, where", [
    ('select = ["LT999"]', "select 'LT999'"),
    ('ignore = ["LT999"]', "ignore 'LT999'"),
    ('[tool.pitstop.lint.per-file-ignores]\n"x.py" = ["LT999"]', "per-file-ignores.'x.py' 'LT999'"),
])
def test_unknown_codes_in_the_lint_config(tmp_path: Path, pitstop_cli, config: str,
                                          where: str) -> None:
    (tmp_path / "pyproject.toml").write_text(
        config if config.startswith("[") else f"[tool.pitstop.lint]\n{config}\n")
    (tmp_path / "x.py").write_text(FIXABLE)
    err = one_line_error(pitstop_cli("lint", "x.py", cwd=tmp_path))
    assert where in err and "matches no lint code, name or category" in err
    # ... as the command line says it of the same code
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "pyproject.toml").write_text("[tool.pitstop.lint]\n")
    (clean / "x.py").write_text(FIXABLE)
    cli = one_line_error(pitstop_cli("lint", "--select", "LT999", "x.py", cwd=clean))
    assert cli.split("'LT999'", 1)[1] == err.split("'LT999'", 1)[1]


# ---------------------------------------------------------------- --fix and protections

@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder `nobody` may enter (pytest's tmp_path is root's 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="pitstop-fix-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a file's non-root owner")
def test_fix_on_a_chmod_444_file_as_its_non_root_owner(shared_dir: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    os.chown(shared_dir, nobody.pw_uid, nobody.pw_gid)  # the folder is theirs: rename works
    target = shared_dir / "train.py"
    target.write_text(FIXABLE)
    os.chown(target, nobody.pw_uid, nobody.pw_gid)
    target.chmod(0o444)
    argv = ["lint", "-j", "1", "--fix", str(target)]
    run_cli_in_process(argv)  # import everything first (see run_cli_as_nobody)
    code, _out, err = run_cli_as_nobody(argv)
    assert code == EXIT_USAGE, err
    assert f"{target}: error: fix not written: you may not write it (mode 0444" in err
    assert "Traceback" not in err
    assert target.read_text() == FIXABLE and (target.stat().st_mode & 0o777) == 0o444
    assert listing(shared_dir) == ["train.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a file nobody may not write")
def test_fix_on_another_users_file_says_whose_it_is(shared_dir: Path) -> None:
    shared_dir.chmod(0o777)  # nobody may write the folder, not the file
    target = shared_dir / "train.py"
    target.write_text(FIXABLE)
    target.chmod(0o644)
    argv = ["lint", "-j", "1", "--fix", str(target)]
    run_cli_in_process(["lint", "-j", "1", "--diff", str(target)])  # import first
    code, _out, err = run_cli_as_nobody(argv)
    assert code == EXIT_USAGE, err
    assert "owned by root (uid 0)); run pitstop as a user who may, or ask the owner" in err
    assert "chmod" not in err  # only its owner could
    assert target.read_text() == FIXABLE and listing(shared_dir) == ["train.py"]


def test_fix_on_a_chmod_444_file_as_root_is_refused_too(tmp_path: Path, pitstop_cli) -> None:
    target = tmp_path / "train.py"
    target.write_text(FIXABLE)
    target.chmod(0o444)
    proc = pitstop_cli("lint", "--fix", str(target))
    assert proc.returncode == EXIT_USAGE and "Traceback" not in proc.stderr
    assert f"{target}: error: fix not written: read-only (mode 0444)" in proc.stderr
    assert target.read_text() == FIXABLE and listing(tmp_path) == ["train.py"]


def test_fix_through_a_symlink_fixes_the_target_and_keeps_the_link(tmp_path: Path,
                                                                   pitstop_cli) -> None:
    real = tmp_path / "real.py"
    real.write_text(FIXABLE)
    link = tmp_path / "train.py"
    link.symlink_to("real.py")
    proc = pitstop_cli("lint", "--fix", str(link))
    assert proc.returncode in (0, 1), proc.stderr
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert 'torch.amp.autocast("cuda")' in real.read_text()
    assert listing(tmp_path) == ["real.py", "train.py"]


def test_fix_keeps_hard_links(tmp_path: Path, pitstop_cli) -> None:
    one, other = tmp_path / "train.py", tmp_path / "same-file.py"
    one.write_text(FIXABLE)
    os.link(one, other)
    proc = pitstop_cli("lint", "--fix", str(one))
    assert proc.returncode in (0, 1), proc.stderr
    assert one.stat().st_ino == other.stat().st_ino and one.stat().st_nlink == 2
    assert 'torch.amp.autocast("cuda")' in other.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_root_fixing_another_users_file_keeps_its_owner(tmp_path: Path, pitstop_cli) -> None:
    nobody = pwd.getpwnam("nobody")
    target = tmp_path / "train.py"
    target.write_text(FIXABLE)
    os.chown(target, nobody.pw_uid, nobody.pw_gid)
    target.chmod(0o640)
    proc = pitstop_cli("lint", "--fix", str(target))
    assert proc.returncode in (0, 1), proc.stderr
    st = target.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (nobody.pw_uid, nobody.pw_gid, 0o640)
    assert 'torch.amp.autocast("cuda")' in target.read_text()


@pytest.mark.parametrize("config, needle", [
    ('select = [""]', "select has an empty code"),
    ('ignore = ["LT007", ""]', "ignore has an empty code"),
    ('select = []', "select = [] checks no code"),
])
def test_empty_codes_in_the_lint_config_are_refused(tmp_path: Path, config: str,
                                                   needle: str) -> None:
    # "" is a prefix of every code: select = [""] checked all, select = [] none, silently.
    (tmp_path / "pyproject.toml").write_text(f"[tool.pitstop.lint]\n{config}\n")
    (tmp_path / "x.py").write_text(FIXABLE)
    code, out, err = run_cli_in_process(["lint", "-j", "1", "--config",
                                         str(tmp_path / "pyproject.toml"), str(tmp_path / "x.py")])
    assert code == EXIT_USAGE and out == "" and needle in err, err


@pytest.mark.parametrize("value", ["", ","])
def test_select_naming_no_code_is_refused_on_the_command_line_too(tmp_path: Path,
                                                                 value: str) -> None:
    (tmp_path / "x.py").write_text(FIXABLE)  # `--select ''` checked every code
    code, out, err = run_cli_in_process(["lint", "--select", value, str(tmp_path / "x.py")])
    assert code == EXIT_USAGE and out == "" and "names no code" in err, err


# ---------------------------------------------------------------- typos created

@pytest.mark.parametrize("args, needle", [
    (["doctor", "--collect", "-o", "/nonexistent/dir/x.json"],
     "-o /nonexistent/dir/x.json: folder /nonexistent/dir does not exist"),
    (["bench", "--json", "/nonexistent/dir/x.json"],
     "--json /nonexistent/dir/x.json: folder /nonexistent/dir does not exist"),
    (["bench", "--data", "/typo/dir"], "--data /typo/dir: folder /typo does not exist"),
    (["bench", "--rungs", ""], "--rungs '' names no rung"),
    (["bench", "--compile-timeout", "nan"], "'nan' is not a finite number"),
    (["system", "apply", "--only", ""], "--only '' names no setting"),
    (["bench", "--json", "/proc/x.json"], "--json /proc/x.json: cannot write there"),
])
def test_typos_are_rejected_not_created(tmp_path: Path, pitstop_cli, args: list[str],
                                        needle: str) -> None:
    proc = pitstop_cli(*args, cwd=tmp_path)
    assert needle in one_line_error(proc)
    assert proc.stdout == ""  # rejected before any work (no ladder, no plan)
    assert not Path("/nonexistent").exists() and not Path("/typo").exists()
    assert listing(tmp_path) == []


# ---------------------------------------------------------------- numbers

def _number_options() -> list[tuple[list[str], str]]:
    """(command words, option) for every option of every command that takes a float."""
    import click

    from pitstop.cli import cli

    out = []

    def walk(command: click.Command, words: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*words, name])
            return
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange):
                out.append((words, param.opts[0]))

    walk(cli, [])
    return out


NUMBER_OPTIONS = _number_options()


def test_every_float_option_is_checked_finite() -> None:
    from pitstop.options import FiniteFloatRange

    assert NUMBER_OPTIONS  # bench, doctor and monitor have some
    unchecked = [(w, o) for w, o in NUMBER_OPTIONS if not isinstance(
        _option(w, o).type, FiniteFloatRange)]
    assert not unchecked, "click.FloatRange lets nan through: use pitstop.options.FiniteFloatRange"


def _option(words: list[str], opt: str):
    import click

    from pitstop.cli import cli

    command: click.Command = cli
    for word in words:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), word)  # type: ignore[assignment]
    return next(p for p in command.params if p.opts[0] == opt)


@pytest.mark.parametrize("words, opt", NUMBER_OPTIONS, ids=lambda v: " ".join(v) if
                         isinstance(v, list) else v)
@pytest.mark.parametrize("number", ["nan", "inf", "1e300"])
def test_no_float_option_takes_nan_infinity_or_a_clock_overflow(words: list[str], opt: str,
                                                                number: str) -> None:
    # `monitor --interval nan` was an internal error; `--duration 1e300` overflowed the
    # recorder's clock after the recording had started.
    code, out, err = run_cli_in_process([*words, opt, number])
    assert code == EXIT_USAGE and out == "", (code, err)
    assert len(err.strip().splitlines()) == 1 and opt in err and "internal" not in err


# ---------------------------------------------------------------- JSON read anywhere

DEEP_JSON = "[" * 100_000 + "]" * 100_000


def test_a_deep_notebook_is_a_file_lint_cannot_check_not_a_bug(tmp_path: Path) -> None:
    (tmp_path / "train.ipynb").write_text('{"cells": ' + DEEP_JSON + "}")
    code, _out, err = run_cli_in_process(["lint", "-j", "1", str(tmp_path / "train.ipynb")])
    assert code == 1 and "internal" not in err, err  # 1: a file that cannot be checked
    assert err.strip().splitlines() == [f"{tmp_path / 'train.ipynb'}: error: not a valid "
                                        "notebook (JSON nested too deep)"]


def test_a_deep_nvml_recording_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "nvml.json").write_text(DEEP_JSON)
    code, out, err = run_cli_in_process(["monitor", "--nvml-recording",
                                         str(tmp_path / "nvml.json"), "--once"])
    assert code == EXIT_USAGE and out == "" and "nested deeper than 64 levels" in err, err
    assert len(err.strip().splitlines()) == 1
