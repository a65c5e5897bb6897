"""Per-rule fixtures: ``fixtures/LTxxx_name.py`` holds positive and negative cases; the
findings expected for it (that rule only) are listed beside it in ``LTxxx_name.expected``
as ``line:column CODE``. Every line marked ``# expect`` in the input must be among them,
and every unmarked line must stay silent."""

from __future__ import annotations

import re

import pytest
from lint_helpers import FIXTURES, expected_keys, keys, lint

CASES = sorted(FIXTURES.glob("LT*.py"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fixture_findings_match_expected(path) -> None:
    code = path.name[:5]
    run = lint([path], select=(code,))
    assert not run.all_diagnostics, run.all_diagnostics
    assert keys(run) == expected_keys(path)
    marked = {i for i, line in enumerate(path.read_text().splitlines(), start=1)
              if re.search(r"#\s*expect\b", line)}
    found = {f.line for f in run.findings}
    assert found == marked, f"flagged lines {sorted(found)} != lines marked # expect {sorted(marked)}"

