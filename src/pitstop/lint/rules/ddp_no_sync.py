"""LT010 ddp-no-sync: gradient accumulation under DDP that all-reduces every micro-step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from pitstop.lint.astutil import callee_tail
from pitstop.lint.context import LOOPS, ModuleContext, State
from pitstop.lint.index import FUNCS

CODE = "LT010"
_GUARDS = (ast.If, *LOOPS)


def _calls_with_guards(stmts: list[ast.stmt], guards: tuple[ast.AST, ...] = ()
                       ) -> Iterator[tuple[ast.Call, tuple[ast.AST, ...]]]:
    """The statement-level calls under ``stmts`` (`loss.backward()`, `optimizer.step()`,
    `scaler.scale(loss).backward()`) with the `if`s and loops around them, outermost
    first. Nested functions are not entered."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(stmt.value, ast.Call):
            yield stmt.value, guards  # `loss.backward()`, `grad_norm = loss_scaler(...)`
        elif isinstance(stmt, ast.If):
            inner = (*guards, stmt)
            yield from _calls_with_guards(stmt.body, inner)
            yield from _calls_with_guards(stmt.orelse, inner)
        elif isinstance(stmt, LOOPS):
            yield from _calls_with_guards(stmt.body, (*guards, stmt))
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)):
            yield from _calls_with_guards(stmt.body, guards)


def check(ctx: ModuleContext) -> None:
    if "backward" not in ctx.text and "scaler" not in ctx.text:
        return
    for hot in ctx.hot_loops:
        if hot.kind != "train" or not isinstance(hot.node, (*LOOPS, *FUNCS)):
            continue
        backwards: list[tuple[ast.Call, tuple[ast.AST, ...]]] = []
        steps: list[tuple[ast.Call, tuple[ast.AST, ...]]] = []
        combined: list[ast.Call] = []  # a callable that runs both (`loss_scaler(loss, opt)`)
        st = State(func=hot.node if isinstance(hot.node, FUNCS) else ctx.index.owner.get(hot.node))
        for call, gs in _calls_with_guards(hot.node.body):
            if ctx.is_optimizer_step(call):
                is_backward = isinstance(call.func, ast.Attribute) and call.func.attr == "backward"
                (backwards if is_backward else steps).append((call, gs))
            elif ctx.loops.call_steps(call, st):
                tail = callee_tail(call)
                if "backward" in tail:  # a helper: `backward(total_loss, scaler)`
                    backwards.append((call, gs))
                elif "step" in tail:
                    steps.append((call, gs))
                else:
                    combined.append(call)
        found = _accumulating(ctx, backwards, steps, st)
        if found is None:
            # `loss_scaler(loss, optimizer, update_grad=(idx + 1) % accum == 0)`
            found = next((c for c in combined if any(
                ctx.loops.periodic(k.value, st) for k in c.keywords)), None)
        if found is None:
            continue
        ctx.report(
            CODE, found,
            "gradient accumulation under DistributedDataParallel: every micro-step's "
            "backward() all-reduces the gradients although only the last one before "
            "optimizer.step() needs to. Run the other micro-steps under `model.no_sync()` "
            "(or set `model.require_backward_grad_sync = is_last_micro_step`).",
            condition="+uses_ddp -ddp_sync_control",
            evidence=(("loop_line", hot.line),),
        )


def _accumulating(ctx: ModuleContext, backwards: list[tuple[ast.Call, tuple[ast.AST, ...]]],
                  steps: list[tuple[ast.Call, tuple[ast.AST, ...]]], st: State) -> ast.Call | None:
    """The backward() that runs on micro-steps without an optimizer step: the step is
    under a periodic guard the backward is not under, or the backward is in an inner loop
    the step is outside of."""
    for b, gb in backwards:
        for _s, gs in steps:
            if any(g not in gb for g in gs if isinstance(g, ast.If)
                   and ctx.loops.periodic(g.test, st)) or any(
                    isinstance(g, LOOPS) and g not in gs for g in gb):
                return b
    return None
