"""DataLoader rules: LT002 loader-workers, LT003 loader-pin-memory,
LT004 loader-persistent-workers (one check function each)."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import (
    LOADER_WRAPPERS,
    arg_or_kw,
    callee_tail,
    dotted,
    has_star_kwargs,
    iter_shallow,
    kwarg,
    qualname,
    unwrap_iterable,
)
from pitstop.lint.context import LOOPS, ModuleContext
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix

WORKERS = "LT002"
PIN_MEMORY = "LT003"
PERSISTENT = "LT004"


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


def _at(ctx: ModuleContext, call: ast.Call) -> tuple[int, int]:
    return call.func.lineno, ctx.char_column(call.func.lineno, call.func.col_offset)


def check_workers(ctx: ModuleContext) -> None:
    for call in dataloader_calls(ctx):
        nw = arg_or_kw(call, 5, "num_workers")
        if nw is None and has_star_kwargs(call):
            continue
        if nw is not None and not (isinstance(nw, ast.Constant) and nw.value == 0
                                   and not isinstance(nw.value, bool)):
            continue
        n = suggested_workers(ctx.cpus, ctx.local_world_size)
        line, col = _at(ctx, call)
        if nw is None:
            edit = Edit("kw_add", line, col, "DataLoader", name="num_workers", value=str(n))
        elif kwarg(call, "num_workers") is not None:
            edit = Edit("kw_set", line, col, "DataLoader", name="num_workers", value=str(n))
        else:
            edit = Edit("arg_set", line, col, "DataLoader", index=5, value=str(n))
        what = "num_workers=0" if nw is not None else "no num_workers (so 0)"
        ctx.report(
            WORKERS, call,
            f"DataLoader built with {what}: every batch is loaded, decoded and collated in the "
            f"training process while the GPU waits. Start with num_workers={n} "
            f"({ctx.cpus} CPUs usable by this process, LOCAL_WORLD_SIZE={ctx.local_world_size}: "
            f"Lightning's conservative bound max(1, cpus // local_world_size - 1)); measure "
            f"the real optimum with `pitstop bench`.",
            fix=Fix(UNSAFE, f"set num_workers={n}", (edit,)),
            evidence=(("num_workers", 0), ("cpus_usable", ctx.cpus),
                      ("local_world_size", ctx.local_world_size), ("suggested", n)),
        )


def check_pin_memory(ctx: ModuleContext) -> None:
    if not (ctx.gpu_program and ctx.moves_batches_to_gpu):
        return
    for call in dataloader_calls(ctx):
        pm = arg_or_kw(call, 7, "pin_memory")
        line, col = _at(ctx, call)
        if pm is None:
            if has_star_kwargs(call):
                continue
            fix = Fix(SAFE, "add pin_memory=True",
                      (Edit("kw_add", line, col, "DataLoader", name="pin_memory", value="True"),))
        elif isinstance(pm, ast.Constant) and pm.value is False and kwarg(call, "pin_memory"):
            fix = Fix(UNSAFE, "set pin_memory=True",
                      (Edit("kw_set", line, col, "DataLoader", name="pin_memory", value="True"),))
        else:
            continue
        ctx.report(
            PIN_MEMORY, call,
            "DataLoader feeds batches that this file copies to the GPU, but does not pin them: "
            "each copy from pageable memory goes through a staging buffer and cannot overlap "
            "with compute. Add `pin_memory=True`.",
            fix=fix,
        )


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


def iterated_for_epochs(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the loader built by ``call`` iterated more than once (inside an outer loop)?"""
    name = _loader_name(ctx, call)
    if name is not None:
        loops = [loop for loop in ctx.loops if isinstance(loop, (ast.For, ast.AsyncFor))
                 and any(dotted(i) == name for i in unwrap_iterable(loop.iter))]
        passes = [c for c in ctx.calls if c is not call and not is_dataloader(ctx, c)
                  and callee_tail(c) not in LOADER_WRAPPERS
                  and any(dotted(a) == name for a in c.args)]
        if loops or passes:  # used by name in this file: trust what the uses say
            return any(_repeated(ctx, n) for n in [*loops, *passes])
    # Built in a helper and returned, or used elsewhere: is there an epoch loop here?
    for loop in ctx.loops:
        for node in iter_shallow(loop.body, into_loops=True):  # type: ignore[attr-defined]
            if isinstance(node, (ast.For, ast.AsyncFor)) and ctx.is_loaderish(node.iter):
                return True
    return False


def check_persistent(ctx: ModuleContext) -> None:
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
        if not iterated_for_epochs(ctx, call):
            continue
        line, col = _at(ctx, call)
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
            PERSISTENT, call,
            f"DataLoader with num_workers={ctx.segment(nw)} is iterated for several epochs "
            "without persistent_workers=True: its worker processes are killed and re-spawned "
            "(re-importing, re-opening files, re-building the dataset) at the start of every "
            "epoch.",
            fix=fix,
        )
