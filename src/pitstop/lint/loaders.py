"""The loader model: which calls build a DataLoader, and what its keyword arguments are.

A DataLoader's settings are often not written at the call: ``DataLoader(ds, **kwargs)``
with ``kwargs = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}``, a dict
built with ``.update()`` or ``kw["num_workers"] = 4``, merged with ``{**a, **b}`` or
``a | b``, returned by a factory function, or ``num_workers=args.workers`` whose argparse
default is 0. :func:`loader_arg` follows all of these and returns every value the
argument can have (one per path through the code), so that a rule can say "0 on every
path" or "may be 0".

Paths under a condition that names the accelerator (``if use_cuda:``, ``if
torch.cuda.is_available()``, ``if args.device == "cuda"``) are tagged: in a program that
runs on a GPU, the GPU paths are the ones that count.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from pitstop.lint.astutil import ITERATION_METHODS, callee_tail, dotted, kwarg, last_name, qualname
from pitstop.lint.index import FUNCS, LOOPS, FuncDef, ModuleIndex

ABSENT = "absent"  # the argument is not passed on this path (the DataLoader default)
UNRESOLVED = "unresolved"  # it may come from something the analysis cannot read
MAX_ALTERNATIVES = 8
GPU_TEST_RE = re.compile(r"cuda|gpu|accel|device|use_cuda|is_available|mps|xpu", re.IGNORECASE)
CPU_TEST_RE = re.compile(r"cpu", re.IGNORECASE)
POSITIONS = {"batch_size": 1, "shuffle": 2, "sampler": 3, "batch_sampler": 4, "num_workers": 5,
             "collate_fn": 6, "pin_memory": 7, "drop_last": 8, "timeout": 9,
             "worker_init_fn": 10}

Value = ast.expr | str  # an expression, ABSENT or UNRESOLVED


# Drop-in replacements that take DataLoader's arguments and build one: torchdata's
# StatefulDataLoader, webdataset's WebLoader, PyG's loaders, ignite's auto_dataloader
# (which sets pin_memory itself on CUDA).
DROP_INS = frozenset({"StatefulDataLoader", "WebLoader", "NeighborLoader", "LinkNeighborLoader",
                      "auto_dataloader", "DataListLoader", "DenseDataLoader"})
PINS_ITSELF = frozenset({"auto_dataloader"})


def is_dataloader(index: ModuleIndex, call: ast.Call) -> bool:
    tail = callee_tail(call)
    if tail in DROP_INS:
        return tail not in index.classes and tail not in index.functions
    if tail != "DataLoader" and "Loader" in tail:
        return loader_subclass(index, call) is not None
    if tail != "DataLoader" or "DataLoader" in index.classes:
        return isinstance(call.func, ast.Name) and loader_alias(index, call) is not None
    qn = qualname(call.func, index.aliases) or ""
    if qn == "DataLoader" or (("torch" in qn or "geometric" in qn) and qn.endswith(".DataLoader")):
        return True
    # `from preprocess import DataLoader`: a module of the program re-exporting torch's
    return qn.endswith(".DataLoader") and "torch" in index.aliases.values() and \
        not qn.startswith(OTHER_FRAMEWORKS)


# Frameworks with a DataLoader of their own (not torch's)
OTHER_FRAMEWORKS = ("paddle", "mxnet", "tensorflow", "keras", "jax", "flax", "oneflow",
                    "mindspore", "megengine", "tf.")


def loader_subclass(index: ModuleIndex, call: ast.Call) -> str | None:
    """``AudioDataLoader(ds, batch_size=1, num_workers=4)``: a class of the program named
    like a loader that subclasses DataLoader and hands it its arguments. "plain" when this
    module defines it without an iteration of its own; "custom" when it iterates its own
    way (it may keep its workers); "imported" when another module defines it (the rules
    ask the program)."""
    tail = callee_tail(call)
    if tail == "DataLoader" or "Loader" not in tail or not tail[:1].isupper() \
            or tail in DROP_INS or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    cls = index.classes.get(tail)
    if cls is not None:
        if not any((last_name(b) or "").endswith("DataLoader") for b in cls.bases):
            return None
        own = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return "custom" if own & ITERATION_METHODS else "plain"
    qn = qualname(call.func, index.aliases) or ""
    if tail in index.functions or qn.startswith(("torch.", "torchdata.")) or qn == tail:
        return None
    return "imported"


def loader_alias(index: ModuleIndex, call: ast.Call) -> str | None:
    """``loader = torch.utils.data.DataLoader if image_weights else InfiniteDataLoader``
    then ``loader(dataset, ...)``: "plain" if it is always torch's DataLoader, "custom"
    when it may be a subclass with its own iteration (it may keep its workers)."""
    if not isinstance(call.func, ast.Name):
        return None
    memo: dict[int, str | None] = index.__dict__.setdefault("_aliases_memo", {})
    if id(call) in memo:
        return memo[id(call)]
    found = None
    for a in index.scoped_assigns.get((index.owner.get(call), call.func.id), ()):
        v = a.value
        if v is None:
            continue
        branches = [v.body, v.orelse] if isinstance(v, ast.IfExp) else [v]
        tails = [(dotted(b) or "").rsplit(".", 1)[-1] for b in branches]
        if all(tails) and "DataLoader" in tails:
            found = "custom" if any(t != "DataLoader" for t in tails) else "plain"
    memo[id(call)] = found
    return found


def dataloader_calls(index: ModuleIndex) -> list[ast.Call]:
    cached: list[ast.Call] | None = getattr(index, "_dataloaders", None)
    if cached is None:
        tails = {"DataLoader", *DROP_INS, *(t for t in index.calls_by_tail if "Loader" in t)}
        aliases = {n for (_, n), assigns in index.scoped_assigns.items() if "." not in n
                   and any("DataLoader" in ast.unparse(a.value) for a in assigns
                           if isinstance(a.value, (ast.IfExp, ast.Attribute, ast.Name)))}
        cached = [c for t in sorted(tails | aliases)
                  for c in index.calls_by_tail.get(t, ()) if is_dataloader(index, c)]
        cached.sort(key=lambda c: (c.lineno, c.col_offset))
        index._dataloaders = cached  # type: ignore[attr-defined]
    return cached


def _dataset_arg(call: ast.Call) -> ast.expr | None:
    ds = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg in {"dataset", "data"}), None)
    if isinstance(ds, ast.Call) and callee_tail(ds) in {"copy", "deepcopy"} and ds.args:
        ds = ds.args[0]
    return ds


def dataset_on_device(index: ModuleIndex, call: ast.Call) -> bool:
    """Is the loader's data already on the device (a PyG graph moved with `.to(device)`
    before sampling): nothing left to pin."""
    ds = _dataset_arg(call)
    if ds is None:  # NeighborLoader(**kwargs) with kwargs = dict(data=data, ...)
        vals = loader_arg(index, call, "data", gpu=True)
        ds = next((v for v in vals if isinstance(v, ast.expr)), None)
    if not isinstance(ds, ast.Name):
        return False
    scope = index.owner.get(call)
    for a in index.scoped_assigns.get((scope, ds.id), ()):
        v = a.value
        if isinstance(v, ast.Call) and callee_tail(v) in {"to", "cuda"}:
            return True
    return False


def dataset_arg(call: ast.Call) -> ast.expr | None:
    """The dataset a DataLoader call reads (first argument or ``dataset=``)."""
    return _dataset_arg(call)


def whole_split_batch(call: ast.Call) -> bool:
    """`DataLoader(dev_dataset, batch_size=len(dev_dataset))`: one batch holds the whole
    split, so a pass is a single load and a single copy (workers and pinned memory have
    nothing to overlap with)."""
    ds = _dataset_arg(call)
    size = kwarg(call, "batch_size")
    value = size.value if size is not None else (call.args[1] if len(call.args) > 1 else None)
    return ds is not None and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
        and value.func.id == "len" and len(value.args) == 1 \
        and ast.dump(value.args[0]) == ast.dump(ds)


def in_memory_dataset(index: ModuleIndex, call: ast.Call) -> bool:
    """Does the loader read a TensorDataset (tensors already in memory: workers only add
    inter-process copies, and there is nothing to decode)?"""
    ds = _dataset_arg(call)
    if isinstance(ds, ast.Call):
        return callee_tail(ds) == "TensorDataset"
    if isinstance(ds, ast.Name):
        scope = index.owner.get(call)
        for a in index.scoped_assigns.get((scope, ds.id), ()):
            if isinstance(a.value, ast.Call) and callee_tail(a.value) == "TensorDataset":
                return True
    return False


def loader_id(call: ast.Call) -> str:
    """A DataLoader call's identity inside its module: ``line:column`` of its callee."""
    return f"{call.func.lineno}:{call.func.col_offset}"


