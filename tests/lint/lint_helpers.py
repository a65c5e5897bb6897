"""Shared helpers of the lint tests: lint real files in-process through the engine."""

from __future__ import annotations

from pathlib import Path

from pitstop.lint.analyze import Selection
from pitstop.lint.config import LintConfig
from pitstop.lint.discover import discover
from pitstop.lint.engine import RunResult, default_options, lint_paths_files

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FIXES = HERE / "fixes"
CORPUS = HERE / "corpus"


def lint(paths: list[Path], select: tuple[str, ...] = ("LT",), jobs: int = 1) -> RunResult:
    files, diags = discover(paths, LintConfig(root=HERE))
    run = lint_paths_files(files, default_options(Selection(select=select)), jobs=jobs)
    run.diagnostics.extend(diags)
    return run


def keys(run: RunResult) -> list[str]:
    return sorted(f"{f.line}:{f.column} {f.code}" for f in run.findings)


def expected_keys(path: Path) -> list[str]:
    text = path.with_suffix(".expected").read_text(encoding="utf-8")
    return sorted(line.strip() for line in text.splitlines()
                  if line.strip() and not line.startswith("#"))
