"""The value model: what an expression evaluates to as the code runs, statement by
statement -- a GPU tensor (a model's output, a loss, a ``.to(device)`` result and what is
computed from it), a boolean GPU mask, a host value (``.item()`` results, literals,
shapes, ``torch.tensor`` without a device), a model, a loader, an instance of a class of
the program, or unknown (None).

This module gives the kinds of names, attributes, operators and subscripts. The kinds
themselves are named in :mod:`~pitstop.lint.values_kinds`; the other parts of the model
are :mod:`~pitstop.lint.values_models` (models and losses recognised),
:mod:`~pitstop.lint.values_calls` (what calls return) and
:mod:`~pitstop.lint.values_binding` (environments, arguments bound, functions followed).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pitstop.lint.astutil import callee_tail, dotted, root_name
from pitstop.lint.values_binding import ValueBinding
from pitstop.lint.values_kinds import (
    CPU,
    DERIVED,
    DICT_OF_LOADERS,
    GPU,
    GPU_LIST,
    LOADER,
    MASK,
    META_ATTRS,
    METER,
    METER_READS,
    PARAM_GROUP,
    PARAM_STATE,
    PARAM_STATE_ENTRY,
    is_loader_kind,
    meter_key,
)

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State


def _counts(fn: ast.AST, key: str) -> bool:
    """Does ``fn`` keep a number under ``key`` (`state["n_iter"] += 1`,
    `state.setdefault("func_evals", 0)`): an optimizer's counter, not a buffer?"""
    def number(v: ast.AST | None) -> bool:
        return isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) \
            and not isinstance(v.value, bool)

    def keyed(t: ast.AST) -> bool:
        return isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) \
            and t.slice.value == key

    for n in ast.walk(fn):
        if isinstance(n, ast.AugAssign) and keyed(n.target) and number(n.value):
            return True
        if isinstance(n, ast.Assign) and number(n.value) and any(keyed(t) for t in n.targets):
            return True
        if isinstance(n, ast.Call) and callee_tail(n) == "setdefault" and len(n.args) == 2 \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == key \
                and number(n.args[1]):
            return True
    return False


