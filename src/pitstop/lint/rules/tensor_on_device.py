"""LT012 tensor-on-device: a tensor created on the CPU and then moved to the GPU inside a
hot loop, where ``device=`` at creation would do."""

from __future__ import annotations

import ast
import re
import weakref

from pitstop.lint.astutil import (
    callee_tail,
    dotted,
    kwarg,
    last_name,
    move_target,
    param_names,
    qualname,
    root_name,
)
from pitstop.lint.context import GPU, ModuleContext, State
from pitstop.lint.loops import ENV_RE, is_env_step
from pitstop.lint.model import SAFE, Edit, Fix

CODE = "LT012"
CREATORS = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                      "randint", "arange", "linspace", "logspace", "eye", "randperm", "scalar_tensor",
                      # window functions (`torch.hann_window(n_fft).to(x.device)` per stft)
                      "hann_window", "hamming_window", "blackman_window", "bartlett_window",
                      "kaiser_window"})


# factories handed data rather than sizes
DATA_CREATORS = frozenset({"tensor", "as_tensor"})


# Legacy typed constructors: `torch.LongTensor(range(n))` builds on the CPU too.
LEGACY = frozenset({"LongTensor", "FloatTensor", "IntTensor", "ByteTensor", "BoolTensor",
                    "DoubleTensor", "HalfTensor", "ShortTensor", "CharTensor", "Tensor"})
_PASS_THROUGH = frozenset({"unsqueeze", "expand", "expand_as", "view", "reshape", "float", "long",
                           "int", "bool", "half", "repeat", "t", "flip", "squeeze", "type",
                           # in-place fills hand back the (CPU) tensor they filled
                           "fill_", "zero_", "random_", "normal_", "uniform_", "bernoulli_",
                           "exponential_", "geometric_", "index_fill_", "scatter_",
                           # arithmetic and shape methods: computed on the CPU as well
                           # (`mask.div(num_neigh).to(x.device)`)
                           "div", "mul", "add", "sub", "div_", "mul_", "add_", "sub_",
                           "triu", "tril", "cumsum", "exp", "log", "sqrt", "pow", "abs",
                           "clamp", "masked_fill", "masked_fill_", "contiguous", "permute",
                           "transpose", "triu_", "tril_"})


# torch functions whose result lives where their (first) input does
_COMPUTED_FROM = frozenset({"exp", "log", "pow", "sin", "cos", "sqrt", "rsqrt", "cat", "stack",
                            "outer", "meshgrid", "flip", "cumsum", "sigmoid", "tanh", "abs",
                            "clamp", "reciprocal", "square", "polar", "complex", "triu",
                            "tril", "diag", "diag_embed", "repeat_interleave"})
# wrappers that hand back the tensor they are given (`Variable(t)`, pre-0.4 autograd)
_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def _unfilled_value(ctx: ModuleContext, name: ast.Name, *, numpy: bool = False
                    ) -> ast.expr | None:
    """The value last assigned to ``name`` above its use, unless the lines between fill it
    with host data (`seq[i, :n] = torch.LongTensor(s)`): a buffer filled from data is a
    batch built on the host, not a constant a factory could have made on the GPU. A NumPy
    array (``numpy``) also counts as filled when a call gets it (`maximum_path_c(path, ...)`)
    or writes into it by item."""
    scope = ctx.scope_of(name)
    assigns = [a for a in ctx.index.scoped_assigns.get((scope, name.id), ())
               if a.lineno < name.lineno and a.value is not None]
    if not assigns:
        return None
    last = max(assigns, key=lambda a: a.lineno)
    start, end = last.lineno, name.lineno
    body = scope.body if scope is not None else ctx.tree.body
    for stmt in body:
        for n in ast.walk(stmt):
            if not start < getattr(n, "lineno", 0) < end:
                continue
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                       and t.value.id == name.id for t in targets) \
                        and (numpy or _host_data(ctx, n.value) is not None
                             or (isinstance(n.value, (ast.Name, ast.Subscript))
                                 and _creator(ctx, n.value) is None)):
                    # (`ids[i, :n] = s`: a row of the batch as it is; not
                    # `counts[:k] = draws[:k]` of another factory's tensor)
                    return None
            if numpy and isinstance(n, ast.Call) and any(
                    isinstance(a, ast.Name) and a.id == name.id for a in n.args):
                return None
    return last.value


