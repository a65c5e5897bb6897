"""The program's reach: which modules run together (the import graph, its packages'
``__init__`` files, modules reached by name), the program-level facts of a module, and
where the program gets an accelerator from.

A mixin of :class:`~pitstop.lint.program.Program`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pitstop.lint.program_answers import Origin, query
from pitstop.lint.settings import Setting
from pitstop.lint.summary import ModuleSummary

ACCEL_PREFIXES = ("cuda", "mps", "xpu", "hpu", "npu", "gpu")
# Stronger evidence first: a device that is spelled out beats a mere `torch.cuda` use.
ORIGIN_RANK = {"torch.accelerator": 0, "device": 1, "Accelerator()": 2, ".cuda()": 3,
               "argparse": 1, 'init_process_group("nccl")': 3, "torch.cuda": 5,
               "deepspeed.initialize()": 3}


class ProgramReach:
    """Reach, facts and device origin of a :class:`~pitstop.lint.program.Program`."""

    modules: dict[str, ModuleSummary]
    device: str
    _memo: dict[tuple[Any, ...], Any]
    _graph: dict[str, set[str]] | None
    _importers: dict[str, set[str]] | None
    _inits: dict[str, list[str]]

    if TYPE_CHECKING:  # answered by the other parts of the program
        def resolve_module(self, key: str, module: str, level: int) -> str | None: ...
        def defined_in_package(self, key: str, module: str, level: int,
                               name: str) -> str | None: ...
        def _package_top(self, folder: str) -> str: ...
        def class_is(self, module: str, cls: str, what: str) -> bool: ...

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

    def importers_of(self, key: str) -> set[str]:
        """The modules of the program that import ``key``."""
        if self._importers is None:
            importers: dict[str, set[str]] = {k: set() for k in self.modules}
            for k, outs in self.graph().items():
                for o in outs:
                    importers.setdefault(o, set()).add(k)
            self._importers = importers
        return self._importers.get(key, set())

    @query
    def unreached(self, key: str, name: str) -> bool:
        """Is the top-level class or function ``name`` of the imported module ``key`` run
        by none of the program: no module mentions it (not even in a string or a comment)
        and none looks names up in ``key`` at run time? (A module nobody imports is an
        entry point, or linted on its own: all of it counts.)"""
        if key not in self.modules or not self.importers_of(key):
            return False
        return name not in self._mentioned()[0] and not self._looked_up_by_value(key)

    def _looked_up_by_value(self, key: str) -> bool:
        """Does some module of the run pick names of ``key`` at run time (`getattr(models,
        name)`, a star import then `eval(args.arch)`, `globals()`, `import_module`)?"""
        _mentioned, dynamic, starred = self._mentioned()
        stem = os.path.splitext(os.path.basename(key))[0]
        folder = os.path.basename(os.path.dirname(key))
        return stem in dynamic or folder in dynamic or key in starred \
            or "globals" in dynamic or "import_module" in dynamic

    def _mentioned(self) -> tuple[set[str], set[str], set[str]]:
        """What the program's modules mention, where they look names up by value, and the
        modules they star-import (`from models import *` then `eval(args.arch)`)."""
        found = self._memo.get(("mentioned",))
        if found is None:
            mentioned: set[str] = set()
            dynamic: set[str] = set()
            starred: set[str] = set()
            for key, s in self.modules.items():
                mentioned.update(s.mentions.split())
                dynamic.update(s.dynamic)
                for imp in s.imports:
                    if imp.local == "*":
                        target = self.resolve_module(key, imp.module, imp.level)
                        if target is not None:
                            starred.add(target)
            found = self._memo[("mentioned",)] = (mentioned, dynamic, starred)
        return found

    def program_of(self, key: str) -> set[str]:
        """The modules that run together with ``key``: for every entry point (a module no
        other module imports) whose imports reach ``key``, everything that entry reaches."""
        memo_key = ("program_of", key)
        if memo_key in self._memo:
            return self._memo[memo_key]
        self.importers_of(key)
        assert self._importers is not None
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
        # a model module reached by name (a registry) runs with the programs that reach
        # it so: their entry points are its entry points too
        entries |= {r for e in entries for r in self._dynamic_reachers(e)}
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

    def _dynamic_reachers(self, key: str) -> set[str]:
        """The entry points whose programs reach model module ``key`` by name."""
        memo_key = ("dynamic_reachers", "")
        reachers = self._memo.get(memo_key)
        if reachers is None:
            reachers = {}
            assert self._importers is not None
            for m in self.modules:
                if self._importers.get(m):
                    continue
                for e in self._dynamic_near(m):
                    reachers.setdefault(e, set()).add(m)
            self._memo[memo_key] = reachers
        return reachers.get(key, set())

    def _dynamic_model_modules(self) -> set[str]:
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
        return self._memo[memo_key]

    def _dynamic_near(self, key: str) -> set[str]:
        """The model modules reached by name that run with ``key``'s program: those next
        to it (its folder and the folders below it: `models/` beside the script), or in
        the package it is in."""
        found = self._dynamic_model_modules()
        if key in found:
            return set()
        here = os.path.dirname(key)
        top = self._package_top(here)
        return {m for m in found if m.startswith(here + os.sep) or (
            top != here and m.startswith(top + os.sep))}

    def _reached_dynamically(self, key: str) -> set[str]:
        """Model definitions (modules of nn.Module classes, no training of their own) that
        no module of the run imports: something reaches them by name -- a registry,
        `construct_class_by_name("training.networks.Generator")`,
        `importlib.import_module(args.model)` -- so they and what they import run with the
        programs of the run (their layers and precision count)."""
        # (only next to this program, with what those modules import)
        out: set[str] = set()
        for m in sorted(self._dynamic_near(key)):
            out |= self._closure(m)
        return out

    def facts(self, key: str) -> set[str]:
        """The program facts of every module that runs with ``key``; an architecture fact
        of an imported module counts only where a class or function the program mentions
        holds it (`models.py` defining a conv encoder and an attention model: a program
        that builds the encoder has no attention)."""
        out: set[str] = set()
        for m in self.program_of(key):
            s = self.modules.get(m)
            if s is None:
                continue
            reached = self._arch_reached(m) if s.arch_owners else None
            for fact in s.facts:
                owners = s.arch_owners.get(fact)
                if owners and reached is not None and fact not in out \
                        and not any(o == "" or o in reached for o in owners):
                    continue
                out.add(fact)
        return out

    def _arch_reached(self, key: str) -> set[str] | None:
        """The top-level definitions of imported module ``key`` that the program may run:
        those another module mentions or the module's own statements name, and what those
        name in turn (None: all of them, for an entry point or a module whose names are
        looked up at run time)."""
        memo_key = ("arch_reached", key)
        if memo_key in self._memo:
            return self._memo[memo_key]
        s = self.modules[key]
        reached: set[str] | None = None
        if s.def_refs and self.importers_of(key) and not self._looked_up_by_value(key):
            counts = self._mention_counts()
            own = set(s.mentions.split())
            todo = [n for n in s.def_refs if counts.get(n, 0) - (n in own) > 0]
            todo += list(s.body_refs)
            reached = set()
            while todo:
                n = todo.pop()
                if n not in reached:
                    reached.add(n)
                    todo.extend(s.def_refs.get(n, ()))
        self._memo[memo_key] = reached
        return reached

    def _mention_counts(self) -> dict[str, int]:
        """How many modules of the run mention each name."""
        found = self._memo.get(("mention_counts",))
        if found is None:
            from collections import Counter

            counts: Counter[str] = Counter()
            for s in self.modules.values():
                counts.update(set(s.mentions.split()))
            found = self._memo[("mention_counts",)] = dict(counts)
        return found

    @query
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
