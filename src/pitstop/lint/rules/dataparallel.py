"""LT015 dataparallel: ``torch.nn.DataParallel`` (or its functional form
``nn.parallel.data_parallel``) in a program that trains."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, dotted, qualname
from pitstop.lint.context import OR, ModuleContext
from pitstop.lint.rules.no_grad_eval import EVAL_NAME_RE, GRAD_USERS

CODE = "LT015"
CLASSES = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                     "torch.nn.parallel.data_parallel.DataParallel", "DataParallel"})
FUNCTIONS = frozenset({"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel."
                       "data_parallel", "data_parallel"})


def check(ctx: ModuleContext) -> None:
    if "ata_parallel" not in ctx.text and "DataParallel" not in ctx.text:
        return
    tails = {"DataParallel", "data_parallel", *(t for t in ctx.index.calls_by_tail
                                                if "DataParallel" in t and t != "DataParallel"
                                                and "Distributed" not in t)}
    for tail in sorted(tails):
        for call in ctx.index.calls_by_tail.get(tail, ()):
            qn = qualname(call.func, ctx.aliases) or callee_tail(call)
            if tail in {"DataParallel", "data_parallel"}:
                if qn not in CLASSES | FUNCTIONS:
                    continue
                form = "`nn.DataParallel`" if tail == "DataParallel" else \
                    "`nn.parallel.data_parallel(...)` (the functional DataParallel)"
            elif _subclass(ctx, call):
                form = f"`{tail}` (a subclass of `nn.DataParallel`)"
            else:
                continue
            if _inference_only(ctx, call):
                continue
            ctx.report(
                CODE, call,
                f"{form} trains in one process with one Python thread per GPU: it "
                "re-copies the model to every GPU each step and gathers outputs on GPU 0, and is "
                "usually slower than DistributedDataParallel (one process per GPU, launched with "
                "torchrun).",
                condition=f"+train_program{OR}train_run",  # the program trains
            )


def _inference_only(ctx: ModuleContext, call: ast.Call) -> bool:
    """The wrapper sits in a function that only evaluates: it switches the model to
    ``.eval()`` (or is named as an evaluation) and nothing in it trains (no backward, no
    ``.train()``). Multi-GPU inference is not what LT015 is about."""
    scope = ctx.scope_of(call)
    if scope is None:
        return False
    evaluates = bool(EVAL_NAME_RE.search(scope.name))
    calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call)]
    for node in calls:
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in GRAD_USERS or node.func.attr == "fit":
                return False
            if node.func.attr == "eval" and not node.args:
                evaluates = True
    # (`train_one_epoch(model, ...)`: training in a helper counts too, loop and all)
    return evaluates and not any(_trains(ctx, n) for n in calls)


def _trains(ctx: ModuleContext, call: ast.Call) -> bool:
    """Does the call step, or run a function of the program whose body does (in a loop of
    its own as well)?"""
    from pitstop.lint.walk import State

    if ctx.loops.call_steps(call, State()):
        return True
    target = ctx.function_target(call, State())
    return target is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr in {"backward", "step"} for n in ast.walk(target[1]))


def _subclass(ctx: ModuleContext, call: ast.Call) -> bool:
    """`BalancedDataParallel(model)`: a class of the program built on nn.DataParallel."""
    return ctx.program.names_class(ctx.key, dotted(call.func) or "", "dataparallel")