def _creator(ctx: ModuleContext, node: ast.AST, st: State | None = None) -> ast.Call | None:
    """The torch factory call a moved expression is built from: `torch.zeros(n)`, also
    inside `(torch.ones(k) * i)` or `torch.LongTensor(r).unsqueeze(0).expand_as(x)`."""
    for _ in range(12):
        if isinstance(node, ast.Name):  # `idx = torch.empty(n, dtype=long)` ... `idx.cuda()`
            value = _unfilled_value(ctx, node)
            if value is None:
                return None
            node = value
            continue
        if isinstance(node, ast.BinOp):
            left = _creator(ctx, node.left, st)
            node = left if left is not None else node.right
            continue
        if isinstance(node, ast.Compare):  # `(labels[None] == labels[:, None]).float()`
            node = node.left
            continue
        if isinstance(node, ast.Subscript):  # `torch.eye(d)[None, :, :]`
            node = node.value
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
        if qn == "torch.from_numpy" and node.args and _numpy_upload_avoidable(
                ctx, node.args[0], st):
            return node  # `torch.from_numpy(np.eye(3))`: a torch factory could build it there
        if qn in _WRAPPERS and len(node.args) == 1:
            node = node.args[0]
            continue
        if qn.startswith("torch.") and tail in _COMPUTED_FROM and node.args:
            node = node.args[0]  # `torch.exp(torch.arange(n) * -k)`: computed on the CPU too
            continue
        if isinstance(node.func, ast.Attribute) and (tail in _PASS_THROUGH or (
                tail == "to" and len(node.args) == 1 and not node.keywords
                and _torch_dtype(node.args[0], ctx.aliases))):
            node = node.func.value  # (`.to(torch.bool)`: a dtype, the tensor stays put)
            continue
        return None
    return None


TORCH_DTYPES = frozenset({"bool", "float", "float32", "float64", "float16", "bfloat16", "half",
                          "double", "long", "int", "int64", "int32", "int16", "int8", "uint8"})


def _torch_dtype(node: ast.AST, aliases: dict[str, str]) -> bool:
    """`torch.float32`, `th.bool`: a dtype, which `.to(...)` converts to without moving."""
    qn = qualname(node, aliases) or ""
    return qn.startswith("torch.") and qn.rsplit(".", 1)[-1] in TORCH_DTYPES


# NumPy constructors of data that a torch factory builds as well (on the GPU, with `device=`)
_NUMPY_FACTORIES = frozenset({"eye", "identity", "zeros", "ones", "full", "arange", "linspace",
                              "tri", "triu", "tril"})
_NUMPY_LITERAL = frozenset({"array", "asarray"})  # ... from a literal or a range
_NUMPY_REPEATS = frozenset({"repeat", "tile"})


# words of names of arrays made once and reused (anchors, lookup tables, windows, bases)
_TABLE_WORDS = frozenset({"anchor", "anchors", "table", "basis", "window", "grid", "priors"})


def _names_a_table(name: str) -> bool:
    """`anchors`, `mel_basis`, `cls_weights` (class weights): made once; not
    `sample_weights` or `priorities` (per-batch data)."""
    words = set(name.lower().split("_"))
    return bool(words & _TABLE_WORDS) or (
        bool(words & {"cls", "class", "classes"}) and bool(words & {"weight", "weights"}))


