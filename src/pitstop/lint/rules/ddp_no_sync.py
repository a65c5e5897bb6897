"""LT010 ddp-no-sync: gradient accumulation under DDP that all-reduces every micro-step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from pitstop.lint.context import LOOPS, ModuleContext, State

CODE = "LT010"
_GUARDS = (ast.If, *LOOPS)


def _calls_with_guards(stmts: list[ast.stmt], guards: tuple[ast.AST, ...] = ()
                       ) -> Iterator[tuple[ast.Call, tuple[ast.AST, ...]]]:
    """The statement-level calls under ``stmts`` (`loss.backward()`, `optimizer.step()`,
    `scaler.scale(loss).backward()`) with the `if`s and loops around them, outermost
    first. Nested functions are not entered."""
    for stmt in stmts:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield stmt.value, guards
        elif isinstance(stmt, ast.If):
            inner = (*guards, stmt)
            yield from _calls_with_guards(stmt.body, inner)
            yield from _calls_with_guards(stmt.orelse, inner)
        elif isinstance(stmt, LOOPS):
            yield from _calls_with_guards(stmt.body, (*guards, stmt))
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)):
            yield from _calls_with_guards(stmt.body, guards)


def check(ctx: ModuleContext) -> None:
    if "backward" not in ctx.text:
        return
    for hot in ctx.hot_loops:
        if hot.kind != "train" or not isinstance(hot.node, LOOPS):
            continue
        backward: tuple[ast.Call, tuple[ast.AST, ...]] | None = None
        step: tuple[ast.Call, tuple[ast.AST, ...]] | None = None
        for call, gs in _calls_with_guards(hot.node.body):
            if not ctx.is_optimizer_step(call):
                continue
            is_backward = isinstance(call.func, ast.Attribute) and call.func.attr == "backward"
            if is_backward and backward is None:
                backward = (call, gs)
            elif not is_backward and step is None:
                step = (call, gs)
        if backward is None or step is None:
            continue
        b, gb = backward
        _, gs = step
        accumulates = any(g not in gb for g in gs if isinstance(g, ast.If)
                          and ctx.loops.periodic(g.test, State())) \
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
