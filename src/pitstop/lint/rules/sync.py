"""LT001 sync: a host-device synchronisation on every iteration of a hot loop."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import callee_tail, dotted, kwarg, qualname
from pitstop.lint.context import GPU, MASK, ModuleContext, State

CODE = "LT001"

HOST_COPY = {"item": "copies a GPU scalar to the host",
             "cpu": "copies a GPU tensor to the host",
             "numpy": "copies a GPU tensor to the host",
             "tolist": "copies a GPU tensor to the host"}
# Experiment loggers that turn a tensor into a Python number right away (TensorBoard's
# SummaryWriter.add_scalar calls .item(); wandb / mlflow convert values too).
LOGGER_CALLS = frozenset({"add_scalar", "add_scalars", "log_metric", "log_metrics", "log"})
# Owners of .log()/.log_metric(s)() that are experiment trackers (not Lightning's lazy
# self.log, not torch.log).
LOGGER_OWNER_RE = re.compile(r"(^|\.)(wandb|run|writer|logger|mlflow|tracker|experiment|"
                             r"accelerator|neptune|comet|aim|tb|tb_writer|summary_writer)$",
                             re.IGNORECASE)
NONZERO = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})


def _report(ctx: ModuleContext, node: ast.AST, st: State, what: str, sync: str) -> None:
    assert st.hot is not None
    via = f" {st.via}" if st.via else ""
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` {what} on every iteration of {st.hot.describe}{via}; the "
        f"CPU waits for the GPU to finish all queued work. Keep the value on the device and "
        f"read it every N steps (`if step % log_every == 0:`).",
        evidence=(("sync", sync), ("loop_line", st.hot.line), ("loop_kind", st.hot.kind)),
    )


def check_hot(ctx: ModuleContext, node: ast.AST, st: State) -> None:
    if st.hot is not None and st.hot.kind == "forward":
        return  # the devices of forward()'s arguments are unknown: no guessing
    if isinstance(node, (ast.If, ast.While, ast.Assert)):
        test = node.test
        word = {ast.If: "`if`", ast.While: "`while`", ast.Assert: "`assert`"}[type(node)]
        _report(ctx, test, st, f"is a GPU tensor used as a Python {word} condition, which "
                "needs its value on the host", "control-flow")
        return
    if isinstance(node, ast.Call):
        _check_call(ctx, node, st)
    elif isinstance(node, ast.FormattedValue):
        if ctx.kind(node.value, st) in (GPU, MASK):
            _report(ctx, node.value, st, "formats a GPU tensor into a string, copying it to the "
                    "host", "format")
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        if ctx.kind(node.slice, st) == MASK and ctx.kind(node.value, st) in (GPU, MASK):
            _report(ctx, node, st, "indexes with a boolean GPU mask, whose result size the host "
                    "must read back", "boolean-mask")
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) \
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
            and ctx.kind(node.right, st) in (GPU, MASK):
        _report(ctx, node, st, "formats a GPU tensor into a string", "format")


def _check_call(ctx: ModuleContext, node: ast.Call, st: State) -> None:
    func = node.func
    tail = callee_tail(node)
    if isinstance(func, ast.Attribute):
        recv = ctx.kind(func.value, st)
        if recv in (GPU, MASK):
            if tail in HOST_COPY:
                _report(ctx, node, st, HOST_COPY[tail], tail)
                return
            if tail == "to" and node.args and ctx.device_kind(node.args[0]) == "cpu":
                nb = kwarg(node, "non_blocking")
                if nb is None or not (isinstance(nb.value, ast.Constant) and nb.value.value is True):
                    _report(ctx, node, st, "copies a GPU tensor to the host", "to-cpu")
                return
            if tail in NONZERO:
                _report(ctx, node, st, "returns a tensor whose size depends on the data, so the "
                        "host must read it back", tail)
                return
        if tail == "format" and isinstance(func.value, ast.Constant) and any(
                ctx.kind(a, st) in (GPU, MASK) for a in node.args):
            _report(ctx, node, st, "formats a GPU tensor into a string", "format")
            return
    qn = qualname(func, ctx.aliases) or ""
    if qn == "torch.cuda.synchronize" or (tail == "synchronize" and "cuda" in (dotted(func) or "")):
        _report(ctx, node, st, "blocks the CPU until the GPU is idle", "synchronize")
        return
    if qn == "torch.cuda.empty_cache":
        _report(ctx, node, st, "synchronizes and returns cached blocks that the next step will "
                "allocate again", "empty_cache")
        return
    if tail in LOGGER_CALLS and isinstance(func, ast.Attribute) and (
            tail.startswith("add_") or LOGGER_OWNER_RE.search(dotted(func.value) or "")) \
            and not qn.startswith(("torch.", "numpy.", "math.")) and _logs_gpu_value(ctx, node, st):
        _report(ctx, node, st, "hands a GPU tensor to a logger, which converts it to a Python "
                "number", "logger")
        return
    if isinstance(func, ast.Name):
        if tail in {"float", "int", "bool", "complex", "str", "repr"} and node.args \
                and ctx.kind(node.args[0], st) in (GPU, MASK):
            _report(ctx, node, st, f"converts a GPU tensor to a Python {tail}, copying it to "
                    "the host", tail)
            return
        if tail == "print" and any(ctx.kind(a, st) in (GPU, MASK) for a in node.args
                                   if not isinstance(a, ast.JoinedStr)):
            _report(ctx, node, st, "prints a GPU tensor, copying it to the host", "print")
            return
    if qn.startswith("torch.") and tail in NONZERO | {"where"} and node.args \
            and ctx.kind(node.args[0], st) in (GPU, MASK):
        if tail == "where" and len(node.args) != 1:
            return
        _report(ctx, node, st, "returns a tensor whose size depends on the data, so the host "
                "must read it back", tail)
        return
    if qn in {"numpy.array", "numpy.asarray"} and node.args \
            and ctx.kind(node.args[0], st) in (GPU, MASK):
        _report(ctx, node, st, "copies a GPU tensor to the host", "numpy")


def _logs_gpu_value(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    values: list[ast.expr] = [*node.args, *(k.value for k in node.keywords)]
    for v in list(values):
        if isinstance(v, ast.Dict):
            values.extend(x for x in v.values if x is not None)
    return any(ctx.kind(v, st) in (GPU, MASK) for v in values)
