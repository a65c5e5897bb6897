"""LT016 conv-bias-bn: a convolution with a bias immediately followed by BatchNorm."""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from typing import TypeGuard

from pitstop.lint.astutil import (
    arg_or_kw,
    callee_tail,
    dotted,
    has_star_kwargs,
    kwarg,
    param_default,
)
from pitstop.lint.context import ModuleContext
from pitstop.lint.index import FuncDef
from pitstop.lint.model import UNSAFE, Edit, Fix

CODE = "LT016"
CONVS = frozenset({"Conv1d", "Conv2d", "Conv3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
                   "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                   "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"})


def _is_conv(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and callee_tail(node) in CONVS


def _wrapped_conv_with_bias(ctx: ModuleContext, node: ast.AST) -> bool:
    """`ConvNorm(512, 512, kernel_size=5)`: a module of the program around one
    convolution, its bias left on (the wrapper's `bias` parameter not passed as False)."""
    if not isinstance(node, ast.Call) or not callee_tail(node)[:1].isupper():
        return False
    name = dotted(node.func)
    found = ctx.program.conv_bias_of(ctx.key, name) if name else None
    if found is None:
        return False
    param, pos = found
    if not param:
        return True
    passed = kwarg(node, param)
    value = passed.value if passed is not None else (
        node.args[pos] if 0 <= pos < len(node.args) else None)
    return value is None or (isinstance(value, ast.Constant) and value.value is True)


# weight reparametrizations that keep the layer's bias (`SpectralNorm(nn.Conv2d(...))`)
REPARAMETRIZE_RE = re.compile(r"^_*(spectral_?norm|weight_?norm|SpectralNorm|WeightNorm|SNConv)$",
                              re.IGNORECASE)


def _reparametrized(node: ast.AST) -> ast.AST:
    """The layer inside `spectral_norm(nn.ConvTranspose2d(...))` (a project's own
    `SpectralNorm` class alike): its bias still feeds the BatchNorm after it."""
    if isinstance(node, ast.Call) and len(node.args) >= 1 \
            and REPARAMETRIZE_RE.match(callee_tail(node)) and _is_conv(node.args[0]):
        return node.args[0]
    return node


def _built_unasked(ctx: ModuleContext, conv: ast.Call) -> bool:
    """Is the layer in a block class no model of the program builds, or built only under
    an opt-in flag (`if self.enable_fusion:` in `__init__`) of a class the program builds
    without turning it on? (A library block nobody here builds is judged as written.)"""
    if ctx.unused_definition(conv):
        return True
    if not ctx.loops.under_opt_in(conv):
        return False
    cls = ctx.enclosing(conv, (ast.ClassDef,))
    return not isinstance(cls, ast.ClassDef) or ctx.program.builds(ctx.key, cls.name)


def _report_wrapped(ctx: ModuleContext, conv: ast.Call, bn: ast.Call) -> None:
    if _built_unasked(ctx, conv):
        return
    tail = callee_tail(conv)
    ctx.report(
        CODE, conv,
        f"`{tail}` wraps a convolution with a bias (its default) and feeds "
        f"`{callee_tail(bn)}` (line {bn.lineno}), which subtracts the mean right away: the "
        f"bias is computed, stored and updated for nothing. Pass `bias=False` to `{tail}`.",
    )


def _is_bn(node: ast.AST) -> TypeGuard[ast.Call]:
    # (`_BatchNorm2d`: a project's own subclass, named after the layer it extends)
    return isinstance(node, ast.Call) and callee_tail(node).lstrip("_").startswith(
        ("BatchNorm", "SyncBatchNorm", "LazyBatchNorm"))


def _report(ctx: ModuleContext, conv: ast.Call, bn: ast.Call, *, fixable: bool = True) -> None:
    if _built_unasked(ctx, conv):
        return
    bias = arg_or_kw(conv, 7, "bias")
    if bias is None and has_star_kwargs(conv):
        return
    if isinstance(bias, ast.Name) and _param_on_by_default(ctx, conv, bias.id):
        fixable = False  # `nn.Conv2d(..., bias=bias)` in a builder whose `bias=True`
    elif bias is not None and not (isinstance(bias, ast.Constant) and bias.value is True):
        return
    line = conv.func.lineno
    col = ctx.char_column(line, conv.func.col_offset)
    tail = callee_tail(conv)
    if not fixable:
        edit = None
    elif bias is None:
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
        fix=Fix(UNSAFE, "pass bias=False", (edit,)) if edit is not None else None,
    )


def _param_on_by_default(ctx: ModuleContext, node: ast.AST, name: str) -> bool:
    """`bias=bias` with `bias=True` the default, and not every call in this module of the
    function (of the class, for an __init__) turning it off."""
    fn = ctx.scope_of(node)
    if fn is None or param_default(fn, name) is not True:
        return False
    callee = fn.name
    if callee == "__init__":
        cls = ctx.index.class_of.get(fn)
        callee = cls.name if cls is not None else callee
    passed = _passed_values(ctx, fn, callee, name)
    return not passed or not all(isinstance(v, ast.Constant) and v.value is False
                                 for v in passed)


def _passed_values(ctx: ModuleContext, fn: FuncDef, callee: str, param: str
                   ) -> list[ast.expr | None]:
    """What each call of ``callee`` in this module passes for ``param`` (None: nothing;
    a `*args`/`**kw` call counts as passing something unknown)."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if names and names[0] in {"self", "cls"} and fn.name == "__init__":
        names = names[1:]
    pos = names.index(param) if param in names else -1
    out: list[ast.expr | None] = []
    for call in ctx.index.calls_by_tail.get(callee, ()):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            out.append(ast.Name(id="?"))
            continue
        kw = kwarg(call, param)
        out.append(kw.value if kw is not None else (
            call.args[pos] if 0 <= pos < len(call.args) else None))
    return out


# (class, "self.conv") -> the convolutions or BatchNorms assigned to it, in source order
Layers = dict[tuple[ast.AST | None, str], list[ast.Call]]


def _class_layers(ctx: ModuleContext) -> tuple[Layers, Layers]:
    """`self.conv = nn.Conv2d(...)` and `self.bn = nn.BatchNorm2d(...)` of each class
    (names are per class: `self.conv` of one module is not `self.conv` of another; one
    name may be assigned on several branches)."""
    convs: Layers = {}
    bns: Layers = {}
    for assign in ctx.assigns:
        if len(assign.targets) == 1:
            name = dotted(assign.targets[0])
            value = assign.value
            if not name or not isinstance(value, ast.Call):
                continue
            if _is_bn(value):
                bns.setdefault((ctx.enclosing(assign, (ast.ClassDef,)), name), []).append(value)
            elif _is_conv(value) or (name.startswith("self.")
                                     and _wrapped_conv_with_bias(ctx, value)):
                # (`self.conv1 = Conv(c, k)`, a wrapper of one convolution, too)
                convs.setdefault((ctx.enclosing(assign, (ast.ClassDef,)), name), []).append(value)
    return convs, bns


def _report_layer(ctx: ModuleContext, conv: ast.Call, bn: ast.Call, *, fixable: bool) -> None:
    """Report a conv attribute of a class (a plain convolution, or a wrapper of one)."""
    if _is_conv(conv):
        _report(ctx, conv, bn, fixable=fixable)
    else:
        _report_wrapped(ctx, conv, bn)


def _bn_of(ctx: ModuleContext, b: ast.AST, bns: Layers | None = None
           ) -> tuple[ast.Call, bool] | None:
    """The BatchNorm ``b`` builds, and whether only on some path: `nn.BatchNorm2d(c) if
    use_bn else nn.Identity()` with `use_bn` on by default builds it (not on every path);
    `self.BN` assigned one in the class."""
    if _is_bn(b):
        return b, False
    if isinstance(b, ast.Attribute) and bns is not None:
        found = bns.get((ctx.enclosing(b, (ast.ClassDef,)), dotted(b) or ""))
        return (found[-1], True) if found else None
    if isinstance(b, ast.IfExp) and _is_bn(b.body):
        fn = ctx.scope_of(b)
        if fn is not None and _off_unless_asked(ctx, fn, b.test):
            return None
        return b.body, True
    return None


def _pair(ctx: ModuleContext, a: ast.AST, b: ast.AST, *, fixable: bool = True,
          layers: tuple[Layers, Layers] | None = None) -> None:
    """Report `a` (a conv) feeding `b` (a BatchNorm), if it is such a pair (``layers``:
    the class's `self.conv` / `self.bn` assignments, for lists of attributes)."""
    convs, bns = layers if layers is not None else (None, None)
    found = _bn_of(ctx, b, bns)
    if found is None:
        return
    bn, some_paths = found
    if some_paths:
        fixable = False
    if isinstance(a, ast.Name):  # `conv_mod = nn.Conv2d(...)` ... `Sequential(conv_mod, bn)`
        value = ctx.index.value_above(ctx.scope_of(a), a.id, a.lineno)
        if value is None:
            return
        a = value
        fixable = False  # (the named conv may be used without the BatchNorm elsewhere)
    elif isinstance(a, ast.Attribute) and convs is not None:
        # `[self.C, self.BN, self.relu]` with `self.C = nn.Conv2d(...)` above
        for conv in convs.get((ctx.enclosing(a, (ast.ClassDef,)), dotted(a) or ""), ()):
            _report_layer(ctx, conv, bn, fixable=False)
        return
    a = _reparametrized(a)
    if _is_conv(a):
        _report(ctx, a, bn, fixable=fixable)
    elif _wrapped_conv_with_bias(ctx, a):
        assert isinstance(a, ast.Call)
        _report_wrapped(ctx, a, bn)


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


def _off_unless_asked(ctx: ModuleContext, fn: FuncDef, test: ast.expr) -> bool:
    """`if batch_norm:` with `batch_norm=False` the builder's default, or `elif norm_fn ==
    "batch":` with `norm_fn="group"` its default, and no call in this module passing the
    other value: the branch is not built."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant):
        wanted = test.comparators[0].value
        default = param_default(fn, test.left.id)
        if not isinstance(wanted, str) or not isinstance(default, str) or default == wanted:
            return False
        owner = ctx.index.class_of.get(fn)
        callee = owner.name if owner is not None and fn.name == "__init__" else fn.name
        return all(v is None or (isinstance(v, ast.Constant) and v.value != wanted)
                   for v in _passed_values(ctx, fn, callee, test.left.id))
    if not isinstance(test, ast.Name) or param_default(fn, test.id) is not False:
        return False
    return all(v is None or (isinstance(v, ast.Constant) and not v.value)
               for v in _passed_values(ctx, fn, fn.name, test.id))


def _under_off_branch(ctx: ModuleContext, node: ast.AST) -> bool:
    """Is ``node`` in the body of an `if flag:` that the builder's default turns off?"""
    fn = ctx.scope_of(node)
    if fn is None:
        return False
    child, parent = node, ctx.parents.get(node)
    while parent is not None and parent is not fn:
        if isinstance(parent, ast.If) and child in parent.body \
                and _off_unless_asked(ctx, fn, parent.test):
            return True
        child, parent = parent, ctx.parents.get(parent)
    return False


def _layer_sequences(ctx: ModuleContext, fn: FuncDef, body: list[ast.stmt], depth: int,
                     out: dict[str, list[LayerItem]], local: dict[str, ast.expr]) -> None:
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
            if not _off_unless_asked(ctx, fn, stmt.test):
                _layer_sequences(ctx, fn, stmt.body, depth + 1, out, local)
            _layer_sequences(ctx, fn, stmt.orelse, depth + 1, out, local)
        elif isinstance(stmt, (ast.For, ast.While, ast.With)):
            _layer_sequences(ctx, fn, stmt.body, depth, out, local)


def _check_appends(ctx: ModuleContext) -> None:
    """VGG-style builders: `layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU()]` with
    `conv2d = nn.Conv2d(...)` above, or `layers.append(nn.Conv2d(...))` followed by
    `if bn: layers.append(nn.BatchNorm2d(...))`."""
    for fns in ctx.index.functions.values():
        for fn in fns:
            seqs: dict[str, list[LayerItem]] = {}
            _layer_sequences(ctx, fn, fn.body, 0, seqs, {})
            for seq in seqs.values():
                for (a, da), (b, db) in pairwise(seq):
                    # BN appended only on some path: `bias=False` would hurt the other
                    _pair(ctx, a, b, fixable=0 <= db <= da)


def check(ctx: ModuleContext) -> None:
    if "BatchNorm" not in ctx.text:
        return
    convs, bns = _class_layers(ctx)
    # nn.Sequential(conv, bn, ...) and [conv, bn, ...]
    for node in ctx.calls:
        if callee_tail(node) in {"Sequential", "ModuleList"}:
            seq = node.args
            if len(seq) == 1 and isinstance(seq[0], (ast.List, ast.Tuple)):
                seq = seq[0].elts
            for a, b in pairwise(seq):
                _pair(ctx, a, b, layers=(convs, bns))
    layer_lists = _star_passed_lists(ctx)
    for lst in ctx.lists:
        if _under_off_branch(ctx, lst):
            continue
        # (a list of `self.` attributes is a layer order only when it becomes the
        # Sequential: `for m in [self.head, self.norm]:` is not one)
        layers = (convs, bns) if id(lst) in layer_lists else None
        for a, b in pairwise(lst.elts):
            _pair(ctx, a, b, layers=layers)
    _check_appends(ctx)
    # self.conv1 = Conv2d(...); self.bn1 = BatchNorm2d(...) used as bn1(conv1(x))
    if not convs or not bns:
        return
    for call in ctx.calls:
        bn_key = (ctx.enclosing(call, (ast.ClassDef,)), dotted(call.func) or "")
        if bn_key in bns and call.args:
            arg = call.args[0]
            conv_expr: ast.expr | None = arg
            conditional = False
            if isinstance(arg, ast.Name):
                conv_expr, conditional = _previous_assignment(ctx, call, arg.id)
            if isinstance(conv_expr, ast.Call):
                conv_key = (bn_key[0], dotted(conv_expr.func) or "")
                bn = bns[bn_key][-1]
                if conv_key in convs and not _under_off_branch(ctx, bn):
                    for conv in convs[conv_key]:
                        # (several convs, or a BatchNorm on some paths: no automatic fix)
                        _report_layer(ctx, conv, bn,
                                      fixable=len(convs[conv_key]) == 1 and not conditional)


def _star_passed_lists(ctx: ModuleContext) -> set[int]:
    """Ids of the list displays that reach `nn.Sequential(*lst)` / `nn.ModuleList(lst)`:
    inline, or assigned to a name (`self.layers = [...]`) that such a call unpacks."""
    names: set[str] = set()
    out: set[int] = set()
    for node in ctx.calls:
        if callee_tail(node) not in {"Sequential", "ModuleList"}:
            continue
        for a in node.args:
            inner = a.value if isinstance(a, ast.Starred) else a
            if isinstance(inner, (ast.List, ast.Tuple)):
                out.add(id(inner))
            elif dotted(inner):
                names.add(dotted(inner) or "")
    if names:
        for assign in ctx.assigns:
            if isinstance(assign.value, (ast.List, ast.Tuple)) and any(
                    dotted(t) in names for t in assign.targets):
                out.add(id(assign.value))
    return out


def _previous_assignment(ctx: ModuleContext, call: ast.Call, name: str
                         ) -> tuple[ast.expr | None, bool]:
    """``x = self.conv(x)`` directly before the statement holding ``self.bn(x)``, and
    whether that statement is inside an `if` that follows it (`if self.use_bn: x =
    self.bn(x)`: the BatchNorm runs on some paths only)."""
    stmt: ast.AST | None = call
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = ctx.parents.get(stmt)
    prev: ast.AST | None = None
    conditional = False
    for _ in range(4):  # `x = self.conv(x)` / `if self.use_relu: return self.relu(self.bn(x))`
        parent = ctx.parents.get(stmt) if stmt is not None else None
        block = next((b for b in (getattr(parent, "body", None), getattr(parent, "orelse", None))
                      if isinstance(b, list) and stmt in b), None)
        if block is None:
            return None, False
        i = block.index(stmt)
        if i > 0:
            prev = block[i - 1]
            break
        if not isinstance(parent, (ast.If, ast.With)):
            return None, False
        if isinstance(parent, ast.If):
            conditional = True
        stmt = parent  # first in an `if` or `with` block: what comes before that block
    if prev is None:
        return None, False
    if isinstance(prev, ast.Assign) and len(prev.targets) == 1 \
            and dotted(prev.targets[0]) == name:
        return prev.value, conditional
    return None, False
