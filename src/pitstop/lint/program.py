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
differs is analysed again (:mod:`~pitstop.lint.program_answers`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pitstop.lint.astutil import DATAMODULE_LOADERS, LOADERISH_RE
from pitstop.lint.describe import SEP, TUPLE
from pitstop.lint.program_answers import (
    Origin,
    Resolved,
    Sym,
    answers_differ,
    query,
    recorded_answers,
)
from pitstop.lint.program_calls import ProgramCalls
from pitstop.lint.program_classes import ProgramClasses
from pitstop.lint.program_modules import ProgramModules, norm_path
from pitstop.lint.program_reach import ACCEL_PREFIXES, ProgramReach
from pitstop.lint.settings import UNKNOWN, Setting
from pitstop.lint.summary import (
    ClassSummary,
    FuncSummary,
    LoaderSummary,
    ModuleSummary,
)

__all__ = ["PLACED", "Origin", "Program", "Resolved", "Sym", "answers_differ",
           "recorded_answers"]

PLACED = "!gpu"  # a loader passed through accelerator.prepare(): batches arrive placed


class Program(ProgramModules, ProgramReach, ProgramClasses, ProgramCalls):
    """The modules of one lint run, linked (module resolution in
    :mod:`~pitstop.lint.program_modules`, reach, facts and device origin in
    :mod:`~pitstop.lint.program_reach`, questions about its classes in
    :mod:`~pitstop.lint.program_classes`)."""

    def __init__(self, summaries: Iterable[ModuleSummary], *, roots: Iterable[str] = (),
                 device: str = "auto", record: bool = False) -> None:
        self.modules: dict[str, ModuleSummary] = {}
        for s in summaries:
            self.modules[norm_path(s.path)] = s
        self.roots = [norm_path(r) for r in roots]
        self.device = device
        self._memo: dict[tuple[Any, ...], Any] = {}  # question -> answer
        self.recording: set[tuple[Any, ...]] | None = set() if record else None
        self._graph: dict[str, set[str]] | None = None
        self._importers: dict[str, set[str]] | None = None
        self._callsites: dict[tuple[str, str], list[tuple[str, str, Any]]] | None = None
        self._settings: dict[str, Setting] | None = None
        self._folders: dict[str, list[str]] | None = None
        self._children: dict[str, list[str]] | None = None
        self._names: set[str] | None = None
        self._tops: dict[str, str] = {}
        self._candidates: dict[tuple[str, str, int], list[str]] = {}
        self._resolved: dict[tuple[str, str, int], str | None] = {}
        self._inits: dict[str, list[str]] = {}
        self._starring: set[str] = set()  # modules whose star imports are being searched
        self._depth = 0  # nesting of questions being answered

    def replaced(self, summary: ModuleSummary) -> Program:
        """This program with one module's summary replaced (a file being fixed)."""
        others = [s for k, s in self.modules.items() if k != norm_path(summary.path)]
        return Program([*others, summary], roots=self.roots, device=self.device)

    # ------------------------------------------------------------------ modules

    # ------------------------------------------------------------------ names
    @query
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

    @query
    def star_aliases(self, key: str) -> tuple[tuple[str, str], ...]:
        """Library aliases module ``key`` gets through its star imports of the program's
        modules (`from network import *`, where network star-imports a module that says
        `import torch.nn as nn`): (local name, what it names), as an import would bind it."""
        out: dict[str, str] = {}
        seen = {key}
        todo = [key]
        while todo and len(seen) < 16:
            at = todo.pop()
            s = self.modules.get(at)
            for imp in s.imports if s is not None else ():
                if imp.local != "*":
                    continue
                mod = self.resolve_module(at, imp.module, imp.level)
                if mod is None or mod in seen:
                    continue
                seen.add(mod)
                todo.append(mod)
                t = self.modules.get(mod)
                for ref in t.imports if t is not None else ():
                    if ref.local == "*" or ref.local.startswith("_") or ref.level:
                        continue
                    if self.resolve_module(mod, ref.module, 0) is not None:
                        continue  # a module of the program: the lookup follows it
                    out.setdefault(ref.local, f"{ref.module}.{ref.name}" if ref.name else (
                        ref.module if ref.local != ref.module.split(".")[0] else ref.local))
        return tuple(sorted(out.items()))

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
    @query
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
        if kind == "fn":
            s = self.modules.get(key)
            return Resolved("func", key, rest) if s is not None and rest in s.functions else None
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

    @query
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

    @query
    def call_steps(self, key: str, name: str) -> bool:
        """Does a call of ``name`` run backward or an optimizer step?"""
        sym = self.callee(key, name)
        return sym is not None and self.sym_steps(sym)

    @query
    def hot_callee(self, key: str, name: str) -> Sym | None:
        """:meth:`callee` for a call made once per batch (recorded: a function found in
        another module means its body is walked for findings)."""
        return self.callee(key, name)

    def callee(self, key: str, name: str) -> Sym | None:
        """What a call's callee names: ``f``, ``mod.f``, ``Class.method``, or a descriptor
        with an attribute path (``attr:Trainer.scaler``, ``param:train.scaler.step``)."""
        if ":" not in name:
            found = self.lookup(key, name)
            head, _, method = name.rpartition(".")
            if found is None and head and "." not in head and self._untyped(key, head):
                # `model.feed_data(batch)` with `model = define_Model(opt)` (built by a
                # factory the program model cannot follow)
                return self._duck_method(method)
            return found
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
                    if r is not None and r.kind == "func" and r.name:  # a callback handed in
                        return Sym("func", r.module, r.name)
                    return Sym("value", key, name, f"param:{fq}.{param}") \
                        if r is not None and r.kind == "obj" else None
            else:
                head, _, more = rest.partition(".")
                r = self.resolve(key, f"{kind}:{head}")
                if not more:
                    return None
            if r is not None and r.kind in {"obj", "model"} and r.name and more:
                return self._in_class(r.module, r.name, more)
            if r is None and kind == "param" and more and "." not in more:
                return self._duck_method(more)
            if r is not None and r.kind == "module" and more:
                return self.lookup(r.module, more)
            return None
        if kind in {"call", "obj"}:
            return self.lookup(key, rest.partition("#")[0])
        return None

    def _instance(self, module: str, cls: str) -> Resolved:
        if self.class_is(module, cls, "module"):
            return Resolved("model", module, cls)
        if self.class_is(module, cls, "loader"):
            return Resolved("loader", module, "")
        if self.class_iterates_batches(module, cls):
            return Resolved("batches", module, cls)
        return Resolved("obj", module, cls)

    @query
    def returns(self, module: str, qualname: str) -> Resolved | None:
        """What calling a function returns (the most telling of its returns)."""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return None
        if f.is_generator:
            return Resolved("batches") if self.yields_batches(module, qualname) else None
        found = [r for d in f.returns if (r := self.resolve(module, d)) is not None]
        return min(found, key=_telling, default=None)

    @query
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

    @query
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

    @query
    def imported(self, module: str) -> bool:
        """Does another module of the program import this one?"""
        return any(module in out for key, out in self.graph().items() if key != module)

    @query
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

    @query
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

    @query
    def imports_training(self, key: str) -> bool:
        """Does module ``key`` import, from the program, a function that trains or a model
        whose forward() does (a meta-learner that owns its optimizer)? Then a loop of its
        own may train although its text never steps (asked of modules the first pass only
        skimmed)."""
        s = self.modules.get(key)
        if s is None:
            return False
        for ref in s.imports:
            if ref.local == "*":
                continue
            sym = self.lookup(key, ref.local)
            if sym is None:
                continue
            if sym.kind == "module":  # `import discrete_BCQ` ... `policy.train(buffer)`
                m = self.modules.get(sym.module)
                if m is not None and any(self.steps(sym.module, q) for q in m.functions):
                    return True
                continue
            if sym.kind == "class":
                sym = self._in_class(sym.module, sym.name, "forward") or \
                    self._in_class(sym.module, sym.name, "__call__")
            if sym is not None and sym.kind == "func" and self.steps(sym.module, sym.name):
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

    def _loader(self, module: str, loader_id: str) -> LoaderSummary | None:
        """The DataLoader built at ``loader_id`` (`line:col`) of ``module``."""
        s = self.modules.get(module)
        return s.loaders.get(loader_id) if s is not None else None

    @query
    def loader_one_batch(self, module: str, loader_id: str) -> bool:
        """Is every pass over the DataLoader built at ``loader_id`` of ``module`` a single
        batch of the whole split (`batch_size=len(dataset)`)?"""
        lo = self._loader(module, loader_id)
        return lo is not None and lo.one_batch

    @query
    def loader_pins(self, module: str, loader_id: str) -> bool:
        """Does the DataLoader built at ``loader_id`` of ``module`` pin memory on every
        path a GPU run takes?"""
        lo = self._loader(module, loader_id)
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

    @query
    def setting(self, name: str) -> Setting | None:
        """The command-line option or config field ``name`` of the program."""
        return self._all_settings().get(name)



def _telling(r: Resolved) -> tuple[int, int]:
    """How telling a resolved return is (lower: more): by kind, and among devices an
    accelerator first (`return th.device(f"cuda:{i}")` ... `return th.device("cpu")`: a
    device that some path puts on an accelerator)."""
    return _RANK.get(r.kind, 9), {"gpu": 0, "cpu": 2}.get(r.name, 1) if r.kind == "device" else 0


_RANK = {"loader": 0, "batches": 1, "model": 2, "device": 3, "tensor": 4, "obj": 5, "func": 6,
         "class": 7, "str": 8}
