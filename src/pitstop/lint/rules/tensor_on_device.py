"""LT012 tensor-on-device: a tensor created on the CPU and then moved to the GPU inside a
hot loop, where ``device=`` at creation would do."""

from __future__ import annotations

import ast
import weakref

from pitstop.lint.astutil import (
    callee_tail,
    dotted,
    kwarg,
    move_target,
    param_names,
    qualname,
)
from pitstop.lint.context import GPU, ModuleContext, State
from pitstop.lint.model import SAFE, Edit, Fix
from pitstop.lint.rules._tensor_sources import (
    CREATORS,
    DATA_CREATORS,
    PASS_THROUGH,
    forward_input,
    host_data,
    tensor_creator,
    torch_dtype,
)

CODE = "LT012"


def _type_of_gpu_tensor(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """`mel.type()` of a GPU tensor (`torch.FloatTensor(n).zero_().type(mel.type())`: the
    CUDA type of the input, so the CPU tensor is copied to the GPU)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "type" and not node.args and not node.keywords):
        return False
    inner = node.func.value
    return ctx.kind(inner, st) == GPU or forward_input(ctx, inner, st)


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
    source = host_data(ctx, moved)
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
    creator = tensor_creator(ctx, inner, st)
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
        if target is None or (ctx.kind(target, st) != GPU and not forward_input(ctx, target, st)):
            return
        value = None
    else:
        dev = kwarg(node, "device")
        target = move_target(node)
        if target is None or (not ctx.devices.is_gpu(target) and ctx.kind(target, st) != GPU
                              and not forward_input(ctx, target, st)):
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
    return target is not None and not torch_dtype(target, aliases)


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
                elif isinstance(inner.func, ast.Attribute) and inner.func.attr in PASS_THROUGH:
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
    creator = tensor_creator(ctx, node.args[pos], st)
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
                 if (a.end_lineno or a.lineno) < node.lineno]
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
        creator = tensor_creator(tctx, value) if value is not None else None
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
