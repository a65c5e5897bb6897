"""Where a tensor that LT012 sees moved to the GPU comes from: the torch factory it was
built by (also through names, arithmetic and pass-through methods), and whether NumPy data
uploaded every iteration is something the GPU could make or keep (constants, random
draws, tables an object computed once) rather than data that has to go up."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import (
    callee_tail,
    kwarg,
    last_name,
    qualname,
    root_name,
)
from pitstop.lint.context import ModuleContext, State
from pitstop.lint.loops import ENV_RE, is_env_step

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
PASS_THROUGH = frozenset({"unsqueeze", "expand", "expand_as", "view", "reshape", "float", "long",
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
               if (a.end_lineno or a.lineno) < name.lineno and a.value is not None]
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
                        and (numpy or host_data(ctx, n.value) is not None
                             or (isinstance(n.value, (ast.Name, ast.Subscript))
                                 and tensor_creator(ctx, n.value) is None)):
                    # (`ids[i, :n] = s`: a row of the batch as it is; not
                    # `counts[:k] = draws[:k]` of another factory's tensor)
                    return None
            if numpy and isinstance(n, ast.Call) and any(
                    isinstance(a, ast.Name) and a.id == name.id for a in n.args):
                return None
    return last.value


def tensor_creator(ctx: ModuleContext, node: ast.AST, st: State | None = None) -> ast.Call | None:
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
            left = tensor_creator(ctx, node.left, st)
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
        if isinstance(node.func, ast.Attribute) and (tail in PASS_THROUGH or (
                tail == "to" and len(node.args) == 1 and not node.keywords
                and torch_dtype(node.args[0], ctx.aliases))):
            node = node.func.value  # (`.to(torch.bool)`: a dtype, the tensor stays put)
            continue
        return None
    return None


TORCH_DTYPES = frozenset({"bool", "float", "float32", "float64", "float16", "bfloat16", "half",
                          "double", "long", "int", "int64", "int32", "int16", "int8", "uint8"})


def torch_dtype(node: ast.AST, aliases: dict[str, str]) -> bool:
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
    if any((a.end_lineno or a.lineno) < node.lineno for a in assigned):
        value = _unfilled_value(ctx, node, numpy=True)
        return value is not None and (_made_on_the_host(ctx, value, batch) or (
            _names_a_table(node.id) and root_name(value) not in batch))
    # a parameter: what its name says it is (`cls_weights`, `anchors`: made once;
    # `points`, `feats`: data); a name from elsewhere: unknown
    params = {a.arg for a in (*scope.args.posonlyargs, *scope.args.args,
                              *scope.args.kwonlyargs)} if scope is not None else set()
    return node.id in params and (_names_a_table(node.id) or (
        scope is not None and _handed_host_tables(ctx, scope, node.id)))


def _handed_host_tables(ctx: ModuleContext, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                        param: str) -> bool:
    """`_extract_into_tensor(self.sqrt_alphas_cumprod, t, shape)`: calls of module
    function ``fn`` in its module hand ``param`` a NumPy table that an object computed
    once in its ``__init__`` (a diffusion schedule), which the GPU could keep instead of
    receiving it again on every call (other calls may hand it other arrays)."""
    if ctx.index.class_of.get(fn) is not None or fn not in ctx.index.tree.body:
        return False
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    pos = names.index(param) if param in names else None
    calls = [c for c in ctx.index.calls_by_tail.get(fn.name, ())
             if isinstance(c.func, ast.Name) and c.func.id == fn.name]
    for call in calls:
        arg = next((k.value for k in call.keywords if k.arg == param), None)
        if arg is None and pos is not None and pos < len(call.args):
            arg = call.args[pos]
        if _init_table(ctx, call, arg, 0):
            return True
    return False


def _init_table(ctx: ModuleContext, at: ast.AST, node: ast.AST | None, depth: int) -> bool:
    """Is ``node`` (`self.alphas_cumprod`) an attribute that the class of the method around
    ``at`` sets only in ``__init__``, from NumPy computations or arithmetic on other such
    attributes, and never from data it reads?"""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self") or depth > 4:
        return False
    owner = ctx.index.owner.get(at) if not isinstance(at, ast.FunctionDef) else at
    cls = ctx.index.class_of.get(owner) if owner is not None else None
    if cls is None:
        return False
    values = [(fn, stmt.value) for fn in cls.body if isinstance(fn, ast.FunctionDef)
              for stmt in ast.walk(fn) if isinstance(stmt, ast.Assign)
              and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                      and t.value.id == "self" and t.attr == node.attr for t in stmt.targets)]
    if not values or any(fn.name != "__init__" for fn, _ in values):
        return False
    init = values[0][0]
    for _, value in values:
        calls = [c for c in ast.walk(value) if isinstance(c, ast.Call)]
        if any(READS_RE.search(callee_tail(c)) for c in calls):
            return False
        numpy = any((qualname(c.func, ctx.aliases) or "").startswith("numpy.") for c in calls)
        attrs = [a for a in ast.walk(value) if isinstance(a, ast.Attribute)
                 and isinstance(a.value, ast.Name) and a.value.id == "self"]
        if not numpy and not (attrs and all(_init_table(ctx, init, a, depth + 1)
                                            for a in attrs)):
            return False
    return True


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


def forward_input(ctx: ModuleContext, target: ast.AST, st: State) -> bool:
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


def host_data(ctx: ModuleContext, node: ast.AST) -> str | None:
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
        if tensor_creator(ctx, node) is not None:
            return "torch on the CPU"
    return None