def _numpy_upload_avoidable(ctx: ModuleContext, node: ast.AST, st: State | None) -> bool:
    """Is the NumPy data uploaded every iteration something the GPU could make or keep:
    constants (`np.eye(3)`), tables built from settings (`mel_fn(sr, n_fft)`), random
    draws (`np.random.choice`), weights handed in (`cls_weights`), host results of GPU
    values (`metric(pred.cpu().numpy())`)? Not data read from storage or delivered by the
    loader (it has to go up), nor an array a host routine filled in place."""
    if _numpy_constant(ctx, node):
        return True
    batch = st.batch if st is not None else set()
    if isinstance(node, ast.Call) and (qualname(node.func, ctx.aliases) or "").startswith(
            "numpy.random."):
        return True  # `torch.from_numpy(np.random.binomial(1, p, (B, T)))`: a GPU draw would do
    while True:  # `cls_weights[None].astype(np.float32)`: the array it is a view of
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _NUMPY_VIEWS:
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Name) or node.id in batch:
        return False
    scope = ctx.scope_of(node)
    assigned = ctx.index.scoped_assigns.get((scope, node.id), ())
    if any(a.lineno < node.lineno for a in assigned):
        value = _unfilled_value(ctx, node, numpy=True)
        return value is not None and (_made_on_the_host(ctx, value, batch) or (
            _names_a_table(node.id) and root_name(value) not in batch))
    # a parameter: what its name says it is (`cls_weights`, `anchors`: made once;
    # `points`, `feats`: data); a name from elsewhere: unknown
    params = {a.arg for a in (*scope.args.posonlyargs, *scope.args.args,
                              *scope.args.kwonlyargs)} if scope is not None else set()
    return node.id in params and _names_a_table(node.id)


_NUMPY_VIEWS = frozenset({"astype", "reshape", "copy", "transpose", "flatten", "ravel"})
# what reads data rather than making it
READS_RE = re.compile(r"memmap|load|read|fromfile|frombuffer|genfromtxt|decode|open|imread",
                      re.IGNORECASE)


def _made_on_the_host(ctx: ModuleContext, value: ast.expr, batch: set[str]) -> bool:
    """Is ``value`` made by the program rather than read: a constant, a random draw, a
    table computed from settings, or a host copy of GPU results (`.cpu()` inside)?"""
    if _numpy_constant(ctx, value):
        return True
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    if any(READS_RE.search(callee_tail(c)) or is_env_step(c)
           or ENV_RE.search(last_name(c.func) or "") for c in calls):
        return False  # (an environment's observation has to go up every step)
    if any((qualname(c.func, ctx.aliases) or "").startswith("numpy.random.") for c in calls):
        return True  # random draws a torch generator could make on the device
    # `metric(pred.cpu().numpy(), target)`: host results of GPU values, which the GPU
    # could compute where they are
    return any(callee_tail(c) == "cpu" for c in calls)


def _numpy_constant(ctx: ModuleContext, node: ast.AST) -> bool:
    """Is ``node`` NumPy data made from constants (`np.eye(3)`, `np.array([1, 0, 0])`,
    `np.repeat(range(n_way), n_query)`, through `.astype()` or an index), which a torch
    factory could build on the GPU? Data computed on the host (metrics, decoded batches)
    has to be copied; this is not that."""
    for _ in range(8):
        if isinstance(node, ast.Name):
            value = _unfilled_value(ctx, node, numpy=True)
            if value is None:
                return False
            node = value
            continue
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute)
                                               and node.attr == "T"):
            node = node.value
            continue
        if not isinstance(node, ast.Call):
            return False
        qn = qualname(node.func, ctx.aliases) or ""
        if qn.startswith("numpy."):
            tail = qn.rsplit(".", 1)[-1]
            if tail in _NUMPY_FACTORIES:
                return True
            first = node.args[0] if node.args else None
            if tail in _NUMPY_LITERAL:
                return first is not None and _literal_data(first)
            if tail in _NUMPY_REPEATS:
                return first is not None and (_literal_data(first) or _numpy_constant(ctx, first))
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in {
                "astype", "reshape", "copy", "T", "transpose", "flatten", "ravel"}:
            node = node.func.value
            continue
        return False
    return False


