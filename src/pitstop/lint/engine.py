"""Linting many files: read, gate, parse and analyse each in a process pool, then decide
the program-level findings once the facts of every file of each package are known.

Nothing here raises on a bad input file: every problem becomes a :class:`Diagnostic`
naming the file, and the run goes on.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import multiprocessing
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from pitstop.lint.analyze import (
    LintOptions,
    Selection,
    analyze_tree,
    apply_noqa,
    mentions_torch,
    parse,
    worth_analysing,
)
from pitstop.lint.discover import SourceFile
from pitstop.lint.model import Diagnostic, FileResult, LintFinding
from pitstop.lint.notebook import NotebookError, load_notebook

# A file's package-level facts, read with a regex from files that are not being linted
# but belong to the same package (a flag set in utils.py counts for train.py).
FACT_PATTERNS: dict[str, re.Pattern[bytes]] = {
    "reduced_precision": re.compile(rb"autocast|GradScaler|\.half\(\)|bfloat16|float16|"
                                    rb"precision\s*=\s*['\"][^'\"]*16"),
    "tf32_enabled": re.compile(rb"set_float32_matmul_precision\(\s*['\"](high|medium)|"
                               rb"matmul\.allow_tf32\s*=\s*True|fp32_precision\s*=\s*['\"]tf32|"
                               rb"fast_defaults\("),
    "cudnn_benchmark_true": re.compile(rb"cudnn\.benchmark\s*=\s*True|fast_defaults\("),
    "deterministic": re.compile(rb"cudnn\.deterministic\s*=\s*True|"
                                rb"use_deterministic_algorithms\(\s*True"),
    "has_conv": re.compile(rb"Conv[123]d|resnet|vgg|efficientnet|mobilenet|densenet|convnext|"
                           rb"regnet"),
    "uses_ddp": re.compile(rb"DistributedDataParallel|FullyShardedDataParallel|\bDDP\("),
    "ddp_sync_control": re.compile(rb"no_sync|require_backward_grad_sync"),
}
MAX_SIBLINGS = 500
MAX_SIBLING_BYTES = 2_000_000


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


def default_options(selection: Selection | None = None) -> LintOptions:
    return LintOptions(selection=selection or Selection(), cpus=cpus_usable(),
                       local_world_size=local_world_size())


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


def lint_text(text: str, path: str, options: LintOptions,
              extra_ignores: tuple[str, ...] = ()) -> FileResult:
    """Lint Python source ``text`` (already decoded). Raises SyntaxError and friends."""
    tree = parse(text, path)
    if not worth_analysing(text):
        return FileResult(path, analyzed=False)
    lines = text.splitlines()
    findings, facts, imports = analyze_tree(tree, text, path, options, lines)
    findings = apply_noqa(findings, lines)
    if extra_ignores:
        sel = Selection(select=("LT",), ignore=extra_ignores)
        findings = [f for f in findings if sel.wants(f.code, f.doc.name, f.category)]
    return FileResult(path, findings, [], facts, imports)


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


def lint_file(path: str, options: LintOptions, extra_ignores: tuple[str, ...] = ()) -> FileResult:
    """Lint one file; never raises (problems become diagnostics)."""
    try:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
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
        try:
            text = decode(data)
        except (UnicodeError, LookupError) as err:
            return FileResult(path, diagnostics=[Diagnostic(
                path, f"cannot decode as UTF-8 or its declared encoding ({err.__class__.__name__})")])
        try:
            return lint_text(text, path, options, extra_ignores)
        except SyntaxError as err:
            return FileResult(path, diagnostics=[Diagnostic(
                path, f"syntax error: {err.msg}", line=err.lineno,
                column=err.offset)])
        except ValueError as err:  # source with NUL bytes
            return FileResult(path, diagnostics=[Diagnostic(path, f"cannot parse: {err}")])
        except (RecursionError, MemoryError) as err:
            return FileResult(path, diagnostics=[Diagnostic(
                path, f"too deeply nested or too large to analyse ({err.__class__.__name__})")])
    except Exception as err:  # a bug in pitstop: report it, keep going
        tb = traceback.extract_tb(err.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        return FileResult(path, diagnostics=[Diagnostic(
            path, f"internal error in pitstop lint ({err.__class__.__name__}: {err} at {where}); "
            "please report it", kind="internal")])


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while linting: an AST is a tree (no cycles,
    freed by reference counting), but its hundred thousand nodes keep triggering
    collections that find nothing -- about 14% of the CPU time on torch's files."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _lint_chunk(args: tuple[list[tuple[str, tuple[str, ...]]], LintOptions]) -> list[FileResult]:
    chunk, options = args
    with _gc_paused():
        return [lint_file(p, options, ign) for p, ign in chunk]


@dataclass
class RunResult:
    results: list[FileResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    parsed: int = 0

    @property
    def findings(self) -> list[LintFinding]:
        out = [f for r in self.results for f in r.findings]
        return sorted(out, key=LintFinding.sort_key)

    @property
    def all_diagnostics(self) -> list[Diagnostic]:
        return self.diagnostics + [d for r in self.results for d in r.diagnostics]


def run_files(files: list[SourceFile], options: LintOptions,
              ignores_for: Callable[[Path], tuple[str, ...]] = lambda p: (),
              *, jobs: int | None = None,
              progress: Callable[[int], None] | None = None) -> list[FileResult]:
    """Lint ``files`` on all usable cores (in this process when there are few)."""
    jobs = jobs or cpus_usable()
    items = [(str(f.path), ignores_for(f.path)) for f in
             sorted(files, key=lambda f: f.size, reverse=True)]
    if jobs <= 1 or len(items) < 16:
        out = []
        for p, ign in items:
            with _gc_paused():
                out.append(lint_file(p, options, ign))
            if progress:
                progress(1)
        return out
    # Biggest files first, in small chunks: the pool balances the tail.
    size = max(1, min(32, len(items) // (jobs * 8)))
    chunks = [(items[i:i + size], options) for i in range(0, len(items), size)]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    mp = multiprocessing.get_context(method)
    results: list[FileResult] = []
    try:
        pool = mp.Pool(jobs)
    except OSError:  # no /dev/shm semaphores (some containers): lint in this process
        return run_files(files, options, ignores_for, jobs=1, progress=progress)
    with pool:
        for part in pool.imap_unordered(_lint_chunk, chunks):
            results.extend(part)
            if progress:
                progress(len(part))
    return results


# ---------------------------------------------------------------------- packages
def package_root(path: Path, memo: dict[Path, tuple[Path, bool]] | None = None
                 ) -> tuple[Path, bool]:
    """The top folder of the package holding ``path`` (and True), or its folder (False).
    ``memo`` (folder -> answer) saves the path resolution and the ``__init__.py`` look-ups
    for the other files of a folder already seen (a symlinked file is always resolved:
    its package is where it points)."""
    folder = path.parent
    if memo is not None and path.is_symlink():
        memo = None
    if memo is not None and folder in memo:
        return memo[folder]
    d = path.resolve().parent
    if not (d / "__init__.py").exists():
        answer = (d, False)
    else:
        while (d.parent / "__init__.py").exists() and d.parent != d:
            d = d.parent
        answer = (d, True)
    if memo is not None:
        memo[folder] = answer
    return answer


def sibling_facts(root: Path, recursive: bool, linted: set[Path],
                  only: frozenset[str] | None = None) -> set[str]:
    """Facts of the package's files that are not linted (``only``: these module names)."""
    facts: set[str] = set()
    it: Iterable[Path] = root.rglob("*.py") if recursive else root.glob("*.py")
    if only is not None:
        it = (root / f"{name}.py" for name in sorted(only) if (root / f"{name}.py").is_file())
    for n, p in enumerate(it):
        if n >= MAX_SIBLINGS:
            break
        try:
            rp = p.resolve()
            if rp in linted or p.stat().st_size > MAX_SIBLING_BYTES:
                continue
            data = rp.read_bytes()
        except OSError:
            continue
        for name, pattern in FACT_PATTERNS.items():
            if name not in facts and pattern.search(data):
                facts.add(name)
    return facts


