"""Linting many files as one program, in three passes:

1. every file is read, gated, parsed, indexed, summarised and analysed on its own, in a
   process pool (results cached by content hash);
2. the summaries are linked into a :class:`~pitstop.lint.program.Program` (the local
   modules the linted files import join it as context), which is cheap;
3. the files whose questions the program answers differently from what they could know
   on their own (an imported loader factory, a step function in another module, a device
   set in ``main.py``) are analysed again against the whole program, in a pool forked
   after linking (the program is inherited, not pickled).

Program-level findings are then decided with the facts of the program each file runs in.
Nothing here raises on a bad input file: every problem becomes a :class:`Diagnostic`
naming the file, and the run goes on.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import os
import stat
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pitstop.lint import chunks
from pitstop.lint.analyze import (
    LintOptions,
    Selection,
    analyze,
    apply_noqa,
    mentions_torch,
    worth_analysing,
)
from pitstop.lint.chunks import CHUNK_BYTES, Chunk
from pitstop.lint.context import (
    Analysis,
    ModuleContext,
    written_as_tests,
)
from pitstop.lint.discover import SourceFile, not_a_file
from pitstop.lint.index import ModuleIndex
from pitstop.lint.legacy_source import parse, read_legacy
from pitstop.lint.loaders import dataloader_calls
from pitstop.lint.model import Diagnostic, FileResult, LintFinding
from pitstop.lint.notebook import NotebookError, load_notebook
from pitstop.lint.pool import collect_chunk, gc_paused, map_chunks
from pitstop.lint.program import Program, answers_differ, recorded_answers
from pitstop.lint.program_findings import resolve_program_findings
from pitstop.lint.program_modules import norm_path
from pitstop.lint.settings import CONFIG_CALL_RE
from pitstop.lint.summary import ModuleSummary, summarize

MAX_CONTEXT_BYTES = 2_000_000  # a local module imported but not linted, read as context


def cpus_usable() -> int:
    """CPUs this process may run on (affinity / cgroup cpusets), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_world_size() -> int:
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def default_options(selection: Selection | None = None, *, device: str = "auto",
                    include_tests: bool = False,
                    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = (),
                    ignore_root: str = "") -> LintOptions:
    return LintOptions(selection=selection or Selection(), cpus=cpus_usable(),
                       local_world_size=local_world_size(), device=device,
                       include_tests=include_tests, per_file_ignores=per_file_ignores,
                       ignore_root=ignore_root)


def decode(data: bytes) -> str:
    """Source bytes to text per PEP 263 (UTF-8 by default, a coding cookie otherwise)."""
    try:
        text = data.decode("utf-8")
        return text[1:] if text.startswith("\ufeff") else text
    except UnicodeDecodeError:
        import io
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as err:
            raise UnicodeError(str(err)) from None
        if encoding in ("utf-8", "utf-8-sig"):
            raise
        return data.decode(encoding)


def _filter(findings: list[LintFinding], lines: list[str],
            extra_ignores: tuple[str, ...]) -> list[LintFinding]:
    findings = apply_noqa(findings, lines)
    if extra_ignores:
        sel = Selection(select=("LT",), ignore=extra_ignores)
        findings = [f for f in findings if sel.wants(f.code, f.doc.name, f.category)]
    return findings


