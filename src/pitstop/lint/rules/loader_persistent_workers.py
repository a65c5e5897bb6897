"""LT004 loader-persistent-workers: a DataLoader with workers iterated for several epochs
without persistent_workers=True."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import (
    arg_or_kw,
    callee_tail,
    dotted,
    has_star_kwargs,
    kwarg,
    unwrap_iterable,
)
from pitstop.lint.context import LOOPS, ModuleContext
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import call_position, dataloader_calls, iterated_for_epochs

CODE = "LT004"


def check(ctx: ModuleContext) -> None:
    risky_epoch_state = any(
        callee_tail(c) == "set_epoch" and isinstance(c.func, ast.Attribute)
        and "sampler" not in (dotted(c.func.value) or "").lower() for c in ctx.calls)
    for call in dataloader_calls(ctx):
        nw = arg_or_kw(call, 5, "num_workers")
        if nw is None or (isinstance(nw, ast.Constant) and nw.value == 0):
            continue
        pw = kwarg(call, "persistent_workers")
        if pw is not None and not (isinstance(pw.value, ast.Constant) and pw.value.value is False):
            continue
        if pw is None and has_star_kwargs(call):
            continue
        condition = ""
        if not iterated_for_epochs(ctx, call):
            factory = returning_function(ctx, call)
            if factory is None:
                continue
            # Built and returned here, iterated elsewhere: a finding only if a module of
            # the same package iterates this factory's loader for several epochs.
            condition = f"+{EPOCHS_FACT}{factory}"
        line, col = call_position(ctx, call)
        fix = None
        if pw is not None:
            value = "True" if isinstance(nw, ast.Constant) else f"{ast.unparse(nw)} > 0"
            fix = Fix(UNSAFE, f"set persistent_workers={value}",
                      (Edit("kw_set", line, col, "DataLoader", name="persistent_workers",
                            value=value),))
        elif isinstance(nw, ast.Constant) and isinstance(nw.value, int) and nw.value > 0:
            fix = Fix(UNSAFE if risky_epoch_state else SAFE, "add persistent_workers=True",
                      (Edit("kw_add", line, col, "DataLoader", name="persistent_workers",
                            value="True"),))
        elif isinstance(nw, (ast.Name, ast.Attribute)):
            value = f"{ast.unparse(nw)} > 0"
            fix = Fix(UNSAFE if risky_epoch_state else SAFE,
                      f"add persistent_workers={value}",
                      (Edit("kw_add", line, col, "DataLoader", name="persistent_workers",
                            value=value),))
        ctx.report(
            CODE, call,
            f"DataLoader with num_workers={ctx.segment(nw)} is iterated for several epochs "
            "without persistent_workers=True: its worker processes are killed and re-spawned "
            "(re-importing, re-opening files, re-building the dataset) at the start of every "
            "epoch.",
            fix=fix, condition=condition,
        )
    note_epoch_loops_over_imported_loaders(ctx)


EPOCHS_FACT = "loader_epochs:"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def returning_function(ctx: ModuleContext, call: ast.Call) -> str | None:
    """The module-level function that returns the loader ``call`` builds
    (`return DataLoader(...)`, or `dl = DataLoader(...)` ... `return dl`), else None."""
    fn = ctx.enclosing(call, _FUNCS)
    if fn is None or fn in ctx.class_of or ctx.enclosing(fn, _FUNCS) is not None:
        return None
    parent = ctx.parents.get(call)
    if isinstance(parent, ast.Return):
        return fn.name  # type: ignore[attr-defined]
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) \
                    and node.value.id == name:
                return fn.name  # type: ignore[attr-defined]
    return None


def note_epoch_loops_over_imported_loaders(ctx: ModuleContext) -> None:
    """Facts for the package: which functions defined elsewhere build loaders that this
    module iterates inside an outer loop (`loader = make_loader(...)`, then
    `for epoch ...: for batch in loader:`)."""
    for loop in ctx.loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or ctx.enclosing(loop, LOOPS) is None:
            continue
        scope = ctx.enclosing(loop, _FUNCS)
        for it in unwrap_iterable(loop.iter):
            factory = None
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
                factory = it.func.id
            elif isinstance(it, ast.Name):
                for assign in ctx.assigns:
                    if isinstance(assign.value, ast.Call) and isinstance(
                            assign.value.func, ast.Name) and any(
                            isinstance(t, ast.Name) and t.id == it.id for t in assign.targets) \
                            and ctx.enclosing(assign, _FUNCS) is scope:
                        factory = assign.value.func.id
            if factory and factory not in ctx.functions and factory not in ctx.classes:
                ctx.facts.add(EPOCHS_FACT + factory)
