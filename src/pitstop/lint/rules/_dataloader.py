"""What the DataLoader rules share: finding DataLoader calls, reading their arguments,
deciding whether a loader is iterated for several epochs."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import (
    LOADER_WRAPPERS,
    arg_or_kw,
    callee_tail,
    dotted,
    iter_shallow,
    qualname,
    unwrap_iterable,
)
from pitstop.lint.context import LOOPS, ModuleContext


def is_dataloader(ctx: ModuleContext, call: ast.Call) -> bool:
    if callee_tail(call) != "DataLoader" or "DataLoader" in ctx.classes:
        return False
    qn = qualname(call.func, ctx.aliases) or ""
    return qn == "DataLoader" or ("torch" in qn and qn.endswith(".DataLoader"))


def dataloader_calls(ctx: ModuleContext) -> list[ast.Call]:
    cached = getattr(ctx, "_dataloaders", None)
    if cached is None:
        cached = [c for c in ctx.calls if is_dataloader(ctx, c)]
        ctx._dataloaders = cached  # type: ignore[attr-defined]
    return cached


def pins_memory(call: ast.Call) -> bool:
    pm = arg_or_kw(call, 7, "pin_memory")
    return isinstance(pm, ast.Constant) and pm.value is True


def suggested_workers(cpus: int, local_world_size: int) -> int:
    """Lightning's conservative bound: leave one core per process for the main loop."""
    return max(1, cpus // max(1, local_world_size) - 1)


def call_position(ctx: ModuleContext, call: ast.Call) -> tuple[int, int]:
    return call.func.lineno, ctx.char_column(call.func.lineno, call.func.col_offset)


def _loader_name(ctx: ModuleContext, call: ast.Call) -> str | None:
    parent = ctx.parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    return None


def _mentions(node: ast.AST, name: str) -> bool:
    return any(dotted(n) == name for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))


def _called_in_loop(ctx: ModuleContext, fn: ast.AST | None) -> bool:
    name = getattr(fn, "name", None)
    return name is not None and any(
        (dotted(c.func) or "").rsplit(".", 1)[-1] == name and ctx.enclosing(c, LOOPS) is not None
        for c in ctx.calls)


def _repeated(ctx: ModuleContext, node: ast.AST) -> bool:
    """Does ``node`` run many times: inside a loop, or in a function called inside one?"""
    if ctx.enclosing(node, LOOPS) is not None:
        return True
    return _called_in_loop(ctx, ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _param_for(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
               name: str) -> str | None:
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
    names = {param}
    for node in iter_shallow(fn.body, into_loops=True):  # `pbar = tqdm(loader)`
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.value, ast.Call) and callee_tail(node.value) in LOADER_WRAPPERS and any(
                dotted(i) in names for i in unwrap_iterable(node.value)):
            target = dotted(node.targets[0])
            if target:
                names.add(target)
    for node in iter_shallow(fn.body, into_loops=True):
        if isinstance(node, (ast.For, ast.AsyncFor)) and any(
                dotted(i) in names for i in unwrap_iterable(node.iter)):
            outer = ctx.enclosing(node, LOOPS)
            if outer is not None and ctx.enclosing(outer, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)) is fn:
                return True
    return False


def _fitted_for_epochs(ctx: ModuleContext, call: ast.Call, name: str | None) -> bool:
    """Is the loader handed to a Lightning-style ``trainer.fit(...)`` of a Trainer that runs
    more than one epoch (``max_epochs`` absent, or not 1)?"""
    for fit in ctx.calls:
        if callee_tail(fit) not in {"fit", "validate"} or not isinstance(fit.func, ast.Attribute):
            continue
        values = [*fit.args, *(k.value for k in fit.keywords)]
        if not any(v is call or (name is not None and dotted(v) == name) for v in values):
            continue
        trainer = dotted(fit.func.value)
        for assign in ctx.assigns:
            if any(dotted(t) == trainer for t in assign.targets) and isinstance(
                    assign.value, ast.Call) and callee_tail(assign.value) == "Trainer":
                epochs = next((k.value for k in assign.value.keywords
                               if k.arg == "max_epochs"), None)
                if callee_tail(fit) == "validate":
                    return False
                return not (isinstance(epochs, ast.Constant) and epochs.value == 1)
    return False


def iterated_for_epochs(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the loader built by ``call`` iterated more than once (inside an outer loop)?"""
    name = _loader_name(ctx, call)
    if _fitted_for_epochs(ctx, call, name):
        return True
    if name is not None:
        loops = [loop for loop in ctx.loops if isinstance(loop, (ast.For, ast.AsyncFor))
                 and any(dotted(i) == name for i in unwrap_iterable(loop.iter))]
        passes = [c for c in ctx.calls if c is not call and not is_dataloader(ctx, c)
                  and callee_tail(c) not in LOADER_WRAPPERS
                  and any(dotted(a) == name for a in c.args)]
        if loops or passes:  # used by name in this file: trust what the uses say
            return any(_repeated(ctx, n) for n in [*loops, *passes]) or any(
                _epochs_inside(ctx, c, name) for c in passes)
    # Built in a helper and returned, or used elsewhere: is there an epoch loop here?
    for loop in ctx.loops:
        for node in iter_shallow(loop.body, into_loops=True):  # type: ignore[attr-defined]
            if isinstance(node, (ast.For, ast.AsyncFor)) and ctx.is_loaderish(node.iter):
                return True
    return False
