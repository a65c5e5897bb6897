"""The program model: the linted modules (and the local modules they import) as one
program.

:class:`Program` links the per-module summaries (:mod:`pitstop.lint.summary`): it
resolves imports to modules of the program (relative imports, packages, a script's
sibling modules), names to functions, classes and module-level values, descriptors to
what they stand for (a DataLoader built in ``data.py``, a device returned by
``dist_util.dev()``, an instance of a class whose ``__call__`` runs backward), the
parameters of a function to what its callers pass, and it decides the program-level
facts (autocast anywhere? TF32? which accelerator, from where?).

Every question is answered from summaries alone, memoised, so linking costs a few
dictionary look-ups per question. A module is first analysed against a program that
holds only itself (in parallel with the other modules); the questions it asked are
recorded, and replayed against the whole program: only a module for which some answer
differs is analysed again (:meth:`Program.answers_differ`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from pitstop.lint.astutil import DATAMODULE_LOADERS, LOADERISH_RE
from pitstop.lint.settings import UNKNOWN, Setting
from pitstop.lint.summary import SEP, TUPLE, ClassSummary, FuncSummary, ModuleSummary

ACCEL_PREFIXES = ("cuda", "mps", "xpu", "hpu", "npu", "gpu")
PLACED = "!gpu"  # a loader passed through accelerator.prepare(): batches arrive placed
# Stronger evidence first: a device that is spelled out beats a mere `torch.cuda` use.
ORIGIN_RANK = {"torch.accelerator": 0, "device": 1, "Accelerator()": 2, ".cuda()": 3,
               "argparse": 1, 'init_process_group("nccl")': 3, "torch.cuda": 5,
               "deepspeed.initialize()": 3}
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Sym:
    """A resolved name: a function, a class, a module, or a module-level value."""

    kind: str  # "func" | "class" | "module" | "value"
    module: str
    name: str = ""
    desc: str | None = None  # for values: the descriptor, in the module's own namespace


@dataclass(frozen=True)
class Resolved:
    """What a descriptor stands for, once resolved across the program."""

    kind: str  # loader | batches | model | device | tensor | obj | func | class | str | module
    module: str = ""
    name: str = ""  # loader id, class/function qualname, device kind, tensor kind, string
    line: int = 0  # where it was decided (a device's origin)
    placed: bool = False  # a loader whose batches arrive on the accelerator (accelerate)


@dataclass(frozen=True)
class Origin:
    """Where a program gets an accelerator from. ``certain``: the code puts work there
    unconditionally (`.cuda()`, `device="cuda"`); otherwise it may (`torch.accelerator`
    when one is available, a `--device` option, a device passed in)."""

    path: str
    line: int
    what: str
    certain: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.what})"


def _query(fn: F) -> F:
    """Memoise a question; while the program records, remember the questions the analysis
    asked (not the ones the program asks itself to answer them)."""
    @wraps(fn)
    def wrapper(self: Program, *args: Any) -> Any:
        key = (fn.__name__, *args)
        if self.recording is not None and self._depth == 0:
            self.recording.add(key)
        memo = self._memo
        if key in memo:
            return memo[key]
        memo[key] = None  # recursion guard: a cycle answers "unknown"
        self._depth += 1
        try:
            result = fn(self, *args)
        finally:
            self._depth -= 1
        memo[key] = result
        return result
    return wrapper  # type: ignore[return-value]


class Program:
    """The modules of one lint run, linked."""

    def __init__(self, summaries: Iterable[ModuleSummary], *, roots: Iterable[str] = (),
                 device: str = "auto", record: bool = False) -> None:
        self.modules: dict[str, ModuleSummary] = {}
        for s in summaries:
            self.modules[_norm(s.path)] = s
        self.roots = [_norm(r) for r in roots]
        self.device = device
        self._memo: dict[tuple[Any, ...], Any] = {}  # question -> answer
        self.recording: set[tuple[Any, ...]] | None = set() if record else None
        self._graph: dict[str, set[str]] | None = None
        self._importers: dict[str, set[str]] | None = None
        self._callsites: dict[tuple[str, str], list[tuple[str, str, Any]]] | None = None
        self._settings: dict[str, Setting] | None = None
        self._folders: dict[str, list[str]] | None = None
        self._tops: dict[str, str] = {}
        self._candidates: dict[tuple[str, str, int], list[str]] = {}
        self._resolved: dict[tuple[str, str, int], str | None] = {}
        self._inits: dict[str, list[str]] = {}
        self._starring: set[str] = set()  # modules whose star imports are being searched
        self._depth = 0  # nesting of questions being answered

    def replaced(self, summary: ModuleSummary) -> Program:
        """This program with one module's summary replaced (a file being fixed)."""
        others = [s for k, s in self.modules.items() if k != _norm(summary.path)]
        return Program([*others, summary], roots=self.roots, device=self.device)

    # ------------------------------------------------------------------ modules
    def key(self, path: str) -> str:
        return _norm(path)

    def summary(self, key: str) -> ModuleSummary | None:
        return self.modules.get(key)

    def module_candidates(self, key: str, module: str, level: int) -> list[str]:
        """Files that ``import module`` (``level`` dots) in module ``key`` may mean, best
        first (they need not exist). The list is shared: do not change it."""
        here = os.path.dirname(key)
        memo_key = (here, module, level)
        found = self._candidates.get(memo_key)
        if found is None:
            found = self._candidates[memo_key] = self._candidates_in(here, module, level)
        return found

    def _candidates_in(self, here: str, module: str, level: int) -> list[str]:
        # (asked for every import of every module, with the same few folders and names:
        # memoised per folder, the link pass of a big package does not rebuild the paths)
        rel = module.replace(".", os.sep) if module else ""
        bases: list[str] = []
        if level:
            base = here
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases.append(here)
            top = self._package_top(here)
            if top != here:
                bases.append(top)
            bases.extend(self.roots)
            up = here
            for _ in range(4):
                parent = os.path.dirname(up)
                if parent == up:
                    break
                up = parent
                bases.append(up)
        out = []
        for b in dict.fromkeys(bases):
            target = os.path.join(b, rel) if rel else b
            out.append(target + ".py")
            out.append(os.path.join(target, "__init__.py"))
        return out

    def _package_top(self, folder: str) -> str:
        """The folder above the package holding ``folder`` (``folder`` if none)."""
        memo = self._tops
        if folder in memo:
            return memo[folder]
        top = folder
        while os.path.join(top, "__init__.py") in self.modules or _has_init(top):
            parent = os.path.dirname(top)
            if parent == top:
                break
            top = parent
        memo[folder] = top
        return top

    def resolve_module(self, key: str, module: str, level: int) -> str | None:
        if len(self.modules) == 1:  # a module on its own: only a self-import resolves
            stem = os.path.splitext(os.path.basename(key))[0]
            if (module.rsplit(".", 1)[-1] if module else "") != stem and stem != "__init__":
                return None
        memo_key = (os.path.dirname(key), module, level)
        if memo_key in self._resolved:
            return self._resolved[memo_key]
        found = None
        for cand in self.module_candidates(key, module, level):
            if cand in self.modules:
                found = cand
                break
        self._resolved[memo_key] = found
        return found

    # ------------------------------------------------------------------ names
    @_query
    def lookup(self, key: str, dotted: str) -> Sym | None:
        """What ``dotted`` (as written in module ``key``) names."""
        s = self.modules.get(key)
        if s is None or not dotted:
            return None
        head, _, rest = dotted.partition(".")
        if head in s.classes:
            return self._in_class(key, head, rest) if rest else Sym("class", key, head)
        if head in s.functions and not s.functions[head].is_method:
            return Sym("func", key, head) if not rest else None
        if head in s.globals:
            if not rest:
                return Sym("value", key, head, s.globals[head])
            r = self.resolve(key, s.globals[head])
            if r is not None and r.kind == "obj":
                return self._in_class(r.module, r.name, rest)
            if r is not None and r.kind == "module":  # `d2l = sys.modules[__name__]`
                return self.lookup(r.module, rest)
            return None
        ref = None
        stars = []
        for imp in s.imports:
            if imp.local == head:
                ref = imp
            elif imp.local == "*":
                stars.append(imp)
        if ref is None:
            return self._star_lookup(key, dotted, stars) if stars and head[:1] != "_" else None
        if ref.name is None:
            if ref.local != ref.module.split(".")[0]:  # `import a.b as x`: x is a.b
                mod = self.resolve_module(key, ref.module, 0)
                if mod is None:
                    return None
                return self.lookup(mod, rest) if rest else Sym("module", mod)
            names = [head, *rest.split(".")] if rest else [head]  # `import a.b` binds a
            for i in range(len(names), 0, -1):
                mod = self.resolve_module(key, ".".join(names[:i]), 0)
                if mod is not None:
                    tail = ".".join(names[i:])
                    return self.lookup(mod, tail) if tail else Sym("module", mod)
            return None
        mod = self.resolve_module(key, ref.module, ref.level)
        if mod is not None:
            found = self.lookup(mod, ref.name + (f".{rest}" if rest else ""))
            if found is not None:
                return found
        sub = self.resolve_module(key, f"{ref.module}.{ref.name}" if ref.module else ref.name,
                                  ref.level)
        if sub is not None:
            return self.lookup(sub, rest) if rest else Sym("module", sub)
        if mod is None:  # `from pkg import Name` whose pkg/__init__.py is not in the program
            owner = self.defined_in_package(key, ref.module, ref.level, ref.name)
            if owner is not None:
                return self.lookup(owner, ref.name + (f".{rest}" if rest else ""))
        return None

    def _star_lookup(self, key: str, dotted: str, stars: list[Any]) -> Sym | None:
        """``dotted`` in the modules ``key`` star-imports (`from utils import *`), the
        last import first (a later one shadows an earlier one)."""
        if key in self._starring:
            return None  # star imports in a cycle
        self._starring.add(key)
        try:
            for imp in reversed(stars):
                mod = self.resolve_module(key, imp.module, imp.level)
                if mod is not None and mod != key:
                    found = self.lookup(mod, dotted)
                    if found is not None:
                        return found
            return None
        finally:
            self._starring.discard(key)

    def defined_in_package(self, key: str, module: str, level: int, name: str) -> str | None:
        """The module of the folder ``module`` that defines ``name`` at its top level,
        when the folder's ``__init__.py`` (which would re-export it) is not linted."""
        memo_key = ("defined_in_package", key, module, level, name)
        if memo_key in self._memo:
            return self._memo[memo_key]
        found = None
        folders = {os.path.dirname(c) for c in self.module_candidates(key, module, level)
                   if c.endswith("__init__.py")}
        for k in sorted(self._by_folder().keys() & folders):
            for m in self._by_folder()[k]:
                s = self.modules[m]
                if name in s.classes or name in s.globals or (
                        name in s.functions and not s.functions[name].is_method):
                    found = m
                    break
            if found:
                break
        self._memo[memo_key] = found
        return found

    def _by_folder(self) -> dict[str, list[str]]:
        if self._folders is None:
            folders: dict[str, list[str]] = {}
            for m in sorted(self.modules):
                folders.setdefault(os.path.dirname(m), []).append(m)
            self._folders = folders
        return self._folders

    def _in_class(self, key: str, cls: str, rest: str, depth: int = 0) -> Sym | None:
        s = self.modules.get(key)
        if s is None or depth > 6:
            return None
        attr, _, more = rest.partition(".")
        qn = f"{cls}.{attr}"
        if qn in s.functions and not more:
            return Sym("func", key, qn)
        summary = s.classes.get(cls)
        if summary is None:
            return None
        if attr in summary.attrs:
            if not more:
                return Sym("value", key, qn, summary.attrs[attr])
            r = self.resolve(key, summary.attrs[attr])
            if r is not None and r.kind == "obj":
                return self._in_class(r.module, r.name, more, depth + 1)
            return None
        for base in summary.bases:
            b = self.lookup(key, base)
            if b is not None and b.kind == "class":
                found = self._in_class(b.module, b.name, rest, depth + 1)
                if found is not None:
                    return found
        return None

    def function(self, sym: Sym) -> FuncSummary | None:
        s = self.modules.get(sym.module)
        return s.functions.get(sym.name) if s is not None and sym.kind == "func" else None

    def klass(self, module: str, name: str) -> ClassSummary | None:
        s = self.modules.get(module)
        return s.classes.get(name) if s is not None else None

    # ------------------------------------------------------------------ descriptors
    @_query
    def resolve(self, key: str, desc: str | None) -> Resolved | None:
        """What a descriptor of module ``key`` stands for."""
        if not desc:
            return None
        if desc.endswith(PLACED):
            inner = self.resolve(key, desc[:-len(PLACED)])
            if inner is not None and inner.kind in {"loader", "batches"}:
                return Resolved("loader", inner.module, inner.name, inner.line, placed=True)
            return inner
        kind, _, rest = desc.partition(":")
        if desc.startswith("loader@"):
            return Resolved("loader", key, desc[7:])
        if desc in {"loader", "batches", "model"}:
            return Resolved(desc)
        if kind == "device":
            return Resolved("device", key, rest)
        if desc == "mod:self":
            return Resolved("module", key)
        if desc in {"gpu", "cpu"}:
            return Resolved("tensor", name=desc)
        if kind == "str":
            return Resolved("str", name=rest)
        if desc.startswith(TUPLE):
            return None
        if kind == "setting":
            st = self.setting(rest)
            if st is None:
                return None
            vals = [v.lower() for v in st.values() if isinstance(v, str)]
            if any(v.startswith(ACCEL_PREFIXES) or v == "auto" for v in vals):
                return Resolved("device", st.path, "gpu", st.line)
            if vals and all(v in {"cpu", "meta"} for v in vals):
                return Resolved("device", st.path, "cpu", st.line)
            return None
        if kind == "wrap":
            inner = self.resolve(key, rest)
            return Resolved("batches") if inner is not None and inner.kind in {"loader", "batches"} \
                else None
        if kind in {"call", "obj"}:
            name, _, pos = rest.partition("#")
            sym = self.callee(key, name)
            if sym is None:
                # `data.train_dataloader()` of a DataModule the program does not show
                return Resolved("loader") if kind == "call" and not pos and \
                    name.rsplit(".", 1)[-1] in DATAMODULE_LOADERS else None
            if sym.kind == "class":
                return self._instance(sym.module, sym.name)
            if sym.kind == "func" and kind == "call":
                if pos.isdigit():
                    return self.returns_item(sym.module, sym.name, int(pos))
                return self.returns(sym.module, sym.name)
            return None
        if kind == "attr":
            sym = self.callee(key, desc)
            if sym is not None and sym.kind == "value":
                return self.resolve(sym.module, sym.desc)
            return None
        if kind == "param":
            fq, _, param = rest.rpartition(".")
            return self.param(key, fq, param)
        if kind == "imp":
            sym = self.lookup(key, rest)
            if sym is None:
                return None
            if sym.kind == "value":
                return self.resolve(sym.module, sym.desc)
            if sym.kind in {"func", "class"}:
                return Resolved(sym.kind, sym.module, sym.name)
            return None
        if kind == "global":
            s = self.modules.get(key)
            if s is not None and rest in s.globals:
                return self.resolve(key, s.globals[rest])
            return None
        return None

    def quiet_callee(self, key: str, name: str) -> Sym | None:
        """:meth:`callee`, not recorded: the caller records the decision it takes instead
        (whether the call steps, what it returns)."""
        self._depth += 1
        try:
            return self.callee(key, name)
        finally:
            self._depth -= 1

    def quiet_in_class(self, module: str, cls: str, rest: str) -> Sym | None:
        self._depth += 1
        try:
            return self._in_class(module, cls, rest)
        finally:
            self._depth -= 1

    @_query
    def call_result(self, key: str, name: str) -> Resolved | None:
        """What a call of ``name`` (as module ``key`` spells it) returns: an instance of a
        class of the program, or what a function of the program returns."""
        sym = self.callee(key, name)
        if sym is None:
            return None
        if sym.kind == "class":
            return self._instance(sym.module, sym.name)
        if sym.kind == "func":
            return self.returns(sym.module, sym.name)
        return None

    @_query
    def call_steps(self, key: str, name: str) -> bool:
        """Does a call of ``name`` run backward or an optimizer step?"""
        sym = self.callee(key, name)
        return sym is not None and self.sym_steps(sym)

    @_query
    def hot_callee(self, key: str, name: str) -> Sym | None:
        """:meth:`callee` for a call made once per batch (recorded: a function found in
        another module means its body is walked for findings)."""
        return self.callee(key, name)

    def callee(self, key: str, name: str) -> Sym | None:
        """What a call's callee names: ``f``, ``mod.f``, ``Class.method``, or a descriptor
        with an attribute path (``attr:Trainer.scaler``, ``param:train.scaler.step``)."""
        if ":" not in name:
            return self.lookup(key, name)
        kind, _, rest = name.partition(":")
        if kind == "val":  # a value that is called: a function, or an object's __call__
            r = self.resolve(key, rest)
            if r is None:
                return None
            if r.kind == "obj":
                return self._in_class(r.module, r.name, "__call__")
            if r.kind in {"func", "class"}:
                return Sym(r.kind, r.module, r.name)
            return None
        if kind in {"attr", "param", "global", "imp"}:
            # the value part is the descriptor, the rest (if any) an attribute path
            if kind == "attr":
                cls, _, tail = rest.partition(".")
                attr, _, more = tail.partition(".")
                base = f"attr:{cls}.{attr}"
                s = self.modules.get(key)
                summary = s.classes.get(cls) if s is not None else None
                if summary is not None and attr not in summary.attrs:
                    found = self._in_class(key, cls, tail)
                    if found is not None:
                        return found
                if summary is None:
                    return None
                if not more:
                    return self._in_class(key, cls, attr)
                r = self.resolve(key, base)
            elif kind == "param":
                parts = rest.split(".")
                # param:F.P[.more]: F may itself be "Class.method"
                s = self.modules.get(key)
                for cut in range(len(parts) - 1, 0, -1):
                    fq = ".".join(parts[:cut])
                    if s is not None and fq in s.functions:
                        param, more = parts[cut], ".".join(parts[cut + 1:])
                        r = self.param(key, fq, param)
                        break
                else:
                    return None
                if not more:
                    return Sym("value", key, name, f"param:{fq}.{param}") \
                        if r is not None and r.kind == "obj" else None
            else:
                head, _, more = rest.partition(".")
                r = self.resolve(key, f"{kind}:{head}")
                if not more:
                    return None
            if r is not None and r.kind == "obj" and more:
                return self._in_class(r.module, r.name, more)
            if r is not None and r.kind == "module" and more:
                return self.lookup(r.module, more)
            return None
        if kind in {"call", "obj"}:
            return self.lookup(key, rest.partition("#")[0])
        return None

    @_query
    def trivial_items(self, key: str, desc: str | None, plain: bool = False) -> bool:
        """Is ``desc`` an instance of a Dataset class whose items cost nothing to load
        (``plain``: and are no slices of held data either)?"""
        if not desc or not desc.startswith(("call:", "obj:")):
            return False
        sym = self.callee(key, desc.partition(":")[2].partition("#")[0])
        if sym is None or sym.kind != "class":
            return False
        summary = self.klass(sym.module, sym.name)
        return summary is not None and (summary.plain_items if plain else summary.trivial_items)

    def _instance(self, module: str, cls: str) -> Resolved:
        if self.class_is(module, cls, "module"):
            return Resolved("model", module, cls)
        if self.class_is(module, cls, "loader"):
            return Resolved("loader", module, "")
        if self.class_iterates_batches(module, cls):
            return Resolved("batches", module, cls)
        return Resolved("obj", module, cls)

    @_query
    def returns(self, module: str, qualname: str) -> Resolved | None:
        """What calling a function returns (the most telling of its returns)."""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return None
        if f.is_generator:
            return Resolved("batches") if self.yields_batches(module, qualname) else None
        best: Resolved | None = None
        for d in f.returns:
            r = self.resolve(module, d)
            if r is not None and (best is None or _RANK.get(r.kind, 9) < _RANK.get(best.kind, 9)):
                best = r
        return best

    @_query
    def returns_item(self, module: str, qualname: str, pos: int) -> Resolved | None:
        """Item ``pos`` of the tuple a function returns (`loader, sampler = build(...)`)."""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return None
        best: Resolved | None = None
        for d in f.returns:
            if d.startswith("call:") and "#" not in d:  # `return _build_loader(config)`
                sym = self.callee(module, d[5:])
                if sym is not None and sym.kind == "func":
                    r = self.returns_item(sym.module, sym.name, pos)
                    if r is not None and (best is None or _RANK.get(r.kind, 9) < _RANK.get(best.kind, 9)):
                        best = r
                continue
            if not d.startswith(TUPLE):
                continue
            items = d[len(TUPLE):].split(SEP)
            if pos < len(items) and items[pos]:
                r = self.resolve(module, items[pos])
                if r is not None and (best is None or _RANK.get(r.kind, 9) < _RANK.get(best.kind, 9)):
                    best = r
        return best

    @_query
    def yields_batches(self, module: str, qualname: str) -> bool:
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None or not f.is_generator:
            return False
        for d in f.yields:
            if d == "loader":
                return True
            r = self.resolve(module, d)
            if r is not None and r.kind in {"loader", "batches"}:
                return True
            if d.startswith("param:") and LOADERISH_RE.search(d.rsplit(".", 1)[-1]):
                return True
        return False

    @_query
    def class_is(self, module: str, cls: str, what: str) -> bool:
        """Is the class an nn.Module (``what="module"``) or a DataLoader subclass
        (``"loader"``), through its bases across modules?"""
        summary = self.klass(module, cls)
        if summary is None:
            return False
        if what == "module" and summary.is_module:
            return True
        for base in summary.bases:
            tail = base.rsplit(".", 1)[-1]
            if what == "loader" and tail == "DataLoader":
                return True
            if what == "module" and (tail.endswith("Module") or tail in {
                    "PreTrainedModel", "ModelMixin", "LightningModule"}):
                return True
            b = self.lookup(module, base)
            if b is not None and b.kind == "class" and self.class_is(b.module, b.name, what):
                return True
        return False

    @_query
    def class_iterates_batches(self, module: str, cls: str) -> bool:
        """A prefetcher or loader wrapper: iterable, holding a loader."""
        summary = self.klass(module, cls)
        if summary is None or not ({"__iter__", "__next__"} & set(summary.methods)):
            return False
        for key, d in summary.attrs.items():
            r = self.resolve(module, d)
            if r is not None and r.kind in {"loader", "batches"}:
                return True
            if LOADERISH_RE.search(key) and d.startswith("param:"):
                return True
        s = self.modules.get(module)
        if s is not None:
            for m in ("__iter__", "__next__"):
                f = s.functions.get(f"{cls}.{m}")
                if f is not None and any(
                        (r := self.resolve(module, y)) is not None and r.kind in {"loader", "batches"}
                        for y in f.yields):
                    return True
        return False

    # ------------------------------------------------------------------ calls
    def _callsite_index(self) -> dict[tuple[str, str], list[tuple[str, str, Any]]]:
        if self._callsites is None:
            # Resolving callees may ask about parameters, which need this index: while it
            # is built those questions see it partial, so their memoised answers are
            # dropped afterwards.
            index: dict[tuple[str, str], list[tuple[str, str, Any]]] = {}
            self._callsites = index
            for key, s in self.modules.items():
                for site in s.callsites:
                    if site.callee.startswith(("val:param:", "param:")):
                        continue
                    sym = self.callee(key, site.callee)
                    if sym is None:
                        continue
                    target = sym
                    if sym.kind == "class":
                        target = Sym("func", sym.module, f"{sym.name}.__init__")
                    if target.kind != "func":
                        continue
                    index.setdefault((target.module, target.name), []).append((key, site.caller, site))
            self._memo.clear()
        return self._callsites

    @_query
    def param(self, module: str, qualname: str, param: str) -> Resolved | None:
        """What the callers of a function pass for one of its parameters (when they agree)."""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return None
        params = list(f.params)
        if f.is_method and params and params[0] in {"self", "cls"}:
            params = params[1:]
        pos = params.index(param) if param in params else None
        seen: list[Resolved | None] = []
        for caller_key, _caller, site in self._callsite_index().get((module, qualname), ()):
            d = None
            for k, v in site.kwargs:
                if k == param:
                    d = v
            if d is None and pos is not None and pos < len(site.args):
                d = site.args[pos]
            seen.append(self.resolve(caller_key, d) if d else None)
        found = [r for r in seen if r is not None]
        if not found:
            return None
        if all(r == found[0] for r in found):
            return found[0]
        kinds = {r.kind for r in found}
        if len(kinds) == 1:
            k = kinds.pop()
            if k == "device":
                name = "gpu" if any(r.name == "gpu" for r in found) else (
                    "any" if any(r.name == "any" for r in found) else "cpu")
                first = next((r for r in found if r.name == name), found[0])
                return Resolved("device", first.module, name, first.line)
            return Resolved(k)
        return None

    @_query
    def conv_bias_of(self, key: str, dotted: str) -> tuple[str, int] | None:
        """For a class that wraps one convolution with its bias on (``ConvNorm``): the
        __init__ parameter that turns the bias off, and its position."""
        sym = self.lookup(key, dotted)
        if sym is None or sym.kind != "class":
            return None
        cls = self.klass(sym.module, sym.name)
        return cls.conv_bias if cls is not None else None

    @_query
    def imported(self, module: str) -> bool:
        """Does another module of the program import this one?"""
        return any(module in out for key, out in self.graph().items() if key != module)

    @_query
    def called_in_loop(self, module: str, qualname: str) -> bool:
        """Is the function called inside a loop somewhere in the program (so that a loop
        in it runs more than once: an epoch loop around `train(loader)`)?"""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is not None and f.repeated:
            return True  # an event handler, a step function handed to a framework
        for key, caller, site in self._callsite_index().get((module, qualname), ()):
            if site.in_loop:
                return True
            if caller and caller != qualname and self.called_in_loop(key, caller):
                return True  # called once per call of a function that runs repeatedly
        return False

    @_query
    def steps(self, module: str, qualname: str) -> bool:
        """Does calling the function run backward or an optimizer step (outside any loop
        of its own), directly or through what it calls?"""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return False
        if f.marks:
            return True
        for c in f.callees:
            sym = self.callee(module, c)
            if sym is not None and self.sym_steps(sym):
                return True
        return False

    def sym_steps(self, sym: Sym) -> bool:
        """Does calling ``sym`` step: a stepping function, or an object whose
        ``__call__`` steps."""
        if sym.kind == "func":
            return self.steps(sym.module, sym.name)
        if sym.kind == "value":
            r = self.resolve(sym.module, sym.desc)
            if r is not None and r.kind == "obj":
                call = self._in_class(r.module, r.name, "__call__")
                return call is not None and call.kind == "func" and self.steps(call.module, call.name)
        return False

    @_query
    def loader_pins(self, module: str, loader_id: str) -> bool:
        """Does the DataLoader built at ``loader_id`` of ``module`` pin memory on every
        path a GPU run takes?"""
        s = self.modules.get(module)
        lo = s.loaders.get(loader_id) if s is not None else None
        if lo is None or not lo.pins:
            return False
        for p in lo.pins:
            if p == "true":
                continue
            if p.startswith("setting:"):
                st = self.setting(p[8:])
                if st is not None and st.default is not UNKNOWN and st.default:
                    continue
            return False
        return True

    # ------------------------------------------------------------------ settings
    def _all_settings(self) -> dict[str, Setting]:
        if self._settings is None:
            merged: dict[str, Setting] = {}
            for s in self.modules.values():
                for name, st in s.settings.items():
                    old = merged.get(name)
                    if old is None or (old.default is UNKNOWN and st.default is not UNKNOWN):
                        merged[name] = st
            self._settings = merged
        return self._settings

    @_query
    def setting(self, name: str) -> Setting | None:
        """The command-line option or config field ``name`` of the program."""
        return self._all_settings().get(name)

    # ------------------------------------------------------------------ the program's reach
    def graph(self) -> dict[str, set[str]]:
        """module -> the modules of the program it imports (package __init__ files count)."""
        if self._graph is None:
            graph: dict[str, set[str]] = {}
            for key, s in self.modules.items():
                out: set[str] = set()
                for imp in s.imports:
                    mod = self.resolve_module(key, imp.module, imp.level) if (
                        imp.module or imp.level) else None
                    if mod is not None:
                        out.add(mod)
                    elif imp.name:
                        owner = self.defined_in_package(key, imp.module, imp.level, imp.name)
                        if owner is not None:
                            out.add(owner)
                    if imp.name:
                        sub = self.resolve_module(
                            key, f"{imp.module}.{imp.name}" if imp.module else imp.name, imp.level)
                        if sub is not None:
                            out.add(sub)
                # importing pkg.sub.mod runs pkg/__init__.py and pkg/sub/__init__.py
                for target in list(out):
                    out.update(self._package_inits(os.path.dirname(target)))
                out.discard(key)
                graph[key] = out
            self._graph = graph
        return self._graph

    def _package_inits(self, folder: str) -> list[str]:
        """The ``__init__.py`` modules of the program from ``folder`` up, while there are."""
        found = self._inits.get(folder)
        if found is None:
            found = []
            d = folder
            while os.path.join(d, "__init__.py") in self.modules:
                found.append(os.path.join(d, "__init__.py"))
                parent = os.path.dirname(d)
                if parent == d:
                    break
                d = parent
            self._inits[folder] = found
        return found

    def _closure(self, key: str) -> set[str]:
        memo_key = ("closure", key)
        if memo_key in self._memo:
            return self._memo[memo_key]
        graph = self.graph()
        seen = {key}
        todo = [key]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        self._memo[memo_key] = seen
        return seen

    def program_of(self, key: str) -> set[str]:
        """The modules that run together with ``key``: for every entry point (a module no
        other module imports) whose imports reach ``key``, everything that entry reaches."""
        memo_key = ("program_of", key)
        if memo_key in self._memo:
            return self._memo[memo_key]
        if self._importers is None:
            importers: dict[str, set[str]] = {k: set() for k in self.modules}
            for k, outs in self.graph().items():
                for o in outs:
                    importers.setdefault(o, set()).add(k)
            self._importers = importers
        entries: set[str] = set()
        seen = {key}
        todo = [key]
        while todo:
            cur = todo.pop()
            ups = self._importers.get(cur, set())
            if not ups:
                entries.add(cur)
            for u in ups:
                if u not in seen:
                    seen.add(u)
                    todo.append(u)
        if not entries:
            entries = {key}
        # (in a big package most modules share their entry points: the union of the
        # entries' closures is made once per set of entries, not once per module)
        reach_key = ("reach", frozenset(entries))
        reach = self._memo.get(reach_key)
        if reach is None:
            reach = set()
            for e in entries:
                reach |= self._closure(e)
            self._memo[reach_key] = reach
        out = reach | self._reached_dynamically(key)
        self._memo[memo_key] = out
        return out

    def _reached_dynamically(self, key: str) -> set[str]:
        """Model definitions (modules of nn.Module classes, no training of their own) that
        no module of the run imports: something reaches them by name -- a registry,
        `construct_class_by_name("training.networks.Generator")`, a config -- so they run
        with the programs of the run (their layers and precision count)."""
        memo_key = ("dynamic", "")
        if memo_key not in self._memo:
            found: set[str] = set()
            assert self._importers is not None
            for m, s in self.modules.items():
                if self._importers.get(m) or any(f.marks for f in s.functions.values()):
                    continue
                if any(self.class_is(m, c, "module") for c in s.classes):
                    found.add(m)
            self._memo[memo_key] = found
        found = self._memo[memo_key]
        if key in found:
            return set()
        # only next to this program: its folder, or the package it is in
        here = os.path.dirname(key)
        top = self._package_top(here)
        return {m for m in found if os.path.dirname(m) == here or (
            top != here and m.startswith(top + os.sep))}

    def facts(self, key: str) -> set[str]:
        """The program facts of every module that runs with ``key``."""
        out: set[str] = set()
        for m in self.program_of(key):
            s = self.modules.get(m)
            if s is not None:
                out.update(s.facts)
        return out

    @_query
    def device_origin(self, key: str) -> Origin | None:
        """Where the program holding ``key`` gets an accelerator (None: it runs on CPUs
        only, as far as the code says)."""
        if self.device == "cpu":
            return None
        if self.device == "gpu":
            return Origin("--device", 0, "gpu", True)
        own = self._origin_of(key)
        if own is not None:
            return own
        best: Origin | None = None
        for m in sorted(self.program_of(key)):
            o = self._origin_of(m)
            if o is not None and (best is None or _origin_rank(o) < _origin_rank(best)):
                best = o
        return best

    def _origin_of(self, key: str) -> Origin | None:
        memo_key = ("origin_of", key)
        if memo_key in self._memo:
            return self._memo[memo_key]
        found = self._memo[memo_key] = self._origin_in(key)
        return found

    def _origin_in(self, key: str) -> Origin | None:
        s = self.modules.get(key)
        if s is None:
            return None
        best: Origin | None = None
        for line, what in s.gpu_origins:
            spelled = what == ".cuda()" or what.startswith('torch.device("cuda') or (
                ' = "' in what and not what.endswith("if ..."))
            o = Origin(s.path, line, what, certain=spelled and not s.cpu_devices)
            if best is None or _origin_rank(o) < _origin_rank(best):
                best = o
        for st in s.settings.values():
            if _device_setting(st):
                o = Origin(st.path, st.line, f"{st.flag or st.name} can be "
                           f"{_accel_value(st)!r}")
                if best is None or _origin_rank(o) < _origin_rank(best):
                    best = o
        return best