def lint_text(text: str, path: str, options: LintOptions,
              extra_ignores: tuple[str, ...] = (), *, tree: ast.Module | None = None,
              summarise: bool = True, test: bool | None = None,
              preamble: list[ast.stmt] | None = None) -> FileResult:
    """Lint Python source ``text`` (already decoded), judged on its own: the first pass.
    ``preamble``: statements the text runs after (a piece of a big module: its imports).
    Raises SyntaxError and friends."""
    if tree is None:
        tree = parse(text, path)
    if not worth_analysing(text):
        if not summarise:
            return FileResult(path, analyzed=False)
        # the light pass sees no calls: a module declaring command-line options (an
        # argparse parser) gets the full one, its defaults count for the program (as does
        # one that builds a config object: `HParams(epochs=500, fp16_run=False)`, and a
        # script, whose calls say what the program's trainers and models are handed)
        full = "add_argument" in text or CONFIG_CALL_RE.search(text) is not None \
            or "__main__" in text
        index = ModuleIndex(tree, path, light=not full, text=text, preamble=preamble)
        # a loop whose training hides in an imported function or model (`maml(x_spt, ...)`)
        # is seen once the program is linked: its module is then looked at again
        answers = {("imports_training", norm_path(path)): False} \
            if index.loops and index.import_locals else {}
        return FileResult(path, analyzed=False, facts=frozenset(index.facts),
                          summary=summarize(index), imports=_top_imports(index),
                          answers=answers)
    lines = text.splitlines()
    ctx = ModuleContext(tree, lines, path, text=text, options=options, test=test,
                        index=ModuleIndex(tree, path, text=text, preamble=preamble))
    analyze(ctx)
    summary = ctx.program.summary(ctx.key)
    answers = recorded_answers(ctx.program)
    if not ctx.hot_loops and not dataloader_calls(ctx.index) and not (
            "forward" in ctx.index.functions and ctx.index.module_classes):
        # no hot loop, no loader, no module's forward() (whose inputs are on the program's
        # device): the program's device changes no finding here
        answers = {q: a for q, a in answers.items() if q[0] != "device_origin"}
    return FileResult(path, _filter(ctx.findings, lines, extra_ignores), [],
                      frozenset(ctx.facts), _top_imports(ctx.index), summary=summary,
                      answers=answers, uses=frozenset(ctx.analysis.uses), test_code=ctx.is_test)


def _top_imports(index: ModuleIndex) -> frozenset[str]:
    return frozenset(v.split(".", 1)[0] for v in index.aliases.values())


def _lint_notebook(data: bytes, path: str, options: LintOptions,
                   extra_ignores: tuple[str, ...]) -> FileResult:
    nb = load_notebook(data)
    try:
        result = lint_text(nb.text, path, options, extra_ignores)
    except SyntaxError as err:
        line = err.lineno or 1
        cell, cline = nb.line_map[min(line, len(nb.line_map)) - 1] if nb.line_map else (1, 1)
        return FileResult(path, diagnostics=[Diagnostic(
            path, f"syntax error in cell {cell}, line {cline}: {err.msg}", line=cline)])
    mapped = []
    for f in result.findings:
        cell, cline = nb.line_map[f.line - 1] if 0 < f.line <= len(nb.line_map) else (1, f.line)
        end = None
        if f.end_line and 0 < f.end_line <= len(nb.line_map):
            end_cell, end_line = nb.line_map[f.end_line - 1]
            end = end_line if end_cell == cell else None
        mapped.append(replace(f, line=cline, cell=cell, end_line=end,
                              end_column=f.end_column if end else None, fix=None))
    result.findings = mapped
    return result


def read_source(path: str) -> bytes:
    """The bytes of a regular file. A FIFO, a device or a socket named ``*.py`` is never
    opened (reading it could block forever or never end): NotRegularFile instead."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, st.st_mode)
    with open(path, "rb") as fh:
        return fh.read()


class NotRegularFile(OSError):
    """The path is a FIFO, device or socket, not a file to lint."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(path)
        self.diagnostic = not_a_file(path, mode)


# Results of the first pass by (path, content hash, options): a file linted again in the
# same process (the fixer's rounds, a library caller, watch mode) is not parsed again.
_CACHE: dict[tuple[str, str, LintOptions, tuple[str, ...], bool | None], FileResult] = {}
_CACHE_MAX = 4096