@dataclass
class _Alt:
    """One possible value of a kwargs dict along one path: key -> expression."""

    keys: dict[str, ast.expr]
    tag: str | None = None  # "gpu" / "cpu": the path is taken on that device only
    open: bool = False  # may hold keys the analysis cannot see


def _test_tag(test: ast.expr) -> str | None:
    """"gpu" when a condition holds on the accelerator path (``use_cuda``, ``args.cuda``,
    ``device == "cuda"``), "cpu" for its negation."""
    neg = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if neg else test  # type: ignore[attr-defined]
    text = ast.unparse(inner)
    if isinstance(inner, ast.Compare) and len(inner.ops) == 1:
        right = inner.comparators[0]
        if isinstance(right, ast.Constant) and isinstance(right.value, str):
            is_gpu = right.value.startswith(("cuda", "gpu", "mps", "xpu"))
            is_cpu = right.value == "cpu"
            if isinstance(inner.ops[0], ast.NotEq):
                is_gpu, is_cpu = is_cpu, is_gpu
            if is_gpu:
                return "cpu" if neg else "gpu"
            if is_cpu:
                return "gpu" if neg else "cpu"
    if GPU_TEST_RE.search(text) and not CPU_TEST_RE.search(text):
        return "cpu" if neg else "gpu"
    return None