def _literal_data(node: ast.AST) -> bool:
    """`[1, 0, 0]`, `((1, 0), (0, 1))`, `range(n)`: data written in the program."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        return True
    return isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) or (isinstance(e, ast.UnaryOp) and isinstance(
            e.operand, ast.Constant)) or _literal_data(e) for e in node.elts)


def _forward_input(ctx: ModuleContext, target: ast.AST, st: State) -> bool:
    """`.to(images)` in a module's forward() (or a helper it calls), `images` one of its
    arguments: the input of a model that runs on the GPU is on the GPU."""
    if st.hot is None or st.hot.kind != "forward" or not ctx.gpu_program:
        return False
    if isinstance(target, ast.Attribute) and target.attr == "device":
        target = target.value  # `.to(x.device)`: the device of the input `x`
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


def _type_of_gpu_tensor(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """`mel.type()` of a GPU tensor (`torch.FloatTensor(n).zero_().type(mel.type())`: the
    CUDA type of the input, so the CPU tensor is copied to the GPU)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "type" and not node.args and not node.keywords):
        return False
    inner = node.func.value
    return ctx.kind(inner, st) == GPU or _forward_input(ctx, inner, st)


def _check_typed(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    """`Tensor(np.random.normal(...))` and `torch.ones(n).type(Tensor)` with `Tensor` a
    CUDA tensor type (`torch.cuda.FloatTensor if cuda else torch.FloatTensor`): host data
    built and then copied every iteration. True when this call is of that form."""
    devices = ctx.devices
    moved: ast.AST | None = None
    if devices.gpu_tensor_type(node.func):
        moved = node.args[0] if len(node.args) == 1 and not node.keywords else None
    elif isinstance(node.func, ast.Attribute) and node.func.attr == "type" and node.args \
            and (devices.gpu_tensor_type(node.args[0]) or _type_of_gpu_tensor(ctx, node.args[0], st)):
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
    if not isinstance(node, ast.Call) or _check_typed(ctx, node, st):
        return
    if _check_moved_by_helper(ctx, node, st) or not isinstance(node.func, ast.Attribute):
        return
    tail = node.func.attr
    if tail not in {"to", "cuda", "type_as"}:
        return
    inner = node.func.value
    direct = True  # `torch.zeros(n).to(d)`; else the creator is deeper in the expression
    creator = _creator(ctx, inner, st)
    maker: str | None = None  # the helper that builds it, when another function does
    if creator is None:
        found = _returned_creator(ctx, inner, st)
        if found is None:
            if tail != "type_as" and _to_gpu(ctx, node, st) \
                    and _invariant_host_data(ctx, inner, st):
                _report_invariant(ctx, node, st)
            return
        creator, maker = found
        direct = False
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
        target = move_target(node)
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
    if maker is not None:
        how = (f"copies a tensor that {maker} builds on the CPU to the GPU on every iteration "
               f"of {st.hot.describe}; build it there with `device=`")
    else:
        how = ("copies NumPy data to the GPU on every iteration of "
               f"{st.hot.describe}; build it once outside (a buffer) or with a torch factory "
               "and `device=`" if ctail == "from_numpy" else
               f"builds a tensor on the CPU and copies it to the GPU on every iteration of "
               f"{st.hot.describe}; create it there with `device=`")
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` {how}.",
        fix=fix, evidence=(("loop_line", st.hot.line), ("creator", ctail)),
        condition=_default_device_condition(ctx, inner),
    )


_MOVED_PARAM: weakref.WeakKeyDictionary[ast.AST, int | None] = weakref.WeakKeyDictionary()


def _moved_param(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]
                 ) -> int | None:
    """For a helper whose only job is a move to the GPU (`def get_variable(self, x):
    return Variable(x).cuda(self.gpu) if self.cuda else Variable(x)`), the position of
    the parameter it hands back moved; None for any other function. (Asked once per
    function: the question comes from every call in a hot loop.)"""
    if fn in _MOVED_PARAM:
        return _MOVED_PARAM[fn]
    found = _find_moved_param(fn, aliases) if len(fn.body) <= 6 else None
    _MOVED_PARAM[fn] = found
    return found


def _moves_to_device(call: ast.Call, aliases: dict[str, str]) -> bool:
    """`.cuda(...)`, or `.to(d)` / `.to(device=d)` with `d` no dtype (`.to(torch.float32)`
    and `.to(memory_format=...)` move nothing)."""
    if call.func.attr == "cuda":  # type: ignore[attr-defined]
        return True
    target = move_target(call)
    return target is not None and not _torch_dtype(target, aliases)


def _find_moved_param(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]
                      ) -> int | None:
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if params and params[0] in {"self", "cls"}:
        params = params[1:]
    returns = [n for stmt in fn.body for n in ast.walk(stmt)
               if isinstance(n, ast.Return) and n.value is not None]
    if not params:
        return None
    for ret in returns:
        value = ret.value
        values = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
        for v in values:
            if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                    and v.func.attr in {"cuda", "to"} and _moves_to_device(v, aliases)):
                continue
            inner = v.func.value
            while isinstance(inner, ast.Call):  # `Variable(x)`, `x.float()`
                if callee_tail(inner) == "Variable" and len(inner.args) == 1:
                    inner = inner.args[0]
                elif isinstance(inner.func, ast.Attribute) and inner.func.attr in _PASS_THROUGH:
                    inner = inner.func.value
                else:
                    break
            if isinstance(inner, ast.Name) and inner.id in params:
                return params.index(inner.id)
    return None


def _check_moved_by_helper(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    """`self.get_torch_variable(torch.randn(b, 100, 1, 1))`, the helper returning its
    argument `.cuda()`'d: a tensor built on the CPU and moved every iteration, the move
    hidden in a function of the program. True when this call is of that form."""
    if not node.args or (isinstance(node.func, ast.Attribute) and node.func.attr in {
            "to", "cuda", "type_as"}):
        return False
    # (resolve the callee only when an argument can be a factory: a call, or a name that
    # may hold one -- not for every `f(x.size(0), 3)` of a hot loop)
    if not any(isinstance(a, (ast.Call, ast.Name)) for a in node.args):
        return False
    target = ctx.function_target(node, st)
    if target is None:
        return False
    tctx, fn = target
    pos = _moved_param(fn, tctx.aliases)
    if pos is None or pos >= len(node.args) or isinstance(node.args[pos], ast.Starred):
        return False
    creator = _creator(ctx, node.args[pos], st)
    if creator is None or callee_tail(creator) not in CREATORS - DATA_CREATORS:
        return False  # (`to_cuda(torch.Tensor(batch_items))`: a batch, which has to go up)
    assert st.hot is not None
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` builds a tensor on the CPU (`{callee_tail(creator)}`) and "
        f"`{fn.name}` ({tctx.path}:{fn.lineno}) copies it to the GPU on every iteration of "
        f"{st.hot.describe}; create it there with `device=`.",
        evidence=(("loop_line", st.hot.line), ("creator", callee_tail(creator)),
                  ("mover", f"{tctx.path}:{fn.lineno}")),
        condition=_default_device_condition(ctx, creator),
    )
    return True


