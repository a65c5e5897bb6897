"""LT012 tensor-on-device: a tensor created on the CPU and then moved to the GPU inside a
hot loop, where ``device=`` at creation would do."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, kwarg, qualname
from pitstop.lint.context import GPU, ModuleContext, State
from pitstop.lint.model import SAFE, Edit, Fix

CODE = "LT012"
CREATORS = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                      "randint", "arange", "linspace", "logspace", "eye", "randperm", "scalar_tensor"})


# Legacy typed constructors: `torch.LongTensor(range(n))` builds on the CPU too.
LEGACY = frozenset({"LongTensor", "FloatTensor", "IntTensor", "ByteTensor", "BoolTensor",
                    "DoubleTensor", "HalfTensor", "ShortTensor", "CharTensor", "Tensor"})
_PASS_THROUGH = frozenset({"unsqueeze", "expand", "expand_as", "view", "reshape", "float", "long",
                           "int", "bool", "half", "repeat", "t", "flip", "squeeze", "type",
                           # in-place fills hand back the (CPU) tensor they filled
                           "fill_", "zero_", "random_", "normal_", "uniform_", "bernoulli_",
                           "exponential_", "geometric_", "index_fill_", "scatter_"})


# torch functions whose result lives where their (first) input does
_COMPUTED_FROM = frozenset({"exp", "log", "pow", "sin", "cos", "sqrt", "rsqrt", "cat", "stack",
                            "outer", "meshgrid", "flip", "cumsum", "sigmoid", "tanh", "abs",
                            "clamp", "reciprocal", "square", "polar", "complex"})


def _creator(ctx: ModuleContext, node: ast.AST) -> ast.Call | None:
    """The torch factory call a moved expression is built from: `torch.zeros(n)`, also
    inside `(torch.ones(k) * i)` or `torch.LongTensor(r).unsqueeze(0).expand_as(x)`."""
    for _ in range(12):
        if isinstance(node, ast.Name):  # `idx = torch.empty(n, dtype=long)` ... `idx.cuda()`
            value = ctx.index.value_above(ctx.scope_of(node), node.id, node.lineno)
            if value is None:
                return None
            node = value
            continue
        if isinstance(node, ast.BinOp):
            left = _creator(ctx, node.left)
            node = left if left is not None else node.right
            continue
        if isinstance(node, ast.Compare):  # `(labels[None] == labels[:, None]).float()`
            node = node.left
            continue
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            node = node.elts[0]
            continue
        if isinstance(node, ast.ListComp):
            node = node.elt
            continue
        if not isinstance(node, ast.Call):
            return None
        qn = qualname(node.func, ctx.aliases) or ""
        tail = callee_tail(node)
        if qn.startswith("torch.") and (tail in CREATORS or tail in LEGACY) \
                and kwarg(node, "device") is None:
            return node
        if qn.startswith("torch.") and tail in _COMPUTED_FROM and node.args:
            node = node.args[0]  # `torch.exp(torch.arange(n) * -k)`: computed on the CPU too
            continue
        if isinstance(node.func, ast.Attribute) and tail in _PASS_THROUGH:
            node = node.func.value
            continue
        return None
    return None


def _forward_input(ctx: ModuleContext, target: ast.AST, st: State) -> bool:
    """`.to(images)` in a module's forward() (or a helper it calls), `images` one of its
    arguments: the input of a model that runs on the GPU is on the GPU."""
    if st.hot is None or st.hot.kind != "forward" or not ctx.gpu_program:
        return False
    if not isinstance(target, ast.Name) or st.func is None:
        return False
    args = st.func.args
    return target.id in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} \
        and target.id != "self"


def _host_data(ctx: ModuleContext, node: ast.AST) -> str | None:
    """What builds ``node`` on the host, when it plainly does: "NumPy" (`np.zeros(n)`,
    `0.75 * np.random.normal(...)`), "a Python list", or a CPU torch factory."""
    for _ in range(4):
        if isinstance(node, ast.BinOp):
            node = node.left if isinstance(node.left, (ast.Call, ast.BinOp, ast.Subscript)) \
                else node.right
        elif isinstance(node, ast.Subscript):  # `np.eye(10)[labels]`
            node = node.value
        else:
            break
    if isinstance(node, (ast.List, ast.ListComp)):
        return "a Python list"
    if isinstance(node, ast.Call):
        qn = qualname(node.func, ctx.aliases) or ""
        if qn.startswith("numpy."):
            return "NumPy"
        if _creator(ctx, node) is not None:
            return "torch on the CPU"
    return None


def _check_typed(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    """`Tensor(np.random.normal(...))` and `torch.ones(n).type(Tensor)` with `Tensor` a
    CUDA tensor type (`torch.cuda.FloatTensor if cuda else torch.FloatTensor`): host data
    built and then copied every iteration. True when this call is of that form."""
    devices = ctx.devices
    moved: ast.AST | None = None
    if devices.gpu_tensor_type(node.func):
        moved = node.args[0] if len(node.args) == 1 and not node.keywords else None
    elif isinstance(node.func, ast.Attribute) and node.func.attr == "type" and node.args \
            and devices.gpu_tensor_type(node.args[0]):
        moved = node.func.value
    if moved is None:
        return False
    source = _host_data(ctx, moved)
    if source is None:
        return True
    assert st.hot is not None
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` builds its data on the host ({source}) and copies it to the GPU "
        f"on every iteration of {st.hot.describe}; build it there: `torch.zeros/ones/randn/"
        f"rand(..., device=...)`.",
        evidence=(("loop_line", st.hot.line), ("creator", source)),
    )
    return True


def check_hot(ctx: ModuleContext, node: ast.AST, st: State) -> None:
    if not isinstance(node, ast.Call) or _check_typed(ctx, node, st) \
            or not isinstance(node.func, ast.Attribute):
        return
    tail = node.func.attr
    if tail not in {"to", "cuda", "type_as"}:
        return
    inner = node.func.value
    direct = True  # `torch.zeros(n).to(d)`; else the creator is deeper in the expression
    creator = _creator(ctx, inner)
    if creator is None:
        return
    if creator is not inner:
        direct = False
    inner = creator
    ctail = callee_tail(inner)
    value: str | None
    if tail == "cuda":
        if node.args and not (isinstance(node.args[0], ast.Constant)
                              and isinstance(node.args[0].value, int)):
            value = None
        else:
            value = f'"cuda:{node.args[0].value}"' if node.args else '"cuda"'  # type: ignore[attr-defined]
        if any(kw.arg not in {"non_blocking"} for kw in node.keywords):
            value = None
    elif tail == "type_as":  # `torch.zeros(n).type_as(x)`: x's dtype *and* device
        target = node.args[0] if node.args else None
        if target is None or (ctx.kind(target, st) != GPU and not _forward_input(ctx, target, st)):
            return
        value = None
    else:
        dev = kwarg(node, "device")
        target = dev.value if dev is not None else (node.args[0] if node.args else None)
        if target is None or (not ctx.devices.is_gpu(target) and ctx.kind(target, st) != GPU
                              and not _forward_input(ctx, target, st)):
            return  # (`.to(images)` moves to the device of the tensor `images`)
        # `.to(images)` takes the device *and the dtype* of the tensor `images`: no
        # `device=images` rewrite for that
        simple = (len(node.args) == 1 and dev is None and ctx.device_kind(target) == GPU) or (
            not node.args and dev is not None)
        value = ast.unparse(target) if simple and all(
            kw.arg in {"device", "non_blocking"} for kw in node.keywords) else None
    fix = None
    if direct and ctail in CREATORS and value is not None and not any(
            kw.arg is None for kw in inner.keywords):
        line = node.func.lineno
        col = ctx.char_column(line, node.func.col_offset)
        fix = Fix(SAFE, f"create the tensor with device={value}",
                  (Edit("unwrap_to_device", line, col, tail, name="device", value=value),))
    assert st.hot is not None
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` builds a tensor on the CPU and copies it to the GPU on every "
        f"iteration of {st.hot.describe}; create it there with `device=`.",
        fix=fix, evidence=(("loop_line", st.hot.line), ("creator", ctail)),
        condition=_default_device_condition(ctx, inner),
    )


INT_DTYPES = frozenset({"long", "int", "int64", "int32", "int16", "int8", "uint8", "bool", "short"})


def _default_device_condition(ctx: ModuleContext, creator: ast.Call) -> str:
    """Unless the program makes the GPU the default device (then the factory builds there):
    `set_default_device("cuda")` for every factory; `set_default_tensor_type(
    "torch.cuda.FloatTensor")` for those that build floating-point tensors."""
    tail = callee_tail(creator)
    dtype = kwarg(creator, "dtype")
    floating = tail in {"Tensor", "FloatTensor"} or (
        tail in CREATORS and tail not in {"randint", "randperm", "arange"}
        and (dtype is None or (qualname(dtype.value, ctx.aliases) or "").rsplit(".", 1)[-1]
             not in INT_DTYPES))
    return "-default_device_gpu -default_float_gpu" if floating else "-default_device_gpu"