class KwargsResolver:
    """Possible contents of a ``**kwargs`` dict, following assignments and updates in the
    function (or module body) where the call is."""

    def __init__(self, index: ModuleIndex,
                 factory: Callable[[ast.Call], list[_Alt] | None] | None = None) -> None:
        self.index = index
        self.factory = factory  # resolves `**make_kwargs(...)` through the program

    def alternatives(self, expr: ast.expr, scope: FuncDef | None, before: int,
                     depth: int = 0) -> list[_Alt]:
        if depth > 4:
            return [_Alt({}, open=True)]
        if isinstance(expr, ast.Dict):
            return self._dict_literal(expr, scope, before, depth)
        if isinstance(expr, ast.Call):
            tail = callee_tail(expr)
            if tail == "dict" and isinstance(expr.func, ast.Name):
                alt = _Alt({k.arg: k.value for k in expr.keywords if k.arg})
                alts = [alt]
                for k in expr.keywords:
                    if k.arg is None:
                        alts = self._merge(alts, self.alternatives(k.value, scope, before, depth + 1))
                if expr.args:
                    alts = self._merge(self.alternatives(expr.args[0], scope, before, depth + 1), alts)
                return alts
            if tail == "copy" and isinstance(expr.func, ast.Attribute):
                return self.alternatives(expr.func.value, scope, before, depth + 1)
            local = self.index.module_function(tail) if isinstance(expr.func, ast.Name) else None
            if local is not None:
                return self._returned(local, depth)
            if self.factory is not None:
                got = self.factory(expr)
                if got is not None:
                    return got
            return [_Alt({}, open=True)]
        if isinstance(expr, ast.IfExp):
            tag = _test_tag(expr.test)
            a = self.alternatives(expr.body, scope, before, depth + 1)
            b = self.alternatives(expr.orelse, scope, before, depth + 1)
            if tag is not None:
                other = "cpu" if tag == "gpu" else "gpu"
                a = [_Alt(x.keys, x.tag or tag, x.open) for x in a]
                b = [_Alt(x.keys, x.tag or other, x.open) for x in b]
            return (a + b)[:MAX_ALTERNATIVES]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self._merge(self.alternatives(expr.left, scope, before, depth + 1),
                               self.alternatives(expr.right, scope, before, depth + 1))
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scope, before, depth)
        return [_Alt({}, open=True)]

    def _dict_literal(self, d: ast.Dict, scope: FuncDef | None, before: int,
                      depth: int) -> list[_Alt]:
        alts = [_Alt({})]
        for k, v in zip(d.keys, d.values, strict=True):
            if k is None:  # {**other, ...}
                alts = self._merge(alts, self.alternatives(v, scope, before, depth + 1))
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                for a in alts:
                    a.keys[k.value] = v
            else:
                for a in alts:
                    a.open = True
        return alts

    @staticmethod
    def _merge(left: list[_Alt], right: list[_Alt]) -> list[_Alt]:
        out = []
        for a in left:
            for b in right:
                if a.tag and b.tag and a.tag != b.tag:
                    continue
                out.append(_Alt({**a.keys, **b.keys}, a.tag or b.tag, a.open or b.open))
        return out[:MAX_ALTERNATIVES] or [_Alt({}, open=True)]

    def _returned(self, fn: FuncDef, depth: int) -> list[_Alt]:
        alts: list[_Alt] = []
        for ret in self.index.returns.get(fn, ()):
            if ret.value is not None:
                alts.extend(self.alternatives(ret.value, fn, ret.lineno, depth + 1))
        return alts[:MAX_ALTERNATIVES] or [_Alt({}, open=True)]

    def _conditional(self, node: ast.AST, scope: FuncDef | None) -> ast.If | bool | None:
        """The innermost `if` between ``node`` and its scope (False: inside a loop or try,
        where it may or may not run; None: it always runs)."""
        for anc in self.index.ancestors(node):
            if anc is scope or isinstance(anc, (ast.Module, *FUNCS)):
                return None
            if isinstance(anc, ast.If):
                return anc
            if isinstance(anc, (*LOOPS, ast.Try)):
                return False
        return None

    def _name(self, name: str, scope: FuncDef | None, before: int, depth: int) -> list[_Alt]:
        index = self.index
        events: list[tuple[int, int, ast.AST]] = []
        for a in index.scoped_assigns.get((scope, name), ()):
            if a.lineno <= before:
                events.append((a.lineno, a.col_offset, a))
        for call in index.updates_by_name.get(name, ()):
            if index.owner.get(call) is scope and call.lineno <= before:
                events.append((call.lineno, call.col_offset, call))
        for item in index.item_assigns_by_name.get(name, ()):  # kw["num_workers"] = 4
            if len(item.targets) == 1 and index.owner.get(item) is scope and item.lineno <= before:
                events.append((item.lineno, item.col_offset, item))
        for aug in index.aug_by_name.get(name, ()):  # kw |= {...}
            if index.owner.get(aug) is scope and aug.lineno <= before:
                events.append((aug.lineno, aug.col_offset, aug))
        if not events:
            if scope is not None:  # a module-level dict used inside a function
                args = [a.arg for a in scope.args.args + scope.args.kwonlyargs]
                if name not in args:
                    return self._name(name, None, 10**9, depth + 1)
            return [_Alt({}, open=True)]
        events.sort(key=lambda e: (e[0], e[1]))
        alts: list[_Alt] = []
        for _, _, ev in events:
            cond = self._conditional(ev, scope)
            tag = _test_tag(cond.test) if isinstance(cond, ast.If) else None
            if isinstance(cond, ast.If) and tag is not None and any(
                    ev is n or self.index.inside(ev, n) for n in cond.orelse):
                tag = "cpu" if tag == "gpu" else "gpu"
            new: list[_Alt] | None = None
            if isinstance(ev, (ast.Assign, ast.AnnAssign)):
                tgt = ev.targets[0] if isinstance(ev, ast.Assign) else ev.target
                if isinstance(tgt, ast.Subscript):
                    key = tgt.slice
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        upd = [_Alt({key.value: ev.value})]  # type: ignore[dict-item]
                    else:
                        upd = [_Alt({}, open=True)]
                    alts = self._apply(alts, upd, cond, tag, replace=False)
                    continue
                if ev.value is None:
                    continue
                new = self.alternatives(ev.value, scope, ev.lineno, depth + 1)
                alts = self._apply(alts, new, cond, tag, replace=True)
            elif isinstance(ev, ast.Call):  # kw.update(...)
                upd = [_Alt({k.arg: k.value for k in ev.keywords if k.arg})]
                for k in ev.keywords:
                    if k.arg is None:
                        upd = self._merge(upd, self.alternatives(k.value, scope, ev.lineno, depth + 1))
                for arg in ev.args:
                    upd = self._merge(upd, self.alternatives(arg, scope, ev.lineno, depth + 1))
                alts = self._apply(alts, upd, cond, tag, replace=False)
            elif isinstance(ev, ast.AugAssign) and isinstance(ev.op, ast.BitOr):
                upd = self.alternatives(ev.value, scope, ev.lineno, depth + 1)
                alts = self._apply(alts, upd, cond, tag, replace=False)
        return alts[:MAX_ALTERNATIVES] or [_Alt({}, open=True)]

    def _apply(self, alts: list[_Alt], new: list[_Alt], cond: ast.If | bool | None,
               tag: str | None, *, replace: bool) -> list[_Alt]:
        if tag is not None:
            new = [_Alt(n.keys, n.tag or tag, n.open) for n in new]
        if cond is None:  # always runs
            if replace or not alts:
                return new[:MAX_ALTERNATIVES]
            return self._merge(alts, new)
        # may or may not run: keep the old alternatives (tagged with the other path)
        other = ("cpu" if tag == "gpu" else "gpu") if tag else None
        kept = [_Alt(a.keys, a.tag or other, a.open) for a in alts]
        added = new if (replace or not alts) else self._merge(alts, new)
        return (kept + added)[:MAX_ALTERNATIVES]


