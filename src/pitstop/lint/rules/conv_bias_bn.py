"""LT016 conv-bias-bn: a convolution with a bias immediately followed by BatchNorm."""

from __future__ import annotations

import ast
from itertools import pairwise
from typing import TypeGuard

from pitstop.lint.astutil import arg_or_kw, callee_tail, dotted, has_star_kwargs, kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix

CODE = "LT016"
CONVS = frozenset({"Conv1d", "Conv2d", "Conv3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
                   "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                   "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"})


def _is_conv(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and callee_tail(node) in CONVS


def _is_bn(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and callee_tail(node).startswith(
        ("BatchNorm", "SyncBatchNorm", "LazyBatchNorm"))


def _report(ctx: ModuleContext, conv: ast.Call, bn: ast.Call, *, fixable: bool = True) -> None:
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
        fix=Fix(UNSAFE, "pass bias=False", (edit,)) if fixable else None,
    )


# A module appended to a layer list, and the `if` depth of the append (-1: unknown)
LayerItem = tuple[ast.expr, int]


def _appended(stmt: ast.stmt) -> tuple[str, list[ast.expr]] | None:
    """`layers.append(m)`, `layers.extend([a, b])`, `layers += [a, b]`,
    `block.add_module("conv", m)`: the list's name and the modules added."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) \
            and isinstance(stmt.value, (ast.List, ast.Tuple)):
        name = dotted(stmt.target)
        return (name, list(stmt.value.elts)) if name else None
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    if not isinstance(call.func, ast.Attribute):
        return None
    name = dotted(call.func.value)
    if name is None or not call.args:
        return None
    tail = call.func.attr
    if tail == "append" and len(call.args) == 1:
        return name, [call.args[0]]
    if tail == "extend" and isinstance(call.args[0], (ast.List, ast.Tuple)):
        return name, list(call.args[0].elts)
    if tail == "add_module" and len(call.args) == 2:
        return name, [call.args[1]]
    return None


def _layer_sequences(body: list[ast.stmt], depth: int, out: dict[str, list[LayerItem]],
                     local: dict[str, ast.expr]) -> None:
    """The modules appended to each list, in the order the code appends them (into `if`
    and `for` bodies, not into nested functions)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            local[stmt.targets[0].id] = stmt.value  # `conv2d = nn.Conv2d(...)`
        added = _appended(stmt)
        if added is not None:
            name, items = added
            seq = out.setdefault(name, [])
            for item in items:
                if isinstance(item, ast.Name) and item.id in local:
                    # (a named conv may be appended elsewhere without BN: depth unknown)
                    seq.append((local[item.id], -1))
                else:
                    seq.append((item, depth))
            continue
        if isinstance(stmt, ast.If):
            _layer_sequences(stmt.body, depth + 1, out, local)
            _layer_sequences(stmt.orelse, depth + 1, out, local)
        elif isinstance(stmt, (ast.For, ast.While, ast.With)):
            _layer_sequences(stmt.body, depth, out, local)


def _check_appends(ctx: ModuleContext) -> None:
    """VGG-style builders: `layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU()]` with
    `conv2d = nn.Conv2d(...)` above, or `layers.append(nn.Conv2d(...))` followed by
    `if bn: layers.append(nn.BatchNorm2d(...))`."""
    for fns in ctx.index.functions.values():
        for fn in fns:
            seqs: dict[str, list[LayerItem]] = {}
            _layer_sequences(fn.body, 0, seqs, {})
            for seq in seqs.values():
                for (a, da), (b, db) in pairwise(seq):
                    if _is_conv(a) and _is_bn(b):
                        # BN appended only on some path: `bias=False` would hurt the other
                        _report(ctx, a, b, fixable=0 <= db <= da)


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
    _check_appends(ctx)
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
