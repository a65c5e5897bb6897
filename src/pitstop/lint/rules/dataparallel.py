"""LT015 dataparallel: ``torch.nn.DataParallel`` (or its functional form
``nn.parallel.data_parallel``) in a program that trains."""

from __future__ import annotations

import ast
import re

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
            if _inference_only(ctx, call) or _off_by_default(ctx, call):
                continue
            ctx.report(
                CODE, call,
                f"{form} trains in one process with one Python thread per GPU: it "
                "re-copies the model to every GPU each step and gathers outputs on GPU 0, and is "
                "usually slower than DistributedDataParallel (one process per GPU, launched with "
                "torchrun).",
                condition=f"+train_program{OR}train_run",  # the program trains
            )


# A count of GPUs the user sets (`--n_GPUs 1`, `opt.ngpu`), as opposed to one measured
# (`torch.cuda.device_count()`): DataParallel under `if n_gpu > 1:` waits for it.
GPU_COUNT_RE = re.compile(r"^(n_?gpus?|num_?gpus?|ngpus?|gpus|gpu_num|n_gpu_use)$", re.IGNORECASE)


def _off_by_default(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the wrapper built only when the user asks: under an opt-in flag that is off by
    default (`if args.dp:`, `if FLAGS.parallel:`), or under `if n_gpu > 1:` on a GPU
    count option whose default is 1 (`self.ngpu > 1` in DCGAN-style models)?"""
    if ctx.loops.under_opt_in(call):
        return True
    parents = ctx.parents
    child: ast.AST = call
    parent = parents.get(call)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef, ast.Lambda)):
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            tests = parent.test.values if isinstance(parent.test, ast.BoolOp) \
                and isinstance(parent.test.op, ast.And) else [parent.test]
            in_body = child in (parent.body if isinstance(parent.body, list) else [parent.body])
            if in_body and any(_more_than_one_gpu_asked(ctx, t) for t in tests):
                return True
        child, parent = parent, parents.get(parent)
    return False


def _more_than_one_gpu_asked(ctx: ModuleContext, test: ast.expr) -> bool:
    """`n_gpu > 1` / `args.n_GPUs >= 2` on a GPU count option whose default is 0 or 1 (not
    one the program fills in at run time, `args.n_gpu = torch.cuda.device_count()`)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.comparators[0], ast.Constant)):
        return False
    op, bound = test.ops[0], test.comparators[0].value
    if not ((isinstance(op, ast.Gt) and bound == 1) or (isinstance(op, ast.GtE) and bound == 2)):
        return False
    name = test.left.attr if isinstance(test.left, ast.Attribute) else (
        test.left.id if isinstance(test.left, ast.Name) else None)
    if name is None or not GPU_COUNT_RE.match(name):
        return False
    setting = ctx.program.setting(name)
    default = setting.default if setting is not None else None
    return isinstance(default, int) and not isinstance(default, bool) and default in (0, 1)


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
