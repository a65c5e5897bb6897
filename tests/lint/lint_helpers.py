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


def program(tmp_path: Path, files: dict[str, str], *, select: tuple[str, ...] = ("LT",),
            only: list[str] | None = None, **kw: object) -> RunResult:
    """Write ``files`` (relative path -> source) under ``tmp_path`` and lint them as one
    program (``only``: lint just these of them; the others are there to be imported)."""
    import textwrap

    from pitstop.lint import lint_paths

    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    targets = [tmp_path / r for r in (only or list(files))]
    return lint_paths(targets, select=select, jobs=1, **kw)  # type: ignore[arg-type]


def found(run: RunResult, code: str | None = None) -> set[tuple[str, int, str]]:
    """(file name, line, code) of every finding (of ``code``)."""
    return {(Path(f.path).name, f.line, f.code) for f in run.findings
            if code is None or f.code == code}


def line_of(src: str, needle: str) -> int:
    """The line of ``needle`` in ``src`` as the linter numbers it (:func:`program` strips
    the leading newline)."""
    lines = src.lstrip("\n").splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)
