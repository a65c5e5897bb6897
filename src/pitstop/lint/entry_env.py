"""What a function's names hold when a walk starts in it: a module's forward() inputs
(on the module's device in a GPU program), what the program's callers pass for its
parameters, and the kinds of the ``self.x`` attributes its class assigns."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from pitstop.lint.astutil import callee_tail, dotted, param_names
from pitstop.lint.index import FuncDef
from pitstop.lint.values_kinds import GPU, HOST_METHODS, MASK_METHODS, META_ATTRS, MODEL

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext

# Parameters of forward() that are switches, not inputs (`forward(self, labels, train)`).
FLAG_PARAM_RE = re.compile(r"^(train|training|is_train(ing)?|eval|evaluate|mode|phase|split|"
                           r"stage|verbose|debug|deterministic|inference|test|i|j|k|n|it|layer|topk|top_k|"
                           r"model_type|name)$|^(return|use|with|is|do|enable|apply|need|force|"
                           r"num|n|max|min)_|_(mode|flag|only|type|name|len|size|num|count|phase|"
                           r"idx|index)$|step|epoch|iter|^(seq_|max_)?len(gth)?s?$|size$",
                           re.IGNORECASE)
# Optional forward() inputs that are host values: lengths (`pack_padded_sequence` wants
# them on the CPU), sizes, settings.
HOST_INPUT_RE = re.compile(r"len|size|shape|count|cfg|config|opt|kwargs|hidden|state|cache|"
                           r"past|mem|^h$|^c$|^hx$", re.IGNORECASE)


class EntryEnv:
    """The starting kinds of a walk into a function or a class of one module."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self._class_env: dict[ast.ClassDef, dict[str, str]] = {}

    def forward_inputs(self, fn: FuncDef) -> dict[str, str]:
        """In a GPU program, the inputs a module's forward() is handed (its parameters
        without a default) live where the module does; what the others hold comes from
        the program's calls, as for any function."""
        env = self.param_env(fn)
        positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        required = positional[:len(positional) - len(fn.args.defaults)]
        # (`range(startp + 1, endp)`: positions and counts, Python ints)
        counts = {n.id for c in ast.walk(fn) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Name) and c.func.id == "range"
                  for a in c.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        for name in required:
            if name != "self" and not FLAG_PARAM_RE.search(name) and name not in counts:
                env.setdefault(name, GPU)
        # (`labels=None`, `attention_mask=None`: optional inputs, tensors when given)
        for name, d in zip(positional[len(required):], fn.args.defaults, strict=True):
            if isinstance(d, ast.Constant) and d.value is None and name not in counts \
                    and not FLAG_PARAM_RE.search(name) and not HOST_INPUT_RE.search(name) \
                    and _used_as_tensor(fn, name):
                env.setdefault(name, GPU)
        return env

    def param_env(self, fn: FuncDef) -> dict[str, str]:
        """What the program's callers pass for the function's parameters."""
        ctx = self.ctx
        env: dict[str, str] = {}
        qn = ctx.index.qualname_of(fn)
        for name in param_names(fn):
            if name in {"self", "cls"}:
                continue
            k = ctx.kind_of_resolved(ctx.program.param(ctx.key, qn, name))
            if k is not None:
                env[name] = k
        return env

    def class_env(self, cls: ast.ClassDef) -> dict[str, str]:
        """Kinds of ``self.x`` attributes assigned in the class's methods."""
        cached = self._class_env.get(cls)
        if cached is not None:
            return cached
        ctx = self.ctx
        env: dict[str, str] = {}
        self._class_env[cls] = env
        from pitstop.lint.walk import State

        st = State(env={})
        summary = ctx.program.klass(ctx.key, cls.name)
        on_gpu = ctx.gpu_program and ctx.program.class_is(ctx.key, cls.name, "module")
        for node in ast.walk(cls):
            if on_gpu and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in {"register_buffer", "register_parameter"} \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                    and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                # a buffer moves with its module: on the GPU once the model is there
                env[f"self.{node.args[0].value}"] = GPU
                continue
            if isinstance(node, ast.Assign) and all(
                    (dotted(t) or "").startswith("self.") for t in node.targets):
                if isinstance(node.value, ast.Constant) and node.value.value is None:
                    continue  # `self._network = None`: a placeholder, filled elsewhere
                k = ctx.values.kind(node.value, st)
                for t in node.targets:
                    name = dotted(t) or ""
                    if k is None and summary is not None and name[5:] in summary.attrs:
                        k2 = ctx.kind_of_resolved(ctx.program.resolve(ctx.key, summary.attrs[name[5:]]))
                        if k2 is not None:
                            env[name] = k2
                            continue
                    if k is None and isinstance(node.value, ast.Call) and (
                            callee_tail(node.value)[:1].isupper()) and name in ctx.index.model_names:
                        env[name] = MODEL
                        continue
                    if k is not None:
                        env[name] = k
        return env


# What code reads off a tensor it was handed (an object with other attributes is no tensor)
TENSOR_ATTRS = HOST_METHODS | MASK_METHODS | META_ATTRS | frozenset({
    "view", "reshape", "float", "long", "int", "half", "double", "bool", "byte", "to", "cuda",
    "sum", "mean", "max", "min", "argmax", "argmin", "any", "all", "abs", "exp", "log",
    "unsqueeze", "squeeze", "expand", "expand_as", "view_as", "reshape_as", "repeat",
    "transpose", "permute", "contiguous", "flatten", "masked_fill", "masked_fill_",
    "type_as", "clone", "detach", "new_zeros", "new_ones", "new_full", "new_tensor",
    "gather", "index_select", "scatter", "scatter_", "chunk", "split", "narrow", "t",
    "matmul", "bmm", "mul", "add", "sub", "div", "pow", "sqrt", "softmax", "log_softmax",
    "sigmoid", "tanh", "relu", "clamp", "fill_", "zero_", "copy_", "nonzero", "cumsum",
    "sort", "topk", "norm", "data"})


def _used_as_tensor(fn: FuncDef, name: str) -> bool:
    """Does ``fn`` use its parameter ``name`` as a tensor (`valid_ids[i]`, `mask.float()`)
    and never as an option: a bare truth test (`if scale:`, `a if mems else b`) or a
    comparison with a number (`temp == 1.0`)?"""
    def is_it(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    tensor = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and is_it(node.value):
            tensor = True
        elif isinstance(node, ast.Attribute) and is_it(node.value):
            if node.attr not in TENSOR_ATTRS:
                return False  # `emb_decoder.apply_fuse`: an object of its own
            tensor = True
        elif _tests_it_as_option(node, is_it):
            return False
    return tensor


def _tests_it_as_option(node: ast.AST, is_it: Callable[[ast.AST | None], bool]) -> bool:
    """A bare truth test of the name (`if scale:`, `a if mems else b`, `x and y`,
    `not flag`) or a comparison of it with a number (`temp == 1.0`)."""
    if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
        return is_it(node.test)
    if isinstance(node, ast.BoolOp):
        return any(is_it(v) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return is_it(node.operand)
    if isinstance(node, ast.Compare):
        sides = (node.left, *node.comparators)
        return any(is_it(x) for x in sides) and any(
            isinstance(x, ast.Constant) and isinstance(x.value, (int, float))
            and not isinstance(x.value, bool) for x in sides)
    return False
