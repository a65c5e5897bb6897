"""Per-rule fixtures: ``fixtures/LTxxx_name.py`` holds positive and negative cases; the
findings expected for it (that rule only) are listed beside it in ``LTxxx_name.expected``
as ``line:column CODE``. Every line marked ``# expect`` in the input must be among them,
and every unmarked line must stay silent."""

from __future__ import annotations

import re
import shutil

import pytest
from lint_helpers import FIXTURES, expected_keys, keys, lint

CASES = sorted(FIXTURES.glob("LT*.py"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fixture_findings_match_expected(path, tmp_path) -> None:
    # Alone in a folder: program-level rules must not see the other fixtures as its package.
    code = path.name[:5]
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    run = lint([copy], select=(code,))
    assert not run.all_diagnostics, run.all_diagnostics
    assert keys(run) == expected_keys(path)
    marked = {i for i, line in enumerate(path.read_text().splitlines(), start=1)
              if re.search(r"#\s*expect\b", line)}
    found = {f.line for f in run.findings}
    assert found == marked, f"flagged lines {sorted(found)} != lines marked # expect {sorted(marked)}"


def test_every_rule_has_a_fixture() -> None:
    from pitstop.findings import all_docs

    codes = {d.code for d in all_docs() if d.code.startswith("LT")}
    have = {p.name[:5] for p in CASES}
    assert codes <= have, f"rules without a fixture: {sorted(codes - have)}"
