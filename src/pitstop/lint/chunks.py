"""Big modules linted in pieces, so that cost stays linear and memory bounded.

An AST takes about 150-200 bytes of memory per byte of source: one ``ast.parse`` of a 20
MB generated file would need 3-4 GB. A module above :data:`CHUNK_BYTES` is cut at
top-level statements (a ``def``, ``class``, decorator or unindented statement, never
inside a triple-quoted string) into pieces of about that size; each piece is parsed and
analysed on its own with the module's imports, in parallel, with line numbers kept
(``"\\n" * (first_line - 1)`` before it), and the pieces' results are merged into one
file result. What a piece cannot see: a function defined in another piece is not
followed per batch (its summary is still in the program for other modules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pitstop.lint.model import FileResult
from pitstop.lint.summary import CallSite, ModuleSummary

CHUNK_BYTES = 256_000
PROGRAM_ONCE = frozenset({"LT005", "LT006", "LT011"})  # reported at the first training loop
_TOP = re.compile(rb"(def |class |async def |@|if __name__)")
_TRIPLE = re.compile(rb'"""|\'\'\'')
_IMPORT = re.compile(rb"^(import|from)\s", re.M)


@dataclass(frozen=True)
class Chunk:
    """Bytes ``start:end`` of a file, whose first line is ``first_line``."""

    start: int
    end: int
    first_line: int


def split(data: bytes, size: int = CHUNK_BYTES) -> list[Chunk]:
    """Pieces of about ``size`` bytes, cut before top-level definitions."""
    if len(data) <= size:
        return [Chunk(0, len(data), 1)]
    out: list[Chunk] = []
    start, first, line_no, pos = 0, 1, 1, 0
    in_string = False
    prev_decorator = False
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        end = n if nl < 0 else nl + 1
        line = data[pos:end]
        if not in_string and pos - start >= size and _TOP.match(line) and not prev_decorator:
            out.append(Chunk(start, pos, first))
            start, first = pos, line_no
        if (b'"""' in line or b"'''" in line) and len(_TRIPLE.findall(line)) % 2 == 1:
            in_string = not in_string
        stripped = line.strip()
        if stripped:
            prev_decorator = line.startswith(b"@")
        pos = end
        line_no += 1
    out.append(Chunk(start, n, first))
    return out


def import_header(data: bytes) -> str:
    """The module's top-level import statements (each piece needs them to know what
    `torch`, `F`, `DataLoader` are)."""
    lines: list[bytes] = []
    for m in _IMPORT.finditer(data):
        end = data.find(b"\n", m.start())
        stmt = data[m.start(): end if end >= 0 else len(data)]
        if stmt.count(b"(") > stmt.count(b")"):  # `from x import (\n a,\n b)`
            close = data.find(b")", m.start())
            stmt = data[m.start(): close + 1 if close >= 0 else len(data)]
        if stmt.rstrip().endswith(b"\\"):
            continue
        lines.append(stmt.replace(b"\n", b" ").replace(b"\\", b" "))
    return b"\n".join(lines).decode("utf-8", "replace")


def merge(path: str, parts: list[FileResult]) -> FileResult:
    """One file's result from its pieces' results."""
    out = FileResult(path)
    summaries = [p.summary for p in parts if p.summary is not None]
    seen: set[tuple[str, int]] = set()
    once: set[str] = set()
    for p in parts:
        for f in p.findings:  # a piece parsed with the next one reports some twice
            if f.code in PROGRAM_ONCE:  # one per program: the first piece's
                if f.code in once:
                    continue
                once.add(f.code)
            if (f.code, f.line) not in seen:
                seen.add((f.code, f.line))
                out.findings.append(f)
        out.diagnostics.extend(p.diagnostics)
        out.facts |= p.facts
        out.imports |= p.imports
        out.uses |= p.uses
        out.answers.update(p.answers)
        out.analyzed = out.analyzed and p.analyzed
        out.test_code = out.test_code or p.test_code
    out.summary = merge_summaries(path, summaries) if summaries else None
    out.answers = {}  # too big to look at again against the program: judged in pieces
    return out


def merge_summaries(path: str, parts: list[ModuleSummary]) -> ModuleSummary:
    s = ModuleSummary(path)
    imports: dict[object, None] = {}
    origins: list[tuple[int, str]] = []
    callsites: list[CallSite] = []
    for p in parts:
        for i in p.imports:
            imports.setdefault(i)
        for k, f in p.functions.items():
            s.functions.setdefault(k, f)
        for k, c in p.classes.items():
            s.classes.setdefault(k, c)
        for k, g in p.globals.items():
            s.globals.setdefault(k, g)
        for k, st in p.settings.items():
            s.settings.setdefault(k, st)
        for k, line in p.facts.items():
            s.facts.setdefault(k, line)
        s.loaders.update(p.loaders)
        origins.extend(p.gpu_origins)
        callsites.extend(p.callsites)
        s.cpu_devices = s.cpu_devices or p.cpu_devices
    s.imports = tuple(imports)  # type: ignore[arg-type]
    s.gpu_origins = tuple(origins)
    s.callsites = tuple(callsites)
    s.cpu_only_devices = all(p.cpu_only_devices for p in parts) and not origins
    return s