def loader_arg(index: ModuleIndex, call: ast.Call, name: str, *, gpu: bool,
               resolver: KwargsResolver | None = None) -> list[Value]:
    """Every value ``name`` can have in this DataLoader call, one per path: an
    expression, ABSENT (not passed) or UNRESOLVED (may come from something unreadable).
    ``gpu``: the program runs on an accelerator, so paths taken only on the CPU drop."""
    kw = kwarg(call, name)
    if kw is not None:
        return [kw.value]
    pos = POSITIONS.get(name)
    if pos is not None and pos < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return [call.args[pos]]
    stars = [k.value for k in call.keywords if k.arg is None]
    if any(isinstance(a, ast.Starred) for a in call.args):
        return [UNRESOLVED]
    if not stars:
        return [ABSENT]
    resolver = resolver or KwargsResolver(index)
    scope = index.owner.get(call)
    alts = [_Alt({})]
    for s in stars:
        alts = KwargsResolver._merge(alts, resolver.alternatives(s, scope, call.lineno))
    wanted = "gpu" if gpu else "cpu"
    chosen = [a for a in alts if a.tag in (None, wanted)] or alts
    out: list[Value] = []
    for a in chosen:
        if name in a.keys:
            v: Value = a.keys[name]
        else:
            v = UNRESOLVED if a.open else ABSENT
        if not any(v is o for o in out):
            out.append(v)
    return out
