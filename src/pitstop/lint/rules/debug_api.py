"""LT014 debug-api: anomaly detection, autograd profilers or gradcheck left on in training."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, kwarg, qualname
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix

CODE = "LT014"
TRIGGERS = ("anomaly", "emit_nvtx", "profiler", "gradcheck")


def check(ctx: ModuleContext) -> None:
    if not ctx.has_train_loop or not any(t in ctx.text for t in TRIGGERS):
        return
    for call in ctx.calls:
        tail = callee_tail(call)
        qn = qualname(call.func, ctx.aliases) or ""
        if tail == "set_detect_anomaly":
            kw = kwarg(call, "mode")
            arg = kw.value if kw is not None else (call.args[0] if call.args else None)
            scoped = isinstance(ctx.parents.get(call), ast.withitem)  # `with ...(True):`
            if isinstance(arg, ast.Constant) and arg.value is True and (
                    not scoped or _in_training_flow(ctx, call)):
                line = call.func.lineno
                col = ctx.char_column(line, call.func.col_offset)
                edit = Edit("kw_set", line, col, tail, name="mode", value="False") if kw else \
                    Edit("arg_set", line, col, tail, index=0, value="False")
                ctx.report(
                    CODE, call,
                    "`set_detect_anomaly(True)` records a traceback for every autograd node and "
                    "checks every backward result for NaN: training runs several times slower. "
                    "Turn it on only while hunting a NaN.",
                    fix=Fix(UNSAFE, "turn anomaly detection off", (edit,)),
                )
        elif tail in {"gradcheck", "gradgradcheck"} and qn.startswith("torch.autograd") \
                and _in_training_flow(ctx, call):
            ctx.report(
                CODE, call,
                f"`{tail}` in a training program: it runs the model in float64 with numerical "
                "differentiation, far slower than a training step. Keep it in tests.",
            )
    for w in ctx.withs:
        for item in w.items:
            ce = item.context_expr
            if not isinstance(ce, ast.Call):
                continue
            qn = qualname(ce.func, ctx.aliases) or ""
            tail = callee_tail(ce)
            if tail == "detect_anomaly" and qn.startswith("torch.autograd"):
                ctx.report(
                    CODE, ce,
                    "`detect_anomaly()` records a traceback for every autograd node and checks "
                    "every backward result for NaN: training runs several times slower.",
                )
            elif qn in {"torch.autograd.profiler.emit_nvtx", "torch.autograd.profiler.profile",
                        "torch.autograd.profile", "torch.cuda.profiler.profile"} and any(
                    _inside(ctx, h.node, w) for h in ctx.hot_loops):
                ctx.report(
                    CODE, ce,
                    f"`{ctx.segment(ce.func)}` wraps the whole training loop: every operator "
                    "is recorded for the entire run. Profile a few steps with "
                    "`torch.profiler.profile(schedule=...)` or `pitstop profile`.",
                )


def _inside(ctx: ModuleContext, node: ast.AST, ancestor: ast.AST) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None:
        if cur is ancestor:
            return True
        cur = ctx.parents.get(cur)
    return False


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _in_training_flow(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is ``call`` inside a training loop, or in the function (or module body) that runs
    one? A gradcheck, or anomaly mode used as a context manager, costs only where it is
    called (unlike `set_detect_anomaly(True)` as a statement, which is global): a helper
    that wraps it next to a training loop elsewhere in the module (a test utility, a
    numeric debugging pass) is no finding."""
    owner = ctx.enclosing(call, _FUNCS)
    for loop in ctx.hot_loops:
        if loop.kind != "train":
            continue
        if _inside(ctx, call, loop.node) or ctx.enclosing(loop.node, _FUNCS) is owner:
            return True
    return False
