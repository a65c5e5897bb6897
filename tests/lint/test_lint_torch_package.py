"""Lint every .py file of the installed torch package (about 2,300 files, 46 MB): no
internal error, and the only files not checked are those this Python cannot parse.
(The timing of the same run is benchmarks/bench_lint_torch.py's job, not a test's.)"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest


def test_lint_whole_torch_package_without_internal_errors(pitstop_cli) -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    r = pitstop_cli("lint", str(root), "--format", "json", "--no-gitignore", timeout=240)
    assert "internal error" not in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert r.returncode == 1  # findings, and one file only Python 3.12 parses
    entries = json.loads(r.stdout)
    findings = [e for e in entries if e["code"] is not None]
    assert findings and all(f["code"].startswith("LT") for f in findings)
    # the file only Python 3.12 parses is in the JSON too, not only on stderr
    unparsed = [e for e in entries if e["code"] is None]
    assert any(e["path"].endswith("py312_intrinsics.py") and "syntax error" in e["message"]
               for e in unparsed), unparsed
    # Every diagnostic names a file that really does not parse with this Python.
    for line in r.stderr.splitlines():
        if ": error: " not in line:
            continue
        path = line.split(":", 1)[0]
        assert path.endswith(".py"), line
        with pytest.raises(SyntaxError):
            ast.parse(Path(path).read_bytes())