def lint_file(path: str, options: LintOptions, extra_ignores: tuple[str, ...] = (),
              test: bool | None = None) -> FileResult:
    """The first pass over one file; never raises (problems become diagnostics).
    ``test``: the file is test code (None: judge from its path)."""
    try:
        try:
            data = read_source(path)
        except NotRegularFile as err:
            return FileResult(path, diagnostics=[err.diagnostic])
        except OSError as err:
            reason = err.strerror or str(err)
            if err.errno == errno.ELOOP:
                reason = "symbolic link loop"
            return FileResult(path, diagnostics=[Diagnostic(path, f"cannot read: {reason}")])
        if path.endswith(".ipynb"):
            try:
                return _lint_notebook(data, path, options, extra_ignores)
            except NotebookError as err:
                return FileResult(path, diagnostics=[Diagnostic(path, str(err))])
        if not mentions_torch(data):
            return FileResult(path, skipped=True)
        sha = hashlib.blake2b(data, digest_size=16).hexdigest()
        key = (path, sha, options, extra_ignores, test)
        cached = _CACHE.get(key)
        if cached is not None:
            return _copy(cached)
        result = _lint_bytes(data, path, options, extra_ignores, test)
        result.sha = sha
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = _copy(result)
        return result
    except Exception as err:  # a bug in pitstop: report it, keep going
        return FileResult(path, diagnostics=[_internal(path, err)])


def _copy(result: FileResult) -> FileResult:
    """A result the caller may change: the link and fix passes filter and extend a run's
    findings in place, and the cache must keep what the file itself produced (a second
    run in the same process, `--diff` then `--fix`, saw the first run's leftovers)."""
    return replace(result, findings=list(result.findings),
                   diagnostics=list(result.diagnostics), answers=dict(result.answers))


