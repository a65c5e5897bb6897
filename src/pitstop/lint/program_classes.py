"""Questions about the program's classes: what a class is through its bases across
modules (an nn.Module, a DataLoader or DataParallel subclass), its subclasses'
overrides, whether it iterates batches or wraps a convolution, whether its items cost
nothing to load, and which class a distinctive method belongs to when the receiver
cannot be typed.

A mixin of :class:`~pitstop.lint.program.Program`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitstop.lint.astutil import ITERATION_METHODS, LOADERISH_RE
from pitstop.lint.program_answers import Resolved, Sym, query
from pitstop.lint.summary import ClassSummary, FuncSummary, ModuleSummary

# Method names too common to say which class an unknown object is (torch's own API,
# containers, trainers' conventional entry points).
GENERIC_METHODS = frozenset({
    "step", "zero_grad", "backward", "forward", "update", "train", "eval", "to", "cuda",
    "cpu", "item", "state_dict", "load_state_dict", "parameters", "named_parameters",
    "modules", "children", "apply", "append", "extend", "get", "pop", "reset", "close",
    "save", "load", "log", "run", "sample", "predict", "fit", "add", "clear", "copy",
    "keys", "values", "items", "format", "write", "read", "half", "float", "double",
    "init", "build", "setup", "call", "compute", "evaluate", "test", "validate", "loss",
    "encode", "decode", "act", "learn", "detach", "numpy", "size", "view", "reshape",
    "register_buffer", "register_parameter", "register_forward_hook", "zero_", "requires_grad_",
    # tensor methods: a local tensor's, not a class of the program
    "dim", "numel", "any", "all", "sum", "mean", "max", "min", "norm", "clone",
    "contiguous", "permute", "transpose", "unsqueeze", "squeeze", "expand", "expand_as",
    "repeat", "chunk", "split", "index_select", "masked_fill", "masked_fill_", "fill_",
    "copy_", "add_", "mul_", "type", "type_as", "view_as", "new_zeros", "new_ones",
    "new_tensor", "tolist", "long", "int", "bool", "argmax", "softmax", "topk", "gather",
    "scatter", "flatten", "nonzero", "masked_select", "narrow", "float_", "exp",
})


# methods that hand out the next batch: iteration, or an iterator's own `next()`
_PULLS = ITERATION_METHODS | {"next"}


class ProgramClasses:
    """Class questions of a :class:`~pitstop.lint.program.Program`."""

    modules: dict[str, ModuleSummary]
    _memo: dict[tuple[Any, ...], Any]

    if TYPE_CHECKING:  # answered by the other parts of the program
        def lookup(self, key: str, dotted: str) -> Sym | None: ...
        def callee(self, key: str, name: str) -> Sym | None: ...
        def klass(self, module: str, name: str) -> ClassSummary | None: ...
        def function(self, sym: Sym) -> FuncSummary | None: ...
        def resolve(self, key: str, desc: str | None) -> Resolved | None: ...
        def passed(self, module: str, qualname: str, param: str
                   ) -> list[tuple[str, str | None]]: ...

    @query
    def trivial_items(self, key: str, desc: str | None, plain: bool = False) -> bool:
        """Is ``desc`` an instance of a Dataset class whose items cost nothing to load
        (``plain``: and are no slices of held data either)?"""
        if desc and desc.startswith(("attr:", "param:")):
            # `DataLoader(self.train_dataset)`: what the constructor was handed (a cycle
            # ends in the memo's "unknown")
            return self._trivial_through(key, desc, plain)
        if not desc or not desc.startswith(("call:", "obj:")):
            return False
        sym = self.callee(key, desc.partition(":")[2].partition("#")[0])
        if sym is not None and sym.kind == "func":
            # `processor.create_dataset(features)` that returns a TensorDataset (tensors
            # already in memory) or an instance of such a Dataset class (not ``plain``)
            f = self.function(sym)
            return f is not None and bool(f.returns) and all(
                d.rsplit(":", 1)[-1].partition("#")[0].rsplit(".", 1)[-1] == "TensorDataset"
                or (not plain and self.trivial_items(sym.module, d)) for d in f.returns)
        if sym is None or sym.kind != "class":
            return False
        summary = self.klass(sym.module, sym.name)
        return summary is not None and (summary.plain_items if plain else summary.trivial_items)

    def _trivial_through(self, key: str, desc: str, plain: bool) -> bool:
        """:meth:`trivial_items` of an attribute (its assigned value) or a parameter
        (what every caller passes)."""
        kind, _, rest = desc.partition(":")
        if kind == "attr":
            cls, _, attr = rest.partition(".")
            summary = self.klass(key, cls)
            inner = summary.attrs.get(attr) if summary is not None else None
            return inner is not None and self.trivial_items(key, inner, plain)
        fq, _, param = rest.rpartition(".")
        passed = self.passed(key, fq, param)
        return bool(passed) and all(d is not None and self.trivial_items(k, d, plain)
                                    for k, d in passed)

    @query
    def class_is(self, module: str, cls: str, what: str) -> bool:
        """Is the class an nn.Module (``what="module"``), a DataLoader subclass
        (``"loader"``) or a DataParallel one (``"dataparallel"``), through its bases across
        modules?"""
        summary = self.klass(module, cls)
        if summary is None:
            return False
        if what == "module" and summary.is_module:
            return True
        for base in summary.bases:
            tail = base.rsplit(".", 1)[-1]
            if (what == "loader" and tail == "DataLoader") or (
                    what == "dataparallel" and tail == "DataParallel"):
                return True
            if what == "module" and tail.endswith(("Module", "PreTrainedModel", "ModelMixin")):
                # (`BertPreTrainedModel`: a transformers base of the family)
                return True
            b = self.lookup(module, base)
            if b is not None and b.kind == "class":
                if self.class_is(b.module, b.name, what):
                    return True
            elif what == "loader" and self._imports_torch_loader(module, base):
                return True  # `from torch.utils.data import DataLoader as TorchDataLoader`
        return False

    def _imports_torch_loader(self, module: str, local: str) -> bool:
        """Is ``local`` torch's DataLoader imported under another name in ``module``?"""
        s = self.modules.get(module)
        return s is not None and any(
            ref.local == local and ref.name == "DataLoader" and ref.module.startswith("torch")
            for ref in s.imports)

    @query
    def names_class(self, key: str, dotted: str, what: str) -> bool:
        """Does ``dotted`` in module ``key`` name a class that :meth:`class_is` ``what``?
        (One question with a yes/no answer: a name merely resolved changes no finding, so
        the second look would not ask again.)"""
        sym = self.lookup(key, dotted)
        return sym is not None and sym.kind == "class" and self.class_is(sym.module, sym.name, what)

    @query
    def names_other_class(self, key: str, dotted: str, what: str) -> bool:
        """Does ``dotted`` name a class of the program that is *not* ``what`` (a
        `class DataLoader(object)` of the project's own)?"""
        sym = self.lookup(key, dotted)
        return sym is not None and sym.kind == "class" and not self.class_is(
            sym.module, sym.name, what)

    @query
    def defines(self, key: str, dotted: str) -> bool:
        """Does ``dotted`` (`Class.method`) resolve in module ``key``, bases included?"""
        return self.lookup(key, dotted) is not None

    @query
    def overrides(self, module: str, cls: str, method: str) -> tuple[tuple[str, str], ...]:
        """(module, "Class.method") of every subclass of ``cls`` in the program (at any
        depth) that defines ``method`` itself."""
        out: list[tuple[str, str]] = []
        parents = {(module, cls)}
        todo = [(module, cls)]
        by_base = self._classes_by_base()
        while todo and len(parents) < 64:  # subclasses of subclasses
            pm, pc = todo.pop()
            for key, name, base in by_base.get(pc, ()):
                if (key, name) in parents:
                    continue
                b = self.lookup(key, base)
                if b is None or b.kind != "class" or (b.module, b.name) != (pm, pc):
                    continue
                parents.add((key, name))
                todo.append((key, name))
                if method in self.modules[key].classes[name].methods:
                    out.append((key, f"{name}.{method}"))
        return tuple(sorted(set(out)))

    def _untyped(self, key: str, name: str) -> bool:
        """Is ``name`` (in module ``key``) something the program model cannot type: not a
        module, class or function, and a value whose descriptor resolves to nothing?"""
        sym = self.lookup(key, name)
        if sym is None:  # (an import of a library, `torch.cat`, is typed: not ours)
            s = self.modules.get(key)
            return s is not None and not any(i.local == name for i in s.imports)
        # (`writer = SummaryWriter(...)`: an instance of a library class is typed too)
        return sym.kind == "value" and "imp:" not in (sym.desc or "") \
            and self.resolve(sym.module, sym.desc) is None

    def _duck_method(self, method: str) -> Sym | None:
        """`model.train_a_batch(x, y)` on an object the program model cannot type (a
        parameter whose callers the run does not show, a factory's result): the one class
        of the program that defines a method of that distinctive name (of a base and its
        one override, the override)."""
        if method in GENERIC_METHODS or method.startswith("__"):
            return None
        by_name = self._memo.get(("methods_by_name",))
        if by_name is None:
            by_name = {}
            for key, s in self.modules.items():
                for name, summary in s.classes.items():
                    for m in summary.methods:
                        by_name.setdefault(m, []).append((key, name))
            self._memo[("methods_by_name",)] = by_name
        owners = by_name.get(method, [])
        if len(owners) > 1:  # a base's method and its one override: the override runs
            bases = {(k, c) for k, c in owners if self.overrides(k, c, method)}
            owners = [o for o in owners if o not in bases]
        if len(owners) != 1:
            return None
        key, cls = owners[0]
        return Sym("func", key, f"{cls}.{method}")

    def _classes_by_base(self) -> dict[str, list[tuple[str, str, str]]]:
        """Last name of a base -> (module, class, base as written) of the classes on it."""
        found = self._memo.get(("classes_by_base",))
        if found is None:
            found = {}
            for key, s in self.modules.items():
                for name, summary in s.classes.items():
                    for base in summary.bases:
                        found.setdefault(base.rsplit(".", 1)[-1], []).append((key, name, base))
            self._memo[("classes_by_base",)] = found
        return found

    @query
    def loader_class(self, key: str, dotted: str) -> str | None:
        """What ``dotted`` names in module ``key``, when it is a DataLoader subclass of the
        program: "plain", or "custom" when it iterates its own way (``__iter__`` /
        ``__next__``: it may keep its workers)."""
        sym = self.lookup(key, dotted)
        if sym is None or sym.kind != "class" or not self.class_is(sym.module, sym.name, "loader"):
            return None
        summary = self.klass(sym.module, sym.name)
        own = set(summary.methods) if summary is not None else set()
        return "custom" if own & ITERATION_METHODS else "plain"

    @query
    def class_iterates_batches(self, module: str, cls: str) -> bool:
        """A prefetcher or loader wrapper: iterable (or a hand-written iterator with its own
        `next()`, an `IterLoader`), holding a loader."""
        summary = self.klass(module, cls)
        if summary is None or not (_PULLS & set(summary.methods)):
            return False
        for key, d in summary.attrs.items():
            r = self.resolve(module, d)
            if r is not None and r.kind in {"loader", "batches"}:
                return True
            if LOADERISH_RE.search(key) and d.startswith("param:"):
                return True
        s = self.modules.get(module)
        if s is not None:
            for m in sorted(ITERATION_METHODS):
                f = s.functions.get(f"{cls}.{m}")
                if f is not None and any(
                        (r := self.resolve(module, y)) is not None and r.kind in {"loader", "batches"}
                        for y in f.yields):
                    return True
        return False

    @query
    def conv_bias_of(self, key: str, dotted: str) -> tuple[str, int] | None:
        """For a class that wraps one convolution with its bias on (``ConvNorm``): the
        __init__ parameter that turns the bias off, and its position."""
        sym = self.lookup(key, dotted)
        if sym is None or sym.kind != "class":
            return None
        cls = self.klass(sym.module, sym.name)
        return cls.conv_bias if cls is not None else None
