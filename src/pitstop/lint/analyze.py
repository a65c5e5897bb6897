"""Lint one source text: parse once with ``ast``, build the loop context, run the rules,
apply ``# noqa`` and the selection. Pure: no files are read or written here."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from pitstop.lint.context import USE_LOOP, USE_TRAIN, ModuleContext
from pitstop.lint.model import LintFinding
from pitstop.lint.settings import CONFIG_CALL_RE

# Cheap byte-level gate: a file that never mentions torch is not even parsed -- unless it
# holds one of the analysis triggers below: a training loop in train.py whose model,
# loader and optimizer all come from sibling modules (`from .data import make_loader`)
# never names torch, yet its per-batch `.item()` is as slow as anywhere else.
TRIGGERS = (b"torch", b"DataLoader")
# A parsed file is analysed only if some rule could fire in it: a training step, a loop
# over something loader-like, a DataLoader, deprecated amp, hand-zeroed gradients,
# BatchNorm, DataParallel, a forward() that moves a new tensor. Every rule's trigger is
# here; the rest is parsed only to report syntax errors. Substring tests first (memchr
# speed), a regex only for the short loader names.
# (Loader-like iterator names are spelled out: a bare "_iter" or "zero_" would let in a
# quarter of torch's own files -- `_iterate`, `zero_point` -- for nothing.)
GATE_SUBSTRINGS = ("step(", ".backward(", "oader", "batches", "batch_iter", "data_iter",
                   "train_iter", "val_iter", ".amp", "import amp", "amp import", "zero_grad(",
                   "set_to_none", "BatchNorm", "DataParallel", "optimize_param",
                   "train_on_batch", "update_parameters",
                   # a loop that pulls its batches by hand (`batch = batcher.next_batch()`)
                   # (the names of `loops.GET_BATCH_RE`)
                   "next_batch", "get_batch", "sample_batch", "load_batch", "fetch_batch",
                   "draw_batch", "get_train_batch", "get_val_batch", "get_eval_batch")
# `dl`, `train_dl`, `dl_val` (and, harmlessly, `x_dl_y`): "dl" not inside a word. The
# literal comes first so that the regex engine jumps between "dl"s (a pattern that starts
# with `\b` or an alternation tries every position: 0.3 s on torch's files).
GATE_DL = re.compile(r"dl(?![A-Za-z0-9])(?<![A-Za-z0-9]dl)")
# forward() is analysed for tensors created on the CPU and moved: `torch.x(...).to(`.
# (a forward() that moves a new tensor, or reads one on the host: syncs in a model's or
# loss's forward run once per batch)
FORWARD_GATE = re.compile(r"\.(?:to|cuda|type_as)\(|\.(?:item|tolist|cpu|numpy|nonzero)\(|"
                          r"empty_cache|synchronize|\b(?:int|float)\(|masked_select|"
                          # a boolean mask indexing (`logits[active_loss]`, `x[mask]`)
                          r"\[\w*(?:mask|active|valid|keep|is_pos|is_neg)\w*\]")


def worth_analysing(text: str) -> bool:
    """Could any rule fire in this text? (Cheap: substring scans.)"""
    if any(s in text for s in GATE_SUBSTRINGS):
        return True
    if "dl" in text and GATE_DL.search(text) is not None:
        return True
    return "def forward" in text and FORWARD_GATE.search(text) is not None


NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
                     re.IGNORECASE)


@dataclass(frozen=True)
class Selection:
    """Which codes to report: ``select``/``ignore`` entries are code prefixes (``LT0``,
    ``LT001``), rule names (``sync-in-hot-loop``) or categories (``sync``)."""

    select: tuple[str, ...] = ("LT",)
    ignore: tuple[str, ...] = ()

    def wants(self, code: str, name: str = "", category: str = "") -> bool:
        def hit(entries: tuple[str, ...]) -> int:
            best = -1
            for e in entries:
                if code.startswith(e.upper()) or e in (name, category):
                    best = max(best, len(e) if code.startswith(e.upper()) else 99)
            return best
        s, i = hit(self.select), hit(self.ignore)
        return s >= 0 and s > i


@dataclass(frozen=True)
class LintOptions:
    """Everything a worker needs to lint a file; picklable."""

    selection: Selection = field(default_factory=Selection)
    cpus: int = 1
    local_world_size: int = 1
    device: str = "auto"  # "auto" (decide from the code), "gpu" or "cpu"
    include_tests: bool = False  # test code gets the hot-loop and loader rules too
    # per-file-ignores: (glob, codes) relative to ignore_root
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ignore_root: str = ""

    def ignored_for(self, path: str) -> tuple[str, ...]:
        if not self.per_file_ignores:
            return ()
        from pitstop.lint.config import LintConfig

        return LintConfig(per_file_ignores=self.per_file_ignores,
                          root=Path(self.ignore_root or ".")).ignored_for(Path(path))


# a module of command-line options or config classes: its defaults count for the program;
# a helper module of metrics that never names torch (`return correct.sum().item()`) holds
# syncs when the training loop calls it per batch
_GATE_BYTES = TRIGGERS + tuple(t.encode() for t in GATE_SUBSTRINGS) + (
    b".cuda(", b".to(", b"add_argument", b"dataclass", b".item()", b".tolist()", b".cpu()",
    b".numpy()", b"import *")
_GATE_DL_BYTES = re.compile(GATE_DL.pattern.encode())
_CONFIG_CALL_BYTES = re.compile(CONFIG_CALL_RE.pattern.encode())


def mentions_torch(data: bytes) -> bool:
    """Could this file hold torch code worth parsing? True when it names torch or a
    DataLoader, or holds any of the analysis triggers (a step, a backward, a loader...)."""
    if any(t in data for t in _GATE_BYTES):
        return True
    if b"dl" in data and _GATE_DL_BYTES.search(data) is not None:
        return True
    # a config module of another framework (`tf.contrib.training.HParams(fp16_run=False)`)
    return _CONFIG_CALL_BYTES.search(data) is not None


# Rules that still apply to test code: a deprecated API is deprecated there too.
TEST_RULES = frozenset({"LT007"})


def analyze(ctx: ModuleContext) -> None:
    """Run every selected rule on one module (findings go to ``ctx.analysis``)."""
    from pitstop.findings import get_doc
    from pitstop.lint.rules import HOT_RULES, MODULE_RULES

    sel = ctx.options.selection
    tests_off = ctx.is_test and not ctx.options.include_tests

    def wanted(code: str) -> bool:
        if tests_off and code not in TEST_RULES:
            return False
        doc = get_doc(code)
        return sel.wants(code, doc.name, doc.category)

    hot = [rule for code, rule in HOT_RULES if wanted(code)]
    # The walk also feeds program-level facts (training loops, batches moved to the GPU),
    # so it runs whenever the text could hold a loop worth knowing about -- not in test
    # code left out of the loop rules (its loops are not the program's training).
    if not tests_off and ctx.could_have_hot_loops():
        ctx.run(hot)
    if ctx.has_train_loop:
        ctx.analysis.uses.add(USE_TRAIN + ctx.key)
    if any(hot.kind != "eval" or not _method_of_a_class(ctx, hot.node)
           for hot in ctx.hot_loops):
        # (a model class's own validation method is no entry point of the run: the class is
        # built for training elsewhere)
        ctx.analysis.uses.add(USE_LOOP + ctx.key)
    for code, check in MODULE_RULES:
        if wanted(code):
            check(ctx)


def analyze_tree(tree: ast.Module, text: str, path: str, options: LintOptions,
                 lines: list[str] | None = None
                 ) -> tuple[list[LintFinding], frozenset[str], frozenset[str]]:
    """Run every rule on a parsed module judged on its own; returns findings (before
    noqa), the facts it contributes to its program, and the top-level names of the
    modules it imports."""
    if lines is None:
        lines = text.splitlines()
    ctx = ModuleContext(tree, lines, path, text=text, options=options)
    analyze(ctx)
    imports = frozenset(v.split(".", 1)[0] for v in ctx.aliases.values())
    return ctx.findings, frozenset(ctx.facts), imports


def noqa_codes(line: str) -> set[str] | None:
    """Codes silenced on ``line``: None when there is no noqa, an empty set for a bare one."""
    if "noqa" not in line.lower():
        return None
    m = NOQA_RE.search(line)
    if m is None:
        return None
    codes = m.group("codes")
    if not codes:
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def apply_noqa(findings: list[LintFinding], lines: list[str]) -> list[LintFinding]:
    out = []
    for f in findings:
        line = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
        codes = noqa_codes(line)
        if codes is None or (codes and f.code not in codes):
            out.append(f)
    return out


def _method_of_a_class(ctx: ModuleContext, node: ast.AST) -> bool:
    """Is ``node`` inside a method (a function defined in a class)?"""
    fn = ctx.index.enclosing_function(node)
    return fn is not None and fn in ctx.index.class_of
