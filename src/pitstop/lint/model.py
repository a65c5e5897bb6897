"""Plain data that flows through the linter: findings, fixes, diagnostics, per-file facts.

Everything here is picklable, because files are linted in worker processes and their
results travel back to the parent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pitstop.findings import Finding, Location, Remedy, Severity

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """One change to one node, applied with libcst by :mod:`pitstop.lint.fixes`.

    ``line``/``column`` (1-based line, 0-based character column) point at the start of
    the node the edit applies to (for a call: the start of its callee); ``anchor`` is
    the last name of the callee (``"to"``, ``"DataLoader"``) or the literal being
    replaced, which tells apart nodes that start at the same place
    (``torch.zeros(3).cuda()``: both calls start at ``torch``).

    ``op`` is one of:

    - ``kw_add`` (name, value): append ``name=value`` to the call's arguments
    - ``kw_set`` (name, value): replace the value of keyword ``name``
    - ``kw_remove`` (name): drop keyword ``name``
    - ``arg_set`` (index, value): replace positional argument ``index``
    - ``replace_callee`` (value = new callee, prepend = first argument, names = the
      keyword names that positional arguments become)
    - ``unwrap_to_device`` (name = ``device``, value): ``torch.zeros(3).cuda()`` becomes
      ``torch.zeros(3, device="cuda")``
    - ``replace_literal`` (value): replace a ``True``/``False`` name
    - ``insert_after_imports`` (value = a statement): add a module-level statement
    """

    op: str
    line: int = 0
    column: int = 0
    anchor: str = ""
    name: str = ""
    value: str = ""
    index: int = 0
    prepend: str = ""
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fix:
    """An automatic fix: its safety (``safe``/``unsafe``), what it does, and its edits."""

    safety: str
    description: str
    edits: tuple[Edit, ...]

    def to_dict(self) -> dict[str, str]:
        return {"safety": self.safety, "description": self.description}


@dataclass(frozen=True)
class LintFinding:
    """One finding of the linter, located in a file (and, for notebooks, a cell)."""

    code: str
    path: str
    line: int  # 1-based; for notebooks, within the cell
    column: int  # 1-based, in characters
    message: str
    end_line: int | None = None
    end_column: int | None = None
    cell: int | None = None
    fix: Fix | None = None
    evidence: tuple[tuple[str, Any], ...] = ()
    # Program-level findings hold until the whole package has been seen: the name of
    # the package fact that must be absent for the finding to stand (see engine).
    condition: str = ""
    source_line: str = ""

    @property
    def doc(self) -> Any:
        from pitstop.findings import get_doc

        return get_doc(self.code)

    @property
    def category(self) -> str:
        return str(self.doc.category)

    @property
    def severity(self) -> Severity:
        sev: Severity = self.doc.severity
        return sev

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape documented in docs/lint.md."""
        out: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.doc.name,
            "category": self.category,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix.to_dict() if self.fix else None,
        }
        if self.cell is not None:
            out["cell"] = self.cell
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    def to_finding(self) -> Finding:
        """The project-wide :class:`~pitstop.findings.Finding` for this lint finding."""
        doc = self.doc
        remedy = Remedy.code(doc.fix.strip().splitlines()[0] if doc.fix.strip() else doc.title)
        if self.fix is not None:
            flag = "--fix" if self.fix.safety == SAFE else "--fix --unsafe-fixes"
            remedy = Remedy.pitstop(f"pitstop lint {flag} {self.path}", note=self.fix.description)
        return Finding(
            code=self.code,
            title=self.message,
            severity=self.severity,
            evidence=dict(self.evidence),
            remedy=remedy,
            location=Location(self.path, self.line, max(0, self.column - 1), self.end_line,
                              None if self.end_column is None else self.end_column - 1,
                              self.cell),
        )


@dataclass(frozen=True)
class Diagnostic:
    """A file the linter could not (fully) check, and why. ``kind`` is ``error`` for a
    file it found but could not check (unreadable, not Python, a syntax error: exit
    status 1, as in ruff), ``input`` for a path named on the command line that cannot be
    used (missing, inaccessible: exit status 2), ``warning`` for a path skipped because
    it is not a file to lint (a FIFO or device named ``*.py``: never opened), ``note`` for
    something skipped on purpose (a symlink loop), ``internal`` for a bug in pitstop
    itself (exit status 70)."""

    path: str
    message: str
    kind: str = "error"
    line: int | None = None
    column: int | None = None


# Package-level facts a file contributes to program-level rules (amp-missing, tf32,
# cudnn-benchmark, ddp-no-sync). Each is a flag name listed in FACT_NAMES.
FACT_NAMES = (
    "reduced_precision",  # autocast / GradScaler / .half() / bf16 anywhere
    "tf32_enabled",  # set_float32_matmul_precision('high'|'medium') or allow_tf32 = True
    "cudnn_benchmark_true",
    "deterministic",  # cudnn.deterministic = True / use_deterministic_algorithms(True)
    "has_conv",  # builds a convolutional layer or a torchvision conv net
    "image_conv",  # ... one that is not 1-d (Conv2d/3d, the torchvision zoo)
    "has_rnn",  # builds an LSTM / GRU / RNN layer
    "uses_ddp",
    "ddp_sync_control",  # no_sync() / require_backward_grad_sync
)


@dataclass
class FileResult:
    """What linting one file produced."""

    path: str
    findings: list[LintFinding] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: frozenset[str] = frozenset()
    imports: frozenset[str] = frozenset()  # top-level module names it imports
    skipped: bool = False  # no torch-related text: not parsed at all
    analyzed: bool = True  # False: parsed (syntax checked) but no rule could fire
    summary: Any = None  # its ModuleSummary, for the program (None: not parsed)
    answers: dict[Any, Any] = field(default_factory=dict)  # questions asked of the program
    uses: frozenset[str] = frozenset()  # what its loops do with loaders (program facts)
    unfixable: bool = False  # read as Python 2: analysed, never rewritten
    test_code: bool = False  # test code (by path and by what it is written with)
    sha: str = ""  # content hash
