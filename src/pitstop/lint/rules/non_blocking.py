"""LT008 non-blocking: a per-batch host-to-device copy of pinned batch data without
``non_blocking=True``."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, data_root, kwarg, move_target
from pitstop.lint.context import ModuleContext, State
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix

CODE = "LT008"


def _pinned_chain(node: ast.AST) -> bool:
    """`x.pin_memory().to(device)`: the tensor was pinned right there."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "pin_memory":
                return True
            node = node.func
        else:
            node = node.value
    return False


def check_hot(ctx: ModuleContext, node: ast.AST, st: State) -> None:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return
    tail = node.func.attr
    if tail not in {"to", "cuda"}:
        return
    root = data_root(node.func.value)
    pinned_here = _pinned_chain(node.func.value)
    if (root not in st.batch and not pinned_here) or (st.hot and st.hot.kind == "forward"):
        return
    if tail == "to":
        target = move_target(node)
        if target is None or not ctx.devices.is_gpu(target, st.func):
            return
    if not pinned_here and not ctx.batch_pinned(st.batch_src.get(root or "")):
        return
    nb = kwarg(node, "non_blocking")
    line, col = node.func.lineno, ctx.char_column(node.func.lineno, node.func.col_offset)
    if nb is None:
        if any(kw.arg is None for kw in node.keywords):
            return
        fix = Fix(SAFE, "add non_blocking=True", (Edit("kw_add", line, col, callee_tail(node),
                                                         name="non_blocking", value="True"),))
    elif isinstance(nb.value, ast.Constant) and nb.value.value is False:
        fix = Fix(UNSAFE, "set non_blocking=True", (Edit("kw_set", line, col, callee_tail(node),
                                                         name="non_blocking", value="True"),))
    else:
        return
    assert st.hot is not None
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` copies a pinned batch to the GPU synchronously on every "
        f"iteration of {st.hot.describe}; with `non_blocking=True` the copy overlaps with "
        "compute.",
        fix=fix, evidence=(("loop_line", st.hot.line),),
    )
