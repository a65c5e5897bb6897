"""pitstop lints its own source clean: the rules must not cry wolf on real, fast code
(the exceptions, like the bench's deliberately naive rung, carry a `# noqa` with a reason)."""

from __future__ import annotations

from pitstop_testing import SRC, run_pitstop


def test_pitstop_source_has_no_lint_findings() -> None:
    r = run_pitstop("lint", str(SRC / "pitstop"), "--format", "json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
