"""LT004 loader-persistent-workers: a DataLoader with workers iterated for several epochs
without persistent_workers=True."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import arg_or_kw, callee_tail, dotted, has_star_kwargs, kwarg
from pitstop.lint.context import ModuleContext
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
        if not iterated_for_epochs(ctx, call):
            continue
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
            fix=fix,
        )
