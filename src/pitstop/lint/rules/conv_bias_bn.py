"""LT016 conv-bias-bn: a convolution with a bias immediately followed by BatchNorm."""

from __future__ import annotations

import ast
from itertools import pairwise
from typing import TypeGuard

from pitstop.lint.astutil import arg_or_kw, callee_tail, dotted, has_star_kwargs, kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix

CODE = "LT016"
CONVS = frozenset({"Conv1d", "Conv2d", "Conv3d", "LazyConv1d", "LazyConv2d", "LazyConv3d"})


def _is_conv(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and callee_tail(node) in CONVS


def _is_bn(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and callee_tail(node).startswith(
        ("BatchNorm", "SyncBatchNorm", "LazyBatchNorm"))


def _report(ctx: ModuleContext, conv: ast.Call, bn: ast.Call) -> None:
    bias = arg_or_kw(conv, 7, "bias")
    if bias is None and has_star_kwargs(conv):
        return
    if bias is not None and not (isinstance(bias, ast.Constant) and bias.value is True):
        return
    line = conv.func.lineno
    col = ctx.char_column(line, conv.func.col_offset)
    tail = callee_tail(conv)
    if bias is None:
        edit = Edit("kw_add", line, col, tail, name="bias", value="False")
    elif kwarg(conv, "bias") is not None:
        edit = Edit("kw_set", line, col, tail, name="bias", value="False")
    else:
        edit = Edit("arg_set", line, col, tail, index=7, value="False")
    ctx.report(
        CODE, conv,
        f"`{tail}` has a bias (the default) and feeds `{callee_tail(bn)}` (line "
        f"{bn.lineno}), which subtracts the mean right away: the bias is "
        "computed, stored and updated for nothing. Pass `bias=False`.",
        fix=Fix(UNSAFE, "pass bias=False", (edit,)),
    )


def check(ctx: ModuleContext) -> None:
    if "BatchNorm" not in ctx.text:
        return
    # nn.Sequential(conv, bn, ...) and [conv, bn, ...]
    for node in ctx.calls:
        if callee_tail(node) in {"Sequential", "ModuleList"}:
            seq = node.args
            if len(seq) == 1 and isinstance(seq[0], (ast.List, ast.Tuple)):
                seq = seq[0].elts
            for a, b in pairwise(seq):
                if _is_conv(a) and _is_bn(b):
                    _report(ctx, a, b)
    for lst in ctx.lists:
        for a, b in pairwise(lst.elts):
            if _is_conv(a) and _is_bn(b):
                _report(ctx, a, b)
    # self.conv1 = Conv2d(...); self.bn1 = BatchNorm2d(...) used as bn1(conv1(x))
    # Names are per class: `self.conv` of one module is not `self.conv` of another.
    convs: dict[tuple[ast.AST | None, str], ast.Call] = {}
    bns: dict[tuple[ast.AST | None, str], ast.Call] = {}
    for assign in ctx.assigns:
        if len(assign.targets) == 1:
            name = dotted(assign.targets[0])
            value = assign.value
            if name and isinstance(value, ast.Call) and (_is_conv(value) or _is_bn(value)):
                key = (ctx.enclosing(assign, (ast.ClassDef,)), name)
                (convs if _is_conv(value) else bns)[key] = value
    if not convs or not bns:
        return
    for call in ctx.calls:
        bn_key = (ctx.enclosing(call, (ast.ClassDef,)), dotted(call.func) or "")
        if bn_key in bns and call.args:
            arg = call.args[0]
            conv_expr: ast.expr | None = arg
            if isinstance(arg, ast.Name):
                conv_expr = _previous_assignment(ctx, call, arg.id)
            if isinstance(conv_expr, ast.Call):
                conv_key = (bn_key[0], dotted(conv_expr.func) or "")
                if conv_key in convs:
                    _report(ctx, convs[conv_key], bns[bn_key])


def _previous_assignment(ctx: ModuleContext, call: ast.Call, name: str) -> ast.expr | None:
    """``x = self.conv(x)`` directly before the statement holding ``self.bn(x)``."""
    stmt: ast.AST | None = call
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = ctx.parents.get(stmt)
    parent = ctx.parents.get(stmt) if stmt is not None else None
    body = getattr(parent, "body", None)
    if not isinstance(body, list) or stmt not in body:
        return None
    i = body.index(stmt)
    if i == 0:
        return None
    prev = body[i - 1]
    if isinstance(prev, ast.Assign) and len(prev.targets) == 1 \
            and dotted(prev.targets[0]) == name:
        return prev.value
    return None
