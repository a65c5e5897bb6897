"""``pitstop lint``: a loop-aware performance linter for PyTorch training code.

Library use::

    from pitstop.lint import lint_source, lint_paths

    for f in lint_source(open("train.py").read(), "train.py"):
        print(f.line, f.code, f.message)          # LintFinding; f.to_finding() -> Finding

    run = lint_paths(["src/"])                    # files, packages, notebooks; all cores
    run.findings, run.all_diagnostics

The command line is :mod:`pitstop.lint.command`; the rules are in
:mod:`pitstop.lint.rules` (one module each), their documentation in
:mod:`pitstop.lint.codes`, the loop-context analysis in :mod:`pitstop.lint.context`.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.lint.model import Diagnostic, Fix, LintFinding

if TYPE_CHECKING:
    from pitstop.lint.engine import RunResult

__all__ = ["Diagnostic", "Fix", "LintFinding", "lint_paths", "lint_source"]


def lint_source(text: str, path: str = "<string>", *, select: tuple[str, ...] = ("LT",),
                ignore: tuple[str, ...] = ()) -> list[LintFinding]:
    """Findings for one module's source text, judged on its own (no package context).
    Code written for Python 2 is read as it was meant (no finding in it offers a fix).
    Raises SyntaxError if ``text`` is not Python of either kind."""
    from dataclasses import replace

    from pitstop.lint.analyze import Selection
    from pitstop.lint.engine import default_options, lint_text
    from pitstop.lint.legacy_source import read_legacy
    from pitstop.lint.program import Program
    from pitstop.lint.program_findings import condition_holds, program_facts

    result = lint_text(text, path, default_options(Selection(select=select, ignore=ignore)))
    # Program-level findings hold only if this module's own facts allow them (a
    # cudnn-benchmark finding needs a convolution, amp-missing no autocast...).
    program = Program([result.summary] if result.summary is not None else [])
    facts = program_facts(program, program.key(path), result.uses, result.facts)
    kept = [f for f in result.findings
            if not f.condition or condition_holds(f.condition, facts)]
    legacy = read_legacy(text)
    if legacy is not None and legacy.kinds != ("async=",):  # the fixer leaves it alone
        kept = [replace(f, fix=None) for f in kept]
    return sorted(kept, key=LintFinding.sort_key)


def lint_paths(paths: Iterable[str | PathLike[str]], *, select: tuple[str, ...] = ("LT",),
               ignore: tuple[str, ...] = (), jobs: int | None = None,
               device: str | None = None, include_tests: bool | None = None) -> RunResult:
    """Lint files and folders as one program (honouring .gitignore and
    ``[tool.pitstop.lint]``) and return the :class:`~pitstop.lint.engine.RunResult`.
    ``device``: "auto", "gpu" or "cpu" (default: the config's, else auto)."""
    from pitstop.lint.analyze import Selection
    from pitstop.lint.config import find_pyproject, load_config
    from pitstop.lint.discover import discover
    from pitstop.lint.engine import default_options, lint_paths_files

    targets = [Path(p) for p in paths] or [Path(".")]
    config = load_config(find_pyproject(targets[0]))
    files, diags = discover(targets, config)
    options = default_options(Selection(select=select or config.select,
                                        ignore=tuple(ignore) + config.ignore),
                              device=device or config.device,
                              include_tests=config.include_tests if include_tests is None
                              else include_tests,
                              per_file_ignores=config.per_file_ignores,
                              ignore_root=str(config.root))
    run = lint_paths_files(files, options, config.ignored_for, jobs=jobs)
    run.diagnostics.extend(diags)
    return run