def _internal(path: str, err: BaseException) -> Diagnostic:
    tb = traceback.extract_tb(err.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return Diagnostic(path, f"internal error in pitstop lint ({err.__class__.__name__}: {err} "
                      f"at {where}); please report it", kind="internal")


def _lint_bytes(data: bytes, path: str, options: LintOptions,
                extra_ignores: tuple[str, ...], test: bool | None) -> FileResult:
    try:
        text = decode(data)
    except (UnicodeError, LookupError) as err:
        return FileResult(path, diagnostics=[Diagnostic(
            path, f"cannot decode as UTF-8 or its declared encoding ({err.__class__.__name__})")])
    try:
        if test:  # named like a test: written as one (test functions, a framework)?
            test = written_as_tests(text)
        result = lint_text(text, path, options, extra_ignores, test=test)
        legacy = read_legacy(text)
        if legacy is not None:
            result.diagnostics.append(Diagnostic(
                path, legacy.describe(), kind="warning", line=legacy.first_line))
            result.unfixable = legacy.kinds != ("async=",)
        return result
    except SyntaxError as err:
        return FileResult(path, diagnostics=[Diagnostic(
            path, f"syntax error: {err.msg}", line=err.lineno, column=err.offset)])
    except ValueError as err:  # source with NUL bytes
        return FileResult(path, diagnostics=[Diagnostic(path, f"cannot parse: {err}")])
    except (RecursionError, MemoryError) as err:
        return FileResult(path, diagnostics=[Diagnostic(
            path, f"too deeply nested or too large to analyse ({err.__class__.__name__})")])


@dataclass
class RunResult:
    results: list[FileResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    parsed: int = 0
    program: Program | None = None

    @property
    def findings(self) -> list[LintFinding]:
        out = [f for r in self.results for f in r.findings]
        return sorted(out, key=LintFinding.sort_key)

    @property
    def all_diagnostics(self) -> list[Diagnostic]:
        return self.diagnostics + [d for r in self.results for d in r.diagnostics]


Item = tuple[str, LintOptions, tuple[str, ...], bool]  # path, options, ignores, test code
# A piece of a big module: path, options, ignores, test, the piece, the end of the next
# piece, the module's import statements
Piece = tuple[str, LintOptions, tuple[str, ...], bool, Chunk, int, str]


def _first_pass_chunk(chunk: list[Item | Piece]) -> list[FileResult]:
    with gc_paused():
        out = [lint_file(*item) if len(item) == 4 else lint_piece(*item) for item in chunk]
    collect_chunk()
    return out


def lint_piece(path: str, options: LintOptions, extra_ignores: tuple[str, ...], test: bool,
               piece: Chunk, next_end: int, header: str) -> FileResult:
    """The first pass over one piece of a big module (see :mod:`pitstop.lint.chunks`). A
    piece that does not parse on its own (cut inside a multi-line string the splitter did
    not see) is tried again together with the next piece."""
    try:
        preamble = parse(header, path).body if header else []
    except (SyntaxError, ValueError):
        preamble = []
    try:
        with open(path, "rb") as fh:
            fh.seek(piece.start)
            data = fh.read(max(piece.end, next_end) - piece.start)
        for end in dict.fromkeys((piece.end, next_end)):
            text = "\n" * (piece.first_line - 1) + decode(data[: end - piece.start])
            try:
                tree = parse(text, path)
            except SyntaxError as err:
                if end == max(piece.end, next_end):
                    return FileResult(path, diagnostics=[Diagnostic(
                        path, f"syntax error: {err.msg}", line=err.lineno, column=err.offset)])
                continue
            return lint_text(text, path, options, extra_ignores, tree=tree, test=test,
                             preamble=preamble)
    except (OSError, UnicodeError, LookupError, ValueError, RecursionError, MemoryError) as err:
        return FileResult(path, diagnostics=[Diagnostic(path, f"cannot read: {err}")])
    except Exception as err:
        return FileResult(path, diagnostics=[_internal(path, err)])
    return FileResult(path)


def _items(f: SourceFile, ign: tuple[str, ...], options: LintOptions) -> list[Item | Piece]:
    path = str(f.path)
    whole: list[Item | Piece] = [(path, options, ign, f.is_test)]
    if f.size <= CHUNK_BYTES or not path.endswith(".py"):
        return whole
    try:
        data = read_source(path)
    except OSError:
        return whole
    if not mentions_torch(data):
        return whole
    pieces = chunks.split(data, CHUNK_BYTES)
    header = chunks.import_header(data)
    test = f.is_test and written_as_tests(data.decode("utf-8", "replace"))
    return [(path, options, ign, test, p,
             pieces[i + 1].end if i + 1 < len(pieces) else p.end, header)
            for i, p in enumerate(pieces)]


def run_files(files: list[SourceFile], options: LintOptions,
              ignores_for: Callable[[Path], tuple[str, ...]] = lambda p: (),
              *, jobs: int | None = None,
              progress: Callable[[int], None] | None = None) -> list[FileResult]:
    """The first pass over ``files`` on all usable cores (big modules in pieces)."""
    jobs = jobs or cpus_usable()
    items: list[Item | Piece] = []
    for f in sorted(files, key=lambda f: f.size, reverse=True):
        items.extend(_items(f, ignores_for(f.path), options))
    # the pieces of a big module (a megabyte of generated code) are spread over the
    # cores even when they are few
    results = map_chunks(_first_pass_chunk, items, jobs, progress if len(items) == len(files) else None,
                   spread=len(items) > len(files))
    if len(items) == len(files):
        return results
    merged: dict[str, list[FileResult]] = {}
    for r in results:
        merged.setdefault(r.path, []).append(r)
    out = []
    for path, parts in merged.items():
        out.append(parts[0] if len(parts) == 1 else chunks.merge(path, parts))
    if progress:
        progress(len(out))
    return out


# ---------------------------------------------------------------------- the program
MAX_CONTEXT_MODULES = 300


def context_summaries(results: list[FileResult], linted: set[str],
                      program: Program) -> list[ModuleSummary]:
    """Summaries of the local modules the linted files import but that are not linted
    (`train.py` alone, importing `data.py` beside it): the program needs them, their
    findings are not reported."""
    out: list[ModuleSummary] = []
    todo = [r.summary for r in results if r.summary is not None]
    seen = set(linted)
    is_file: dict[str, bool] = {}  # the same few names are looked for from every module
    while todo and len(out) < MAX_CONTEXT_MODULES:
        s = todo.pop()
        key = program.key(s.path)
        for imp in s.imports:
            cands: list[str] = []
            if imp.module or imp.level:
                cands.extend(program.module_candidates(key, imp.module, imp.level))
            if imp.name:
                cands.extend(program.module_candidates(
                    key, f"{imp.module}.{imp.name}" if imp.module else imp.name, imp.level))
            for cand in cands:
                if cand in seen:
                    break
                exists = is_file.get(cand)
                if exists is None:
                    exists = is_file[cand] = os.path.isfile(cand)
                if not exists:
                    continue
                seen.add(cand)
                summary = _summarise_file(cand)
                if summary is not None:
                    out.append(summary)
                    todo.append(summary)
                break
    return out


def _summarise_file(path: str) -> ModuleSummary | None:
    try:
        data = read_source(path)
        if len(data) > MAX_CONTEXT_BYTES:
            return None  # (imported by the program: torch or not, it may route its calls)
        text = decode(data)
        tree = parse(text, path)
    except (OSError, SyntaxError, ValueError, UnicodeError, LookupError, RecursionError,
            MemoryError):
        return None
    return summarize(ModuleIndex(tree, path, text=text))


_PROGRAM: Program | None = None
_LINTED: frozenset[str] = frozenset()
_TESTS: frozenset[str] = frozenset()
_TREES: dict[str, tuple[ast.Module, str] | None] = {}


def _load_module(key: str) -> tuple[ast.Module, str] | None:
    """A module of the program, parsed (once per process), for calls followed into it."""
    if key in _TREES:
        return _TREES[key]
    found: tuple[ast.Module, str] | None = None
    try:
        text = decode(read_source(key))
        found = (parse(text, key), text)
    except (OSError, SyntaxError, ValueError, UnicodeError, LookupError, RecursionError,
            MemoryError):
        found = None
    if len(_TREES) > 64:
        _TREES.clear()
    _TREES[key] = found
    return found


def relint_file(path: str, options: LintOptions, extra_ignores: tuple[str, ...],
                program: Program, linted: frozenset[str], tests: frozenset[str]) -> FileResult:
    """The third pass over one file: analysed against the whole program. Its findings may
    lie in other linted files (a per-batch helper of another module)."""
    try:
        text = decode(read_source(path))
        return relint_text(text, path, options, extra_ignores, program, linted, tests)
    except Exception as err:
        return FileResult(path, diagnostics=[_internal(path, err)])


def relint_text(text: str, path: str, options: LintOptions, extra_ignores: tuple[str, ...],
                program: Program, linted: frozenset[str],
                tests: frozenset[str] | None = None) -> FileResult:
    """Lint ``text`` as module ``path`` of ``program``. Raises SyntaxError.
    ``linted``: the keys of the modules whose findings are reported; ``tests``: of those
    that are test code."""
    tree = parse(text, path)
    lines = text.splitlines()
    analysis = Analysis(program, options, load=_load_module,
                        reportable=lambda key: key in linted, tests=tests)
    ctx = ModuleContext(tree, lines, path, text=text, analysis=analysis)
    analyze(ctx)
    own = [f for f in analysis.findings if f.path == path]
    others = []
    for f in analysis.findings:
        if f.path == path:
            continue
        octx = analysis.contexts.get(program.key(f.path))
        if octx is not None and apply_noqa([f], octx.lines) and not _ignored(
                f, options.ignored_for(f.path)):
            others.append(f)
    return FileResult(path, _filter(own, lines, extra_ignores) + others, [],
                      frozenset(ctx.facts), _top_imports(ctx.index),
                      summary=program.summary(ctx.key), uses=frozenset(analysis.uses))


def _ignored(f: LintFinding, codes: tuple[str, ...]) -> bool:
    return bool(codes) and not Selection(select=("LT",), ignore=codes).wants(
        f.code, f.doc.name, f.category)


def _relint_chunk(chunk: list[Item]) -> list[FileResult]:
    assert _PROGRAM is not None
    with gc_paused():
        out = [relint_file(p, o, ign, _PROGRAM, _LINTED, _TESTS) for p, o, ign, _t in chunk]
    collect_chunk()
    return out


def link(results: list[FileResult], options: LintOptions,
         roots: list[str] | None = None) -> Program:
    """The second pass: the program of the linted files and the modules they import."""
    summaries = [r.summary for r in results if r.summary is not None]
    base = Program(summaries, roots=roots or [], device=options.device)
    # (a linted file skipped for naming no torch may still be the glue between two that
    # do -- `models/select_model.py` importing the model class by name -- so the modules
    # the program imports are summarised whether or not they were skipped)
    linted = {base.key(r.path) for r in results if not r.skipped}
    extra = context_summaries(results, linted, base)
    if not extra:
        return base
    return Program(summaries + extra, roots=roots or [], device=options.device)


def second_look(results: list[FileResult], program: Program, options: LintOptions,
                ignores_for: Callable[[Path], tuple[str, ...]], jobs: int,
                tests: frozenset[str] = frozenset()) -> None:
    """The third pass: analyse again, against the whole program, the files for which it
    answers some question differently; their findings replace the first pass's."""
    global _PROGRAM, _LINTED, _TESTS
    # (test code left out of the loop rules has nothing a second look could change)
    todo = [r for r in results if r.answers and (options.include_tests or program.key(
        r.path) not in tests) and answers_differ(program, r.answers)]
    if not todo:
        return
    by_path = {r.path: r for r in results}
    linted = frozenset(program.key(r.path) for r in results if not r.skipped)
    _PROGRAM, _LINTED, _TESTS = program, linted, tests
    _TREES.clear()
    try:
        items: list[Item] = [(r.path, options, ignores_for(Path(r.path)), False) for r in todo]
        again = map_chunks(_relint_chunk, items, jobs, None)
    finally:
        _PROGRAM, _LINTED, _TESTS = None, frozenset(), frozenset()
    for r in again:  # own findings first: another file's second look may add to them
        old = by_path[r.path]
        if r.diagnostics:
            old.diagnostics.extend(r.diagnostics)
            continue
        old.findings = [f for f in r.findings if f.path == r.path]
        old.uses = r.uses
    for r in again:
        for f in r.findings:
            if f.path != r.path and f.path in by_path:
                by_path[f.path].findings.append(f)
    for r in results:  # one finding per place, however many files led to it
        seen: set[tuple[str, int, int]] = set()
        kept = []
        for f in r.findings:
            k = (f.code, f.line, f.column)
            if k not in seen:
                seen.add(k)
                kept.append(f)
        r.findings = kept


def lint_paths_files(files: list[SourceFile], options: LintOptions,
                     ignores_for: Callable[[Path], tuple[str, ...]] = lambda p: (),
                     *, jobs: int | None = None,
                     progress: Callable[[int], None] | None = None,
                     roots: list[str] | None = None) -> RunResult:
    jobs = jobs or cpus_usable()
    # The collector is paused in this process too: the results of a big run (a summary
    # per module) are a million objects that only grow, and every full collection walked
    # them all (a third of this process's CPU time on torch's 2,285 files).
    with gc_paused():
        results = run_files(files, options, ignores_for, jobs=jobs, progress=progress)
        program = link(results, options, roots)
        path_tests = frozenset(str(f.path) for f in files if f.is_test)
        tests = frozenset(program.key(r.path) for r in results
                          if r.path in path_tests and (r.test_code or not r.analyzed))
        second_look(results, program, options, ignores_for, jobs, tests)
        resolve_program_findings(results, program)
    for r in results:  # the fixer leaves such a file alone: no finding says [*]
        if r.unfixable:
            r.findings = [replace(f, fix=None) for f in r.findings]
    run = RunResult(results=sorted(results, key=lambda r: r.path), files=len(files))
    run.parsed = sum(1 for r in results if not r.skipped)
    run.program = program
    return run


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()
