"""LT015 dataparallel: ``torch.nn.DataParallel`` (or its functional form
``nn.parallel.data_parallel``) in a program that trains."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import callee_tail, dotted, qualname
from pitstop.lint.context import OR, ModuleContext

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


EVAL_NAME_RE = re.compile(r"(^|_)(eval|evaluate|evaluator|test|infer|inference|predict|valid|"
                          r"validate|validation)($|_)", re.I)


def _inference_only(ctx: ModuleContext, call: ast.Call) -> bool:
    """The wrapper sits in a function that only evaluates: it switches the model to
    ``.eval()`` (or is named as an evaluation) and nothing in it trains (no backward, no
    ``.train()``). Multi-GPU inference is not what LT015 is about."""
    scope = ctx.scope_of(call)
    if scope is None:
        return False
    evaluates = bool(EVAL_NAME_RE.search(scope.name))
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"backward", "train", "step", "fit"}:
                return False
            if node.func.attr == "eval" and not node.args:
                evaluates = True
    return evaluates


def _subclass(ctx: ModuleContext, call: ast.Call) -> bool:
    """`BalancedDataParallel(model)`: a class of the program built on nn.DataParallel."""
    return ctx.program.names_class(ctx.key, dotted(call.func) or "", "dataparallel")
