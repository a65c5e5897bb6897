"""``--fix`` / ``--diff``: apply fixes until nothing fixable is left, verify, and save the
file as an editor does (:func:`pitstop.fileio.atomic_write_bytes`)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from pitstop.fileio import WriteRefused, atomic_write_bytes
from pitstop.lint.analyze import LintOptions
from pitstop.lint.engine import RunResult, decode, lint_text, relint_text
from pitstop.lint.fixes import FixError, apply_edits
from pitstop.lint.index import ModuleIndex
from pitstop.lint.legacy_source import read_legacy
from pitstop.lint.model import SAFE, Diagnostic, FileResult, LintFinding
from pitstop.lint.program import Program
from pitstop.lint.program_findings import condition_holds, program_facts
from pitstop.lint.summary import summarize

MAX_ROUNDS = 5


def _allowed(f: LintFinding, unsafe: bool) -> bool:
    return f.fix is not None and (f.fix.safety == SAFE or unsafe)


def fix_results(run: RunResult, options: LintOptions,
                ignores_for: Callable[[Path], tuple[str, ...]], *, unsafe: bool,
                write: bool) -> list[tuple[str, str, str, int]]:
    """Fix every file of ``run`` that has fixable findings. Returns (path, old text, new
    text, findings fixed) per changed file; the run's findings become what is left."""
    program = run.program or Program([r.summary for r in run.results if r.summary is not None])
    linted = frozenset(program.key(r.path) for r in run.results if not r.skipped)
    uses: set[str] = set()
    for r in run.results:
        uses |= r.uses
    changed: list[tuple[str, str, str, int]] = []
    for result in run.results:
        if result.path.endswith(".ipynb") or not any(_allowed(f, unsafe) for f in result.findings):
            continue
        path = Path(result.path)
        try:
            data = path.read_bytes()
            old = decode(data)
        except (OSError, UnicodeError) as err:
            result.diagnostics.append(Diagnostic(result.path, f"cannot fix: {err}"))
            continue
        legacy = read_legacy(old) if result.unfixable or "async" in old else None
        if legacy is not None:
            # (linted as older Python: the fixer's parsers read today's Python only)
            what = ("it passes `async=`, which does not parse on this Python; rename it "
                    "`non_blocking=` first") if legacy.kinds == ("async=",) else (
                    "it is written for Python 2 (port it to Python 3 first)")
            result.diagnostics.append(Diagnostic(
                result.path, f"not fixed: {what}", kind="warning"))
            continue
        in_program = program.key(result.path) in program.modules
        others = uses - result.uses  # what the other files' loops do

        def relint(text: str, result: FileResult = result, path: Path = path,
                   in_program: bool = in_program, others: set[str] = others
                   ) -> list[LintFinding]:
            now = program
            if in_program:  # against the program, with this module as it now reads
                now = program.replaced(summarize(ModuleIndex(ast.parse(text), result.path, text=text)))
                again = relint_text(text, result.path, options, ignores_for(path), now, linted)
            else:
                again = lint_text(text, result.path, options, ignores_for(path))
            # a fix may move lines (an inserted statement): judge by the new text's facts
            facts = program_facts(now, now.key(result.path), others | again.uses, again.facts)
            return [f for f in again.findings if f.path == result.path and (
                not f.condition or condition_holds(f.condition, facts))]

        text = old
        findings = result.findings
        fixed = 0
        try:
            for _ in range(MAX_ROUNDS):
                todo = [f for f in findings if _allowed(f, unsafe)]
                if not todo:
                    break
                new = apply_edits(text, [e for f in todo for e in f.fix.edits])  # type: ignore[union-attr]
                if new == text:
                    break
                text = new
                fixed += len(todo)
                findings = relint(text)
        except (FixError, SyntaxError, ValueError) as err:
            result.diagnostics.append(Diagnostic(
                result.path, f"fix not applied ({err}); this is a bug in pitstop, please report it",
                kind="internal"))
            continue
        if text == old:
            continue
        if write:
            # Keep the file's original encoding for bytes we did not touch.
            encoding = "utf-8"
            if not data.startswith(b"\xef\xbb\xbf"):
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    import io
                    import tokenize

                    encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
            prefix = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
            try:
                atomic_write_bytes(path, prefix + text.encode(encoding), expected=data)
            except WriteRefused as err:  # read-only, or edited meanwhile: left as it was
                result.diagnostics.append(Diagnostic(
                    result.path, f"fix not written: {err.strerror}", kind="input"))
                continue
            except (OSError, UnicodeError) as err:
                result.diagnostics.append(Diagnostic(
                    result.path, f"cannot write the fix ({err}); the file is as it was",
                    kind="input"))
                continue
        result.findings = findings
        changed.append((result.path, old, text, fixed))
    return changed
