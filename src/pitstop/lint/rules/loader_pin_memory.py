"""LT003 loader-pin-memory: a DataLoader whose batches go to a GPU, without pin_memory=True."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import arg_or_kw, has_star_kwargs, kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import call_position, dataloader_calls

CODE = "LT003"


def check(ctx: ModuleContext) -> None:
    if not (ctx.gpu_program and ctx.moves_batches_to_gpu):
        return
    for call in dataloader_calls(ctx):
        pm = arg_or_kw(call, 7, "pin_memory")
        line, col = call_position(ctx, call)
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
            CODE, call,
            "DataLoader feeds batches that this file copies to the GPU, but does not pin them: "
            "each copy from pageable memory goes through a staging buffer and cannot overlap "
            "with compute. Add `pin_memory=True`.",
            fix=fix,
        )