_RANK = {"loader": 0, "batches": 1, "model": 2, "device": 3, "tensor": 4, "obj": 5, "func": 6,
         "class": 7, "str": 8}


_INITS: dict[str, bool] = {}


def _has_init(folder: str) -> bool:
    """Is there a package ``__init__.py`` in ``folder`` (asked once per folder)?"""
    found = _INITS.get(folder)
    if found is None:
        if len(_INITS) > 100_000:
            _INITS.clear()
        found = _INITS[folder] = os.path.exists(os.path.join(folder, "__init__.py"))
    return found


def _norm(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def _origin_rank(o: Origin) -> int:
    what = o.what
    if what.startswith("torch.accelerator"):
        return 0
    if "device(" in what or "=" in what or "can be" in what:
        return 1
    return ORIGIN_RANK.get(what, 4)


def _accel_value(st: Setting) -> object:
    for v in st.values():
        if isinstance(v, str) and v.lower().startswith(ACCEL_PREFIXES):
            return v
    return None


def _device_setting(st: Setting) -> bool:
    name = st.name.lower()
    if "device" not in name and name not in {"accelerator", "gpu", "gpus", "cuda", "backend"}:
        return False
    return _accel_value(st) is not None


def recorded_answers(program: Program) -> dict[tuple[Any, ...], Any]:
    """The questions a (recording) program was asked, with its final answers."""
    if program.recording is None:
        return {}
    questions = list(program.recording)
    return {q: getattr(program, q[0])(*q[1:]) for q in questions}


def answers_differ(full: Program, answers: dict[tuple[Any, ...], Any]) -> bool:
    """Would the whole program answer any of a module's questions differently (in a way
    the analysis acts on)?"""
    for q, local in answers.items():
        name, *args = q
        if _acted_on(name, getattr(full, name)(*args)) != _acted_on(name, local):
            return True
    return False


def _acted_on(question: str, answer: Any) -> Any:
    """The part of an answer the analysis acts on: a name resolved to a function or a
    class changes nothing by itself (what it returns or whether it steps are questions of
    their own), except for a call made once per batch, which is followed into it."""
    if question == "hot_callee":
        return answer
    if isinstance(answer, Sym):
        return None
    if isinstance(answer, Resolved) and answer.kind in {"func", "class", "str"}:
        return None
    return answer
