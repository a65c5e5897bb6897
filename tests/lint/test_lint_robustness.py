"""The linter never crashes on bad input: every problem is a diagnostic naming the file,
and the other files are still linted. A file that cannot be checked is exit status 1 (as in
ruff: it is something wrong with the code); a named path that cannot be used is 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pitstop_testing import pitstop_env, run_cli_as_nobody, run_cli_in_process

TRAIN = (
    "import torch\n"
    "for x, y in loader:\n"
    "    loss = model(x.cuda()).sum()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    print(loss.item())\n"
)


def _tree(tmp_path):
    (tmp_path / "good.py").write_text(TRAIN)
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "latin1.py").write_bytes(b"import torch\nname = '\xe9t\xe9'\n")
    (tmp_path / "cookie.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9t\xe9'\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "nul.py").write_bytes(b"import torch\x00\n")
    # a 10 MB generated file (weights as a literal), which still mentions torch
    row = ", ".join(f"{i * 0.001:.6f}" for i in range(1000))
    lines = ["import torch", "WEIGHTS = ["] + [f"    [{row}]," for _ in range(1100)] + ["]"]
    (tmp_path / "generated.py").write_text("\n".join(lines) + "\n")
    assert (tmp_path / "generated.py").stat().st_size > 9_000_000
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "again").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    nb = tmp_path / "broken.ipynb"
    nb.write_text("{not json")


def test_bad_inputs_become_diagnostics(tmp_path, pitstop_cli) -> None:
    _tree(tmp_path)
    r = pitstop_cli("lint", str(tmp_path), "--format", "json", timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    for name, words in [("broken.py", "syntax error"), ("latin1.py", "cannot decode"),
                        ("nul.py", "null bytes"), ("broken.ipynb", "notebook"),
                        ("a.py", "symbolic link"), ("b.py", "symbolic link")]:
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith(str(tmp_path / name))]
        assert lines and words in lines[0], (name, r.stderr)
    assert "symbolic link loop" in r.stderr  # loop/again -> tmp_path, reported once as a note
    import json

    findings = json.loads(r.stdout)
    assert {(os.path.basename(f["path"]), f["code"]) for f in findings} >= {("good.py", "LT001")}
    assert not any(os.path.basename(f["path"]) in {"cookie.py", "empty.py", "generated.py"}
                   for f in findings)


def test_unreadable_directory() -> None:
    # Not under pytest's tmp_path: its parents are private to root, and the run below
    # happens as an unprivileged user.
    tmp_path = Path(tempfile.mkdtemp(prefix="pitstop-lint-perm-"))
    tmp_path.chmod(0o755)
    (tmp_path / "good.py").write_text(TRAIN)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "x.py").write_text(TRAIN)
    try:
        if os.geteuid() == 0:
            # Root reads anything: drop to `nobody` in a forked child. The checkout may be
            # unreadable to `nobody` (a 0700 clone), so import everything first by
            # running the same command here, and keep it to one process (-j 1).
            argv = ["lint", "-j", "1", str(tmp_path)]
            run_cli_in_process(argv)
            locked.chmod(0)
            code, out, err = run_cli_as_nobody(argv)
        else:
            locked.chmod(0)
            r = subprocess.run([sys.executable, "-m", "pitstop", "lint", str(tmp_path)],
                               capture_output=True, text=True, env=pitstop_env(),
                               timeout=120, cwd="/")
            code, out, err = r.returncode, r.stdout, r.stderr
    finally:
        locked.chmod(0o755)
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert code == 1, err
    assert f"{locked}: error: cannot list directory" in err
    assert "good.py:6:11: LT001" in out
    assert "Traceback" not in err


def test_missing_path_is_an_input_error(tmp_path, pitstop_cli) -> None:
    r = pitstop_cli("lint", str(tmp_path / "nope.py"))
    assert r.returncode == 2
    assert "nope.py: error: no such file or directory" in r.stderr
    assert "No findings" not in r.stdout  # nothing was checked: no clean bill either


def test_syntax_error_alone_is_exit_1(tmp_path, pitstop_cli) -> None:
    # Only a file that does not parse, no finding: still 1, the code needs attention.
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    r = pitstop_cli("lint", str(tmp_path / "broken.py"))
    assert r.returncode == 1, r.stderr
    assert "broken.py:2: error: syntax error" in r.stderr and "Traceback" not in r.stderr
    assert "No findings in 1 file. 1 file could not be checked (errors on stderr)." in r.stdout
    gh = pitstop_cli("lint", str(tmp_path / "broken.py"), "--format", "github")
    assert gh.returncode == 1
    assert f"::error file={tmp_path / 'broken.py'},line=2,title=pitstop lint::syntax error" \
        in gh.stdout


def test_missing_path_beats_findings(tmp_path, pitstop_cli) -> None:
    # A named path that is not there is an input error even when other files have findings.
    (tmp_path / "good.py").write_text(TRAIN)
    r = pitstop_cli("lint", str(tmp_path / "good.py"), str(tmp_path / "nope"))
    assert r.returncode == 2, r.stderr
    assert "good.py:6:11: LT001" in r.stdout


def test_fifo_and_device_files_are_skipped_unopened(tmp_path, pitstop_cli) -> None:
    # A FIFO named *.py would block a reader forever (issue 10); a device file would
    # never end. Both are skipped with a warning, never opened.
    (tmp_path / "good.py").write_text(TRAIN)
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    r = pitstop_cli("lint", str(tmp_path), "--format", "json", timeout=60)
    assert r.returncode == 1, r.stderr  # the findings of good.py, nothing else
    assert f"{tmp_path / 'pipe.py'}: warning: skipped: a FIFO" in r.stderr
    assert f"{tmp_path / 'zero.py'}: warning: skipped: a device file" in r.stderr
    import json

    entries = json.loads(r.stdout)
    assert {e["name"] for e in entries if e["code"] is None} == {"skipped"}
    # named on the command line: the same, and no "No findings in 0 files"
    r = pitstop_cli("lint", str(tmp_path / "pipe.py"), timeout=60)
    assert r.returncode == 0 and "warning: skipped" in r.stderr and "No findings" not in r.stdout


def test_parse_failures_are_in_json_and_sarif(tmp_path, pitstop_cli) -> None:
    import json

    (tmp_path / "good.py").write_text(TRAIN)
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    r = pitstop_cli("lint", str(tmp_path), "--format", "json")
    entries = json.loads(r.stdout)
    bad = [e for e in entries if e["code"] is None]
    assert len(bad) == 1 and bad[0]["path"].endswith("broken.py") and bad[0]["line"] == 2
    assert "syntax error" in bad[0]["message"] and bad[0]["severity"] == "error"
    assert any(e["code"] == "LT001" for e in entries)
    r = pitstop_cli("lint", str(tmp_path), "--format", "sarif")
    run = json.loads(r.stdout)["runs"][0]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert any("broken.py" in n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
               and "syntax error" in n["message"]["text"] for n in notes)


def test_big_modules_are_linted_in_pieces_with_the_same_findings(tmp_path) -> None:
    # A generated module above the piece size: cut at top-level definitions (never in a
    # string), each piece parsed with the module's imports, line numbers kept.
    from pitstop.lint import chunks, lint_paths

    fn = ("def train_{i}(model, ds, opt, device):\n"
          "    loader = DataLoader(ds, batch_size=32)\n"
          "    for x, y in loader:\n"
          "        loss = F.cross_entropy(model(x.to(device)), y.to(device))\n"
          "        loss.backward()\n"
          "        opt.step()\n"
          "        print(loss.item())\n\n\n")
    doc = 'NOTES = """\\ndef not_a_function():\\n    pass\\n"""\n\n\n'
    head = "import torch.nn.functional as F\nfrom torch.utils.data import DataLoader\n\n\n"
    n = 200
    text = head + "".join(fn.format(i=i) + (doc if i == 100 else "") for i in range(n))
    (tmp_path / "gen.py").write_text(text)
    data = text.encode()
    pieces = chunks.split(data, size=4000)
    assert len(pieces) > 10
    assert b"".join(data[p.start:p.end] for p in pieces) == data
    assert all(data[p.start:p.end].startswith((b"def ", b"import")) for p in pieces)
    old = chunks.CHUNK_BYTES
    try:
        from pitstop.lint import engine

        engine.CHUNK_BYTES = 4000
        assert len(engine._items(engine.SourceFile(tmp_path / "gen.py", len(data)), (),
                                 engine.default_options())) == len(pieces)
        chunked = lint_paths([tmp_path / "gen.py"], jobs=1)
        # the pieces spread over a pool of workers come back merged as in one process
        spread = lint_paths([tmp_path / "gen.py"], jobs=2)
    finally:
        engine.CHUNK_BYTES = old
    whole = lint_paths([tmp_path / "gen.py"], jobs=1)
    assert not chunked.all_diagnostics and not spread.all_diagnostics
    key = [(f.line, f.code) for f in whole.findings]
    assert [(f.line, f.code) for f in chunked.findings] == key
    assert [(f.line, f.code, f.message) for f in spread.findings] == [
        (f.line, f.code, f.message) for f in chunked.findings]
    assert sum(1 for _, c in key if c == "LT001") == n


def test_a_second_run_in_the_same_process_sees_the_same_findings(tmp_path) -> None:
    # the per-file cache must hand back what the file produced, not what the first run's
    # later passes (--diff, the link pass) left of it
    target = tmp_path / "train.py"
    target.write_text("import torch\nfor x, y in loader:\n"
                      "    with torch.cuda.amp.autocast():\n        loss = model(x.cuda())\n"
                      "    loss.backward()\n")
    first = run_cli_in_process(["lint", "-j", "1", "--diff", str(target)])
    again = run_cli_in_process(["lint", "-j", "1", "--diff", str(target)])
    assert first[0] == again[0] == 1 and "torch.amp.autocast" in again[1]
    assert first == again
