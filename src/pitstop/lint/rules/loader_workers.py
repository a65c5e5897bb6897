"""LT002 loader-workers: a DataLoader built with num_workers absent or 0."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import arg_or_kw, has_star_kwargs, kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import call_position, dataloader_calls, suggested_workers

CODE = "LT002"


def check(ctx: ModuleContext) -> None:
    for call in dataloader_calls(ctx):
        nw = arg_or_kw(call, 5, "num_workers")
        if nw is None and has_star_kwargs(call):
            continue
        if nw is not None and not (isinstance(nw, ast.Constant) and nw.value == 0
                                   and not isinstance(nw.value, bool)):
            continue
        n = suggested_workers(ctx.cpus, ctx.local_world_size)
        line, col = call_position(ctx, call)
        if nw is None:
            edit = Edit("kw_add", line, col, "DataLoader", name="num_workers", value=str(n))
        elif kwarg(call, "num_workers") is not None:
            edit = Edit("kw_set", line, col, "DataLoader", name="num_workers", value=str(n))
        else:
            edit = Edit("arg_set", line, col, "DataLoader", index=5, value=str(n))
        what = "num_workers=0" if nw is not None else "no num_workers (so 0)"
        ctx.report(
            CODE, call,
            f"DataLoader built with {what}: every batch is loaded, decoded and collated in the "
            f"training process while the GPU waits. Start with num_workers={n} "
            f"({ctx.cpus} CPUs usable by this process, LOCAL_WORLD_SIZE={ctx.local_world_size}: "
            f"Lightning's conservative bound max(1, cpus // local_world_size - 1)); measure "
            f"the real optimum with `pitstop bench`.",
            fix=Fix(UNSAFE, f"set num_workers={n}", (edit,)),
            evidence=(("num_workers", 0), ("cpus_usable", ctx.cpus),
                      ("local_world_size", ctx.local_world_size), ("suggested", n)),
        )