def _invariant_host_data(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """`labels[idx_train]` with `labels` and `idx_train` loaded once at the top of the
    module, outside any loop, and never moved to the device there: the same host data,
    uploaded again on every iteration."""
    if not (isinstance(node, ast.Name) or (
            isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and isinstance(node.slice, ast.Name))):
        return False
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    if st.hot is None or st.hot.kind == "forward" or any(n in st.batch for n in names):
        return False
    index = ctx.index
    for name in names:
        if name in index.import_locals or name in index.functions or name in index.classes:
            return False
        if st.func is not None and (index.scoped_assigns.get((st.func, name))
                                    or name in param_names(st.func)):
            return False  # (a local or a parameter: it may change from call to call)
        assigns = index.scoped_assigns.get((None, name), [])
        if not assigns or any(_in_loop(ctx, a) or not isinstance(a.value, ast.Call)
                              for a in assigns):
            return False  # (loaded by a call: not `d2l = sys.modules[__name__]`)
        if any(isinstance(a.value, ast.Call) and callee_tail(a.value) in {"to", "cuda"}
               for a in assigns):
            return False  # `features = features.to(device)`: already on the device
        if ctx.kind(ast.Name(id=name), st) not in (None, "cpu"):
            return False
    return True


def _to_gpu(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    """`.cuda()`, or `.to(device)` with a GPU device."""
    if callee_tail(node) == "cuda":
        return True
    target = move_target(node)
    return target is not None and (ctx.devices.is_gpu(target) or ctx.kind(target, st) == GPU)


def _in_loop(ctx: ModuleContext, node: ast.AST) -> bool:
    """Is ``node`` inside a loop of its own function (or of the module's body)?"""
    return isinstance(ctx.enclosing(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                                           ast.AsyncFunctionDef)), (ast.For, ast.AsyncFor, ast.While))


def _report_invariant(ctx: ModuleContext, node: ast.Call, st: State) -> None:
    assert st.hot is not None
    data = ctx.segment(node.func.value)  # type: ignore[attr-defined]
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` copies the same host data (`{data}`, loaded once at the top "
        f"of the module) to the GPU on every iteration of {st.hot.describe}; move it to the "
        "device once, before the loop.",
        evidence=(("loop_line", st.hot.line), ("creator", "loop-invariant")),
    )


def _returned_creator(ctx: ModuleContext, node: ast.AST, st: State
                      ) -> tuple[ast.Call, str] | None:
    """`diffusion.sample_timesteps(n).to(device)` where the method only returns
    `torch.randint(...)`: the CPU factory every return of the called function builds, and
    where that function is (`sample_timesteps` (ddpm.py:37))."""
    pos: int | None = None  # `mask, start_mask = causal_mask(n)`: an item of what it returns
    if isinstance(node, ast.Name):
        above = [a for a in ctx.index.scoped_assigns.get((st.func, node.id), [])
                 if a.lineno < node.lineno]
        a = max(above, key=lambda a: a.lineno) if above else None
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1
                and isinstance(a.targets[0], ast.Tuple) and isinstance(a.value, ast.Call)) \
                or any(isinstance(e, ast.Starred) for e in a.targets[0].elts):
            return None
        names = [dotted(e) for e in a.targets[0].elts]
        if node.id not in names:
            return None
        pos, node = names.index(node.id), a.value
    if not isinstance(node, ast.Call):
        return None
    target = ctx.function_target(node, st)
    if target is None:
        return None
    tctx, fn = target
    returns = tctx.index.returns.get(fn, [])
    found: ast.Call | None = None
    for ret in returns:
        value = ret.value
        if pos is not None:
            value = value.elts[pos] if isinstance(value, ast.Tuple) and len(value.elts) > pos \
                else None
        creator = _creator(tctx, value) if value is not None else None
        if creator is None:
            return None
        found = found or creator
    if found is None:
        return None
    return found, f"`{fn.name}` ({tctx.path}:{found.lineno})"


INT_DTYPES = frozenset({"long", "int", "int64", "int32", "int16", "int8", "uint8", "bool", "short"})


def _default_device_condition(ctx: ModuleContext, creator: ast.Call) -> str:
    """Unless the program makes the GPU the default device (then the factory builds there):
    `set_default_device("cuda")` for every factory; `set_default_tensor_type(
    "torch.cuda.FloatTensor")` for those that build floating-point tensors."""
    tail = callee_tail(creator)
    if tail == "from_numpy":  # the default device never applies to NumPy data
        return ""
    dtype = kwarg(creator, "dtype")
    floating = tail in {"Tensor", "FloatTensor"} or (
        tail in CREATORS and tail not in {"randint", "randperm", "arange"}
        and (dtype is None or (qualname(dtype.value, ctx.aliases) or "").rsplit(".", 1)[-1]
             not in INT_DTYPES))
    return "-default_device_gpu -default_float_gpu" if floating else "-default_device_gpu"