def condition_holds(condition: str, facts: set[str] | frozenset[str]) -> bool:
    for token in condition.split():
        if token.startswith("+") and token[1:] not in facts:
            return False
        if token.startswith("-") and token[1:] in facts:
            return False
    return True


def resolve_program_findings(results: list[FileResult]) -> dict[Path, set[str]]:
    """Keep a program-level finding only if its package's facts allow it; returns the
    facts of every package seen (the fixer re-checks with them)."""
    by_root: dict[Path, tuple[bool, list[FileResult]]] = {}
    memo: dict[Path, tuple[Path, bool]] = {}
    for r in results:
        root, is_pkg = package_root(Path(r.path), memo)
        by_root.setdefault(root, (is_pkg, []))[1].append(r)
    facts_by_root: dict[Path, set[str]] = {}
    for root, (is_pkg, members) in by_root.items():
        needs = any(f.condition for r in members for f in r.findings)
        if is_pkg:
            # A package is one program: a flag set in utils.py counts for train.py.
            facts: set[str] = set()
            for r in members:
                facts |= r.facts
            if needs:
                analyzed = {Path(r.path).resolve() for r in members if r.analyzed and not r.skipped}
                facts |= sibling_facts(root, True, analyzed)
            facts_by_root[root] = facts
            for r in members:
                r.findings = [f for f in r.findings
                              if not f.condition or condition_holds(f.condition, facts)]
            continue
        # A plain folder of scripts: each script with the sibling modules it imports.
        by_stem = {Path(r.path).stem: r for r in members}
        for r in members:
            if not any(f.condition for f in r.findings):
                continue
            facts = set(r.facts)
            linted_imports = {m for m in r.imports if m in by_stem}
            for m in linted_imports:
                facts |= by_stem[m].facts
            facts |= sibling_facts(root, False, set(), frozenset(r.imports - linted_imports))
            r.findings = [f for f in r.findings
                          if not f.condition or condition_holds(f.condition, facts)]
    return facts_by_root


def lint_paths_files(files: list[SourceFile], options: LintOptions,
                     ignores_for: Callable[[Path], tuple[str, ...]] = lambda p: (),
                     *, jobs: int | None = None,
                     progress: Callable[[int], None] | None = None) -> RunResult:
    results = run_files(files, options, ignores_for, jobs=jobs, progress=progress)
    resolve_program_findings(results)
    run = RunResult(results=sorted(results, key=lambda r: r.path), files=len(files))
    run.parsed = sum(1 for r in results if not r.skipped)
    return run


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()
