"""What the DataLoader rules share: the loader calls of a module, the values of their
arguments on every path (through ``**kwargs``, argparse defaults, factories), and
whether a loader is iterated for several epochs (here, or wherever in the program its
batches are consumed)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from pitstop.lint.astutil import (
    LOADER_WRAPPERS,
    callee_tail,
    dotted,
    is_main_guard,
    iter_shallow,
    unwrap_iterable,
)
from pitstop.lint.context import USE_EPOCHS, ModuleContext
from pitstop.lint.index import FuncDef
from pitstop.lint.loaders import (
    ABSENT,
    UNRESOLVED,
    KwargsResolver,
    Value,
    dataset_arg,
    in_memory_dataset,
    loader_alias,
    loader_arg,
    loader_subclass,
)
from pitstop.lint.loaders import dataloader_calls as _calls
from pitstop.lint.loops import NOT_BATCHES
from pitstop.lint.settings import UNKNOWN, flag_descriptor, option_name

ZERO = "zero"
POSITIVE = "positive"
UNKNOWN_STATE = "unknown"


def dataloader_calls(ctx: ModuleContext) -> list[ast.Call]:
    """The module's DataLoader calls, less those of the self-test that a module the
    program imports runs only when started on its own (`if __name__ == "__main__":`) and
    those in its functions that no module of the program mentions (another entry
    point's `load_data()`)."""
    calls = [c for c in _calls(ctx.index) if (loader_subclass(ctx.index, c) != "imported"
             or ctx.program.loader_class(ctx.key, dotted(c.func) or "") is not None)
             and not _own_class_named_loader(ctx, c) and not ctx.unused_definition(c)]
    if not calls or not ctx.program.imported(ctx.key):
        return calls
    spans = [(s.lineno, s.end_lineno or s.lineno) for s in ctx.index.tree.body
             if is_main_guard(s)]
    return [c for c in calls if not any(a <= c.lineno <= b for a, b in spans)]


def _own_class_named_loader(ctx: ModuleContext, call: ast.Call) -> bool:
    """`from data import DataLoader` where data.py defines a `class DataLoader(object)` of
    its own (not a subclass of torch's): not a torch loader."""
    return callee_tail(call) == "DataLoader" and ctx.program.names_other_class(
        ctx.key, dotted(call.func) or "", "loader")


def iterates_its_own_way(ctx: ModuleContext, call: ast.Call) -> bool:
    """A loader class that may keep its workers across passes: an alias that may be a
    subclass (`loader = DataLoader if a else InfiniteDataLoader`), or a DataLoader subclass
    with an `__iter__`/`__next__` of its own (here or in the module that defines it)."""
    if loader_alias(ctx.index, call) == "custom":
        return True
    sub = loader_subclass(ctx.index, call)
    if sub == "custom":
        return True
    if sub == "imported":
        return ctx.program.loader_class(ctx.key, dotted(call.func) or "") != "plain"
    return False


def arg_values(ctx: ModuleContext, call: ast.Call, name: str) -> list[Value]:
    """Every value of a DataLoader argument, one per path (see :func:`loader_arg`)."""
    resolver = getattr(ctx, "_kwargs_resolver", None)
    if resolver is None:
        resolver = KwargsResolver(ctx.index)
        ctx._kwargs_resolver = resolver  # type: ignore[attr-defined]
    return loader_arg(ctx.index, call, name, gpu=ctx.gpu_program, resolver=resolver)


@dataclass(frozen=True)
class Judged:
    state: str  # ZERO / POSITIVE / UNKNOWN_STATE (or, for flags, "true"/"false"/...)
    why: str  # how the value was found, for the message
    where: str = ""  # file:line of a default that decided it


def number_state(ctx: ModuleContext, v: Value, scope: FuncDef | None) -> Judged:
    """num_workers on one path: 0, above 0, or unknown -- with how it was found."""
    if v == ABSENT:
        return Judged(ZERO, "absent")
    if isinstance(v, str):
        return Judged(UNKNOWN_STATE, "unresolved")
    if isinstance(v, ast.Constant):
        if isinstance(v.value, int) and not isinstance(v.value, bool):
            return Judged(ZERO if v.value == 0 else POSITIVE, f"{v.value}")
        return Judged(UNKNOWN_STATE, "literal")
    option = option_name(v)
    if option is not None:
        st = ctx.program.setting(option)
        if st is not None and isinstance(st.default, int) and not isinstance(st.default, bool):
            return Judged(ZERO if st.default == 0 else POSITIVE,
                          f"`{ast.unparse(v)}`, whose default is {st.default}", st.where)
        return Judged(UNKNOWN_STATE, "option")
    if isinstance(v, ast.Name):
        assigns = ctx.index.scoped_assigns.get((scope, v.id)) or \
            ctx.index.scoped_assigns.get((None, v.id))
        if assigns and len(assigns) == 1 and isinstance(assigns[0].value, ast.Constant):
            inner = number_state(ctx, assigns[0].value, scope)
            return Judged(inner.state, f"`{v.id}` = {inner.why}")
        return Judged(UNKNOWN_STATE, "name")
    if isinstance(v, ast.IfExp):
        from pitstop.lint.loaders import _test_tag

        a, b = number_state(ctx, v.body, scope), number_state(ctx, v.orelse, scope)
        tag = _test_tag(v.test)
        if tag is not None:
            chosen = a if (tag == "gpu") == ctx.gpu_program else b
            return chosen
        return a if a.state == b.state else Judged(UNKNOWN_STATE, "conditional")
    return Judged(UNKNOWN_STATE, "expression")


def flag_state(ctx: ModuleContext, v: Value) -> str:
    """pin_memory / persistent_workers on one path: "true", "false" (incl. absent) or
    "unknown"."""
    if v == ABSENT:
        return "false"
    if v == UNRESOLVED or isinstance(v, str):
        return "unknown"
    d = flag_descriptor(v)
    if d.startswith("setting:"):
        st = ctx.program.setting(d[8:])
        if st is not None and st.default is not UNKNOWN:
            return "true" if st.default else "false"
        return "unknown"
    if d == "gpu":  # `pin_memory=torch.cuda.is_available()`, `=(device != "cpu")`
        return "true" if ctx.gpu_program else "false"
    return d


def suggested_workers(cpus: int, local_world_size: int) -> int:
    """Lightning's conservative bound: leave one core per process for the main loop."""
    return max(1, cpus // max(1, local_world_size) - 1)


def call_position(ctx: ModuleContext, call: ast.Call) -> tuple[int, int]:
    return call.func.lineno, ctx.char_column(call.func.lineno, call.func.col_offset)


def cheap_items(ctx: ModuleContext, call: ast.Call, plain: bool = False) -> bool:
    """The loader's data costs nothing to load: a TensorDataset (already tensors in
    memory) or a Dataset whose __getitem__ calls nothing (``plain``: nor indexes
    anything: prompt strings, indices)."""
    if in_memory_dataset(ctx.index, call):
        return True
    ds = dataset_arg(call)
    if ds is None:
        return False
    d = ctx.describer.describe(ds, ctx.index.owner.get(call))
    return ctx.program.trivial_items(ctx.key, d, plain)


def pins_memory(call: ast.Call) -> bool:
    from pitstop.lint.astutil import arg_or_kw

    pm = arg_or_kw(call, 7, "pin_memory")
    return isinstance(pm, ast.Constant) and pm.value is True


def loader_pins(ctx: ModuleContext, call: ast.Call) -> bool:
    """Does this loader pin memory on every path the program runs?"""
    states = {flag_state(ctx, v) for v in arg_values(ctx, call, "pin_memory")}
    return states == {"true"}


# ---------------------------------------------------------------------- epochs
def loader_name(ctx: ModuleContext, call: ast.Call) -> str | None:
    parent = ctx.index.assign_of.get(call)
    if parent is not None and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    return None


def uses_by_name(ctx: ModuleContext) -> tuple[dict[tuple[object, str], list[ast.AST]],
                                               dict[tuple[object, str], list[ast.Call]]]:
    """(scope, name) -> loops iterating that name / calls passing it (built once)."""
    cached = getattr(ctx, "_loader_uses", None)
    if cached is not None:
        return cached
    loops: dict[tuple[object, str], list[ast.AST]] = {}
    passes: dict[tuple[object, str], list[ast.Call]] = {}
    index = ctx.index
    for loop in index.loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            owner = index.owner.get(loop)
            for i in unwrap_iterable(loop.iter):
                n = dotted(i)
                if n:
                    loops.setdefault((owner, n), []).append(loop)
                    loops.setdefault(("*", n), []).append(loop)
    for c in index.calls:
        if callee_tail(c) in LOADER_WRAPPERS or callee_tail(c) in NOT_BATCHES:
            continue  # `len(loader)` reads no batch
        owner = index.owner.get(c)
        for a in c.args:
            n = dotted(a)
            if n:
                passes.setdefault((owner, n), []).append(c)
                passes.setdefault(("*", n), []).append(c)
    ctx._loader_uses = (loops, passes)  # type: ignore[attr-defined]
    return loops, passes


def _only_single_loops(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is every loop around ``call`` (in its function) one that runs once?"""
    loops = [a for a in ctx.index.ancestors(call) if isinstance(a, (ast.For, ast.AsyncFor,
                                                                    ast.While))]
    return bool(loops) and all(ctx.loops.runs_once(lp) for lp in loops)


def _called_in_loop(ctx: ModuleContext, fn: ast.AST | None) -> bool:
    name = getattr(fn, "name", None)
    if name is None:
        return False
    method = fn in ctx.index.class_of
    for c in ctx.index.calls_by_tail.get(name, ()):
        # `train(...)` calls the function, `self.train(...)` the method; `net.train()` is
        # another object's method
        mine = dotted(c.func) == (f"self.{name}" if method else name)
        if mine and c in ctx.index.calls_in_loop and not _only_single_loops(ctx, c):
            return True
    qn = ctx.index.qualname_of(fn)  # type: ignore[arg-type]
    return ctx.program.called_in_loop(ctx.key, qn)


def _repeated(ctx: ModuleContext, node: ast.AST) -> bool:
    """Does ``node`` (a loop or a call) run many times: inside a loop, or in a function
    called inside one?"""
    index = ctx.index
    outer = index.outer_loop.get(node)
    if outer is not None and not ctx.loops.runs_once(outer):
        return True
    if node in index.calls_in_loop and not (isinstance(node, ast.Call) and _only_single_loops(
            ctx, node)):
        return True
    return _called_in_loop(ctx, index.owner.get(node))


def _param_for(fn: FuncDef, call: ast.Call, name: str) -> str | None:
    """The parameter of ``fn`` that receives ``name`` in ``call`` (by position or keyword)."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if params and params[0] in {"self", "cls"} and isinstance(call.func, ast.Attribute):
        params = params[1:]
    for param, arg in zip(params, call.args, strict=False):
        if isinstance(arg, ast.Starred):
            return None
        if dotted(arg) == name:
            return param
    for kw in call.keywords:
        if kw.arg and dotted(kw.value) == name:
            return kw.arg
    return None


def wrapped_names(nodes: Iterable[ast.AST], names: set[str]) -> set[str]:
    """``names`` and those bound, in ``nodes``, to a progress bar or enumerate of one of
    them (`pbar = tqdm(loader)`, `it = enumerate(zip(a, b))`)."""
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.value, ast.Call) and callee_tail(node.value) in LOADER_WRAPPERS and any(
                dotted(i) in names for i in unwrap_iterable(node.value)):
            target = dotted(node.targets[0])
            if target:
                names.add(target)
    return names


def _epochs_inside(ctx: ModuleContext, call: ast.Call, name: str) -> bool:
    """Does the same-module function called by ``call`` iterate the loader it receives as
    ``name`` inside an outer loop (`def train(loader): for epoch...: for b in tqdm(loader)`)?"""
    fns = ctx.functions.get(callee_tail(call)) if isinstance(call.func, (ast.Name, ast.Attribute)) \
        else None
    if not fns or len(fns) != 1:
        return False
    fn = fns[0]
    param = _param_for(fn, call, name)
    if param is None:
        return False
    names = wrapped_names(iter_shallow(fn.body, into_loops=True), {param})
    for node in iter_shallow(fn.body, into_loops=True):
        if isinstance(node, (ast.For, ast.AsyncFor)) and any(
                dotted(i) in names for i in unwrap_iterable(node.iter)) and \
                ctx.index.outer_loop.get(node) is not None and ctx.index.owner.get(node) is fn:
            return True
    return False


def _fitted_for_epochs(ctx: ModuleContext, call: ast.Call, name: str | None) -> bool:
    """Is the loader handed to a Lightning-style ``trainer.fit(...)`` of a Trainer that runs
    more than one epoch (``max_epochs`` absent, or not 1)?"""
    for tail in ("fit", "validate"):
        for fit in ctx.index.calls_by_tail.get(tail, ()):
            if not isinstance(fit.func, ast.Attribute):
                continue
            values = [*fit.args, *(k.value for k in fit.keywords)]
            if not any(v is call or (name is not None and dotted(v) == name) for v in values):
                continue
            trainer = dotted(fit.func.value)
            for assign in ctx.index.assigns_by_name.get(trainer or "", ()):
                if isinstance(assign.value, ast.Call) and callee_tail(assign.value) == "Trainer":
                    epochs = next((k.value for k in assign.value.keywords
                                   if k.arg == "max_epochs"), None)
                    if tail == "validate":
                        return False
                    return not (isinstance(epochs, ast.Constant) and epochs.value == 1)
    return False


def iterated_for_epochs(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the loader built by ``call`` iterated more than once (inside an outer loop), as
    far as this module shows?"""
    name = loader_name(ctx, call)
    if _fitted_for_epochs(ctx, call, name):
        return True
    if name is not None:
        loops_by, passes_by = uses_by_name(ctx)
        owner = ctx.index.owner.get(call)
        scope: object = owner if owner is not None and not name.startswith("self.") else "*"
        loops = loops_by.get((scope, name), [])
        passes = [c for c in passes_by.get((scope, name), []) if c is not call
                  and callee_tail(c) != "DataLoader"]
        if loops or passes:  # used by name in this file: trust what the uses say
            return any(_repeated(ctx, n) for n in [*loops, *passes]) or any(
                _epochs_inside(ctx, c, name) for c in passes)
    return False


def epochs_condition(ctx: ModuleContext, call: ast.Call) -> str:
    """The program fact that says another module iterates this loader for epochs."""
    return f"+{USE_EPOCHS}{ctx.loader_key(call)}"
