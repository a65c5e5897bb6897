"""What a module names: the identifiers its text mentions (a class or function no module
mentions is not run by the program), the modules it looks names up in at run time, and
where its architecture facts sit among its top-level definitions. Read by the module
summary; the program's reach (``program_reach``) links them."""

from __future__ import annotations

import ast
import re
from collections import Counter

from pitstop.lint.index import ModuleIndex

PATH_HINTS = ("sys.path.insert", "sys.path.append", "sys.path.extend", "sys.path +=",
              "addsitedir", "_init_paths", "_init_path")
IDENT_RE = re.compile(r"[A-Za-z_]\w*")
GETATTR_RE = re.compile(r"getattr\(\s*([A-Za-z_][\w.]*)\s*,\s*(?=[^'\"\s])")
DICT_RE = re.compile(r"([A-Za-z_][\w.]*)$")
ANY_EVAL_RE = re.compile(r"(?<![\w.])(?:eval|exec)\(")


def arch_owners(index: ModuleIndex) -> dict[str, tuple[str, ...]]:
    """Where the module's architecture facts are seen (see ``ModuleSummary.arch_owners``)."""
    if not index.arch_lines:
        return {}
    spans = [(d.lineno, d.end_lineno or d.lineno, d.name) for d in index.tree.body
             if isinstance(d, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
             and not d.decorator_list]
    out: dict[str, tuple[str, ...]] = {}
    for fact, lines in index.arch_lines.items():
        owners = {next((name for lo, hi, name in spans if lo <= line <= hi), "")
                  for line in lines}
        out[fact] = tuple(sorted(owners))
    return out


def top_level_refs(index: ModuleIndex) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """For each top-level class and function, the module's other top-level definitions its
    text names; and those named outside any of them (the module's body, decorators)."""
    if not index.text:
        return {}, ()  # (no source lines to match: every definition counts as reached)
    lines = index.text.splitlines()
    defs = [d for d in index.tree.body
            if isinstance(d, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    names = {d.name for d in defs}
    refs: dict[str, tuple[str, ...]] = {}
    inside = [False] * (len(lines) + 2)
    for d in defs:
        end = d.end_lineno or d.lineno
        text = "\n".join(lines[d.lineno - 1:end])
        refs[d.name] = tuple(sorted((set(IDENT_RE.findall(text)) & names) - {d.name}))
        for i in range(d.lineno, end + 1):
            inside[i] = True
    body = "\n".join(line for i, line in enumerate(lines, 1) if not inside[i])
    return refs, tuple(sorted(set(IDENT_RE.findall(body)) & names))


def mentions(index: ModuleIndex) -> tuple[str, frozenset[str]]:
    """The identifiers the module's text mentions more often than it defines them, and
    the modules it looks names up in at run time (`getattr(trainers, name)`)."""
    text = index.text or ast.unparse(index.tree)  # (callers pass the text: unparse is slow)
    counts = Counter(IDENT_RE.findall(text))
    # (where a top-level class or function is defined is no use of it; nor is a class
    # naming itself in `super(Trainer, self)`)
    for node in index.tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            counts[node.name] -= 1 + (text.count(f"super({node.name},")
                                      if isinstance(node, ast.ClassDef) else 0)
    mentions = " ".join(k for k, c in counts.items() if c > 0)
    dynamic: set[str] = set()
    if "getattr(" in text:  # `getattr(trainers, name)`: a name chosen at run time
        dynamic.update(m.group(1).rsplit(".", 1)[-1] for m in GETATTR_RE.finditer(text))
    at = text.find(".__dict__[")
    while at >= 0:  # `models.__dict__[args.arch]`
        m = DICT_RE.search(text, max(0, at - 80), at)
        if m is not None:
            dynamic.add(m.group(1).rsplit(".", 1)[-1])
        at = text.find(".__dict__[", at + 1)
    if "globals()" in text or "sys.modules[" in text or "locals()[" in text or (
            ("eval(" in text or "exec(" in text) and ANY_EVAL_RE.search(text)):
        dynamic.add("globals")  # any name of any module may be the one picked
    if "import_module(" in text:
        dynamic.add("import_module")
    return mentions, frozenset(dynamic)