def stringish(node: ast.AST) -> bool:
    """A string expression: `"%f"`, `'%10s' * 2 + '%10.4g'`, an f-string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        return stringish(node.left) or stringish(node.right)
    return False


# The other parts are bases, one module each, chained (models <- calls <- binding <- this)
# so that each part type-checks against those below it; no two parts define the same
# name, so the order of the bases decides nothing at run time.
class ValueModel(ValueBinding):
    """Kinds of the expressions of one module."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self._return_memo: dict[tuple[int, tuple[tuple[str, str], ...]], str | None] = {}
        self._lambdas_open: set[int] = set()  # lambdas being evaluated (no recursion)

    # ------------------------------------------------------------------ kinds
    def kind(self, node: ast.AST, st: State) -> str | None:
        """What ``node`` evaluates to: GPU, MASK, CPU, MODEL, a loader or object kind, or
        None (unknown)."""
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name is not None and name in st.env:
                return st.env[name]
            if node.__class__ is ast.Name and name in self.ctx.index.import_locals:
                # `from utils import std` with `std = torch.tensor(...).cuda()` there
                r = self.ctx.resolve_name(node, st)
                if r is not None and r.kind == "tensor":
                    return self.ctx.kind_of_resolved(r)
            if isinstance(node, ast.Attribute):
                if node.attr in METER_READS and st.env.get(
                        (meter_key(node.value) or "") + METER) == GPU:
                    return GPU  # `top1.avg` of a meter fed GPU tensors: a GPU tensor
                inner = self.kind(node.value, st)
                if inner in (GPU, MASK, DERIVED):
                    if node.attr in META_ATTRS or node.attr.startswith("is_"):
                        return CPU  # `x.shape`, `x.is_quantized`: host values
                    if inner == MASK and node.attr in {"T", "mT", "data"}:
                        return MASK
                    if node.attr in {"T", "mT", "H", "data", "grad", "real", "imag"} or \
                            not node.attr.startswith("_"):
                        return inner if inner == DERIVED else GPU  # outputs.logits, loss.data
                return None
            return None
        if isinstance(node, ast.Constant):
            return CPU
        if isinstance(node, ast.Dict):
            kinds = [self.kind(v, st) for v in node.values[:16] if v is not None]
            # a dict of GPU tensors (`{"d": d_loss, "g": g_loss}`): its items are on the GPU
            if GPU in kinds or MASK in kinds:
                return GPU
            # `dataloaders = {"train": train_dl, "val": val_dl}`: `dataloaders[phase]` is
            # one of them (which one, the loop's phase says at run time)
            if kinds and all(is_loader_kind(k) for k in kinds):
                one = kinds[0] if len(set(kinds)) == 1 and kinds[0] is not None else LOADER
                return DICT_OF_LOADERS + one
            return CPU
        if isinstance(node, (ast.JoinedStr, ast.Set)):
            return CPU
        if isinstance(node, ast.Call):
            return self._call_kind(node, st)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mod) and stringish(node.left):
                return CPU  # `"%.3f" % loss` is a string (formatting it is the sync)
            left, right = self.kind(node.left, st), self.kind(node.right, st)
            if MASK in (left, right) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
                return MASK
            if left == MASK and right == MASK and isinstance(node.op, ast.Mult):
                return MASK  # `(u > 0) * (l == u)`: bool times bool stays bool
            if GPU in (left, right) or MASK in (left, right):
                return GPU
            if DERIVED in (left, right):
                return DERIVED
            if left == CPU and right == CPU:
                return CPU
            return None
        if isinstance(node, ast.UnaryOp):
            inner = self.kind(node.operand, st)
            if isinstance(node.op, ast.Not):
                return CPU if inner == CPU else (MASK if inner in (GPU, MASK) else None)
            if isinstance(node.op, ast.Invert) and inner == GPU:
                return MASK  # `~` of a float tensor raises: `x[~masked]` selects by a mask
            return inner if inner in (GPU, MASK, CPU) else None
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return CPU
            if any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                   for c in (node.left, *node.comparators)):
                return CPU  # `mode == "train"`: a string, not a tensor
            kinds = [self.kind(node.left, st)] + [self.kind(c, st) for c in node.comparators]
            if GPU in kinds or MASK in kinds:
                return MASK
            return CPU if all(k == CPU for k in kinds) else None
        if isinstance(node, ast.Subscript):
            held = st.env.get(dotted(node.value) or "")
            if held is not None and held.startswith(DICT_OF_LOADERS):
                return held[len(DICT_OF_LOADERS):]  # `dataloaders[phase]`: one of the loaders
            if held == PARAM_GROUP:
                return GPU_LIST if isinstance(node.slice, ast.Constant) \
                    and node.slice.value == "params" else CPU
            if held == PARAM_STATE:
                return PARAM_STATE_ENTRY
            if held == PARAM_STATE_ENTRY:
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
                return CPU if key == "step" or (isinstance(key, str) and st.func is not None
                                                 and _counts(st.func, key)) else GPU
            item = self._dict_item(node, st)
            if item is not None:  # `metrics["step"]` of `metrics = {"loss": loss, "step": n}`
                return self.kind(item, st)
            inner = self.kind(node.value, st)
            if inner in (GPU, MASK, DERIVED):
                return inner
            if inner is None and root_name(node.value) not in st.batch \
                    and self.kind(node.slice, st) in (GPU, MASK):
                return GPU  # indexed with a GPU tensor: the result is on the GPU too
            return None
        if isinstance(node, ast.IfExp):
            a, b = self.kind(node.body, st), self.kind(node.orelse, st)
            return a if a == b else (GPU if GPU in (a, b) else None)
        if isinstance(node, ast.BoolOp):
            kinds = [self.kind(v, st) for v in node.values]
            return MASK if GPU in kinds or MASK in kinds else None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            # a collection of GPU tensors counts as GPU data (`tuple(t.to(d) for t in b)`)
            return GPU if self.kind(node.elt, st) == GPU else None
        if isinstance(node, ast.DictComp):  # `{k: v.to(device) for k, v in batch.items()}`
            return GPU if self.kind(node.value, st) == GPU else None
        return None

    def _dict_item(self, node: ast.Subscript, st: State) -> ast.expr | None:
        """The value stored under a literal key of a dict display assigned just above."""
        if not (isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant)):
            return None
        last = self.ctx.index.value_above(st.func, node.value.id, node.lineno)
        if not isinstance(last, ast.Dict):
            return None
        for k, v in zip(last.keys, last.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == node.slice.value:
                return v
        return None

    def tuple_has_gpu(self, node: ast.AST, st: State) -> bool:
        """A tuple/list display holding a GPU tensor (`"%f %f" % (a, loss)`)."""
        return isinstance(node, (ast.Tuple, ast.List)) and any(
            self.kind(e.value if isinstance(e, ast.Starred) else e, st) in (GPU, MASK)
            for e in node.elts)
