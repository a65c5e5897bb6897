"""LT010 ddp-no-sync: gradient accumulation under DDP that all-reduces every micro-step."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import iter_shallow
from pitstop.lint.context import LOOPS, ModuleContext, State

CODE = "LT010"


def _guards(ctx: ModuleContext, node: ast.AST, stop: ast.AST) -> list[ast.AST]:
    """The `if`s and loops between ``node`` and ``stop``."""
    out: list[ast.AST] = []
    cur = ctx.parents.get(node)
    while cur is not None and cur is not stop:
        if isinstance(cur, (ast.If, *LOOPS)):
            out.append(cur)
        cur = ctx.parents.get(cur)
    return out


def check(ctx: ModuleContext) -> None:
    if "backward" not in ctx.text:
        return
    for hot in ctx.hot_loops:
        if hot.kind != "train" or not isinstance(hot.node, LOOPS):
            continue
        backwards: list[ast.Call] = []
        steps: list[ast.Call] = []
        for node in iter_shallow(hot.node.body, into_loops=True):
            if isinstance(node, ast.Call) and ctx.is_optimizer_step(node):
                (backwards if isinstance(node.func, ast.Attribute)
                 and node.func.attr == "backward" else steps).append(node)
        if not backwards or not steps:
            continue
        b, s = backwards[0], steps[0]
        gb, gs = _guards(ctx, b, hot.node), _guards(ctx, s, hot.node)
        accumulates = any(g not in gb for g in gs if isinstance(g, ast.If)
                          and ctx.rarity(g.test, State()) == "rare") \
            or any(isinstance(g, LOOPS) and g not in gs for g in gb)
        if not accumulates:
            continue
        ctx.report(
            CODE, b,
            "gradient accumulation under DistributedDataParallel: every micro-step's "
            "backward() all-reduces the gradients although only the last one before "
            "optimizer.step() needs to. Run the other micro-steps under `model.no_sync()` "
            "(or set `model.require_backward_grad_sync = is_last_micro_step`).",
            condition="+uses_ddp -ddp_sync_control",
            evidence=(("loop_line", hot.line),),
        )

