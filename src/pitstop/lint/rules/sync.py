"""LT001 sync: a host-device synchronisation on every iteration of a hot loop."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import LOSS_RE, callee_tail, dotted, kwarg, qualname, root_name
from pitstop.lint.context import CPU, GPU, MASK, OR, ModuleContext, State
from pitstop.lint.loops import is_env_step
from pitstop.lint.values import stringish
from pitstop.lint.values_kinds import CREATORS, DERIVED

CODE = "LT001"

HOST_COPY = {"item": "copies a GPU scalar to the host",
             "cpu": "copies a GPU tensor to the host",
             "numpy": "copies a GPU tensor to the host",
             "tolist": "copies a GPU tensor to the host as a Python list"}
# Experiment loggers that turn a tensor into a Python number right away (TensorBoard's
# SummaryWriter.add_scalar calls .item(); wandb / mlflow convert values too).
LOGGER_CALLS = frozenset({"add_scalar", "add_scalars", "log_metric", "log_metrics", "log",
                          "log_dict"})
# Owners of .log()/.log_metric(s)() that are experiment trackers (not Lightning's lazy
# self.log, not torch.log).
LOGGER_OWNER_RE = re.compile(r"(^|\.)(wandb|run|writer|logger|mlflow|tracker|experiment|"
                             r"accelerator|neptune|comet|aim|tb|tb_writer|summary_writer)$",
                             re.IGNORECASE)
# Progress bars that format what they are given (tqdm's set_postfix calls str() on it).
PROGRESS_CALLS = frozenset({"set_postfix", "set_description", "set_postfix_str"})
NONZERO = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                     "nonzero_static"})
CONVERTERS = frozenset({"float", "int", "bool", "complex", "str", "repr"})
MATH_FUNCS = frozenset({"isfinite", "isnan", "isinf", "sqrt", "log", "exp", "floor", "ceil",
                        "fabs"})


# Functions that hand an RL environment its action: the host needs it every env step.
ACTION_FN_RE = re.compile(r"^(select|get|choose|sample|take)_actions?$|^act$|^policy_act$",
                          re.IGNORECASE)
# Calls that need host data by design: the environment's step, writing images and arrays
SINKS = frozenset({"save_image", "imsave", "imwrite", "save", "savez", "add_image",
                   "add_images", "add_figure", "add_audio", "add_video", "imshow"})


def _read_for_the_host(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """Is this read the point of the code: the action handed to `envs.step(...)` (directly
    or through the name it is stored in), or data written out (`save_image(x.cpu())`)?"""
    if st.func is not None and ACTION_FN_RE.search(st.func.name):
        return True
    parents = ctx.parents
    child, parent = node, parents.get(node)
    for _ in range(8):
        if parent is None:
            return False
        if isinstance(parent, ast.Call) and child is not parent.func and (
                callee_tail(parent) in SINKS or is_env_step(parent)):
            return True
        if isinstance(parent, ast.Assign):
            names = {n.id for t in parent.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            return bool(names) and _stepped_with(ctx, st, names)
        if isinstance(parent, ast.stmt):
            return False
        child, parent = parent, parents.get(parent)
    return False


def _stepped_with(ctx: ModuleContext, st: State, names: set[str]) -> bool:
    """Does the hot loop hand one of ``names`` to the environment's step?"""
    loop = st.hot.node if st.hot is not None else None
    if not isinstance(loop, (ast.For, ast.While, ast.AsyncFor)):
        return False
    return any(isinstance(node, ast.Call) and is_env_step(node)
               and any(isinstance(a, ast.Name) and a.id in names for a in node.args)
               for node in ast.walk(loop))


def _report(ctx: ModuleContext, node: ast.AST, st: State, what: str, sync: str) -> None:
    assert st.hot is not None
    if _read_for_the_host(ctx, node, st):
        return
    via = f" {st.via}" if st.via else ""
    origin = ctx.device_origin
    if st.hot.kind == "forward" and origin is not None:
        # (forward's inputs are taken to be where the module is: an inference)
        wait = ("when the module runs on the GPU, the CPU waits there for the GPU to "
                "finish all queued work")
        what = what.replace("a GPU scalar", "a scalar that may live on the GPU").replace(
            "a GPU tensor", "a tensor that may live on the GPU")
    elif origin is not None and not origin.certain:
        wait = (f"when the program runs on its accelerator ({origin.what}, "
                f"{origin.path}:{origin.line}), the CPU waits there for the GPU to finish "
                "all queued work")
        what = what.replace("a GPU scalar", "a scalar that may live on the GPU").replace(
            "a GPU tensor", "a tensor that may live on the GPU")
    else:
        wait = "the CPU waits for the GPU to finish all queued work"
    ctx.report(
        CODE, node,
        f"`{ctx.segment(node)}` {what} on every iteration of {st.hot.describe}{via}; "
        f"{wait}. Keep the value on the device and read it every N steps "
        f"(`if step % log_every == 0:`).",
        evidence=(("sync", sync), ("loop_line", st.hot.line), ("loop_kind", st.hot.kind)),
        # a forward() is per batch only in a program that trains (not in a library's
        # tree); a model the imports do not show built (by a registry) counts as well
        condition=f"+train_program{OR}train_run" if st.hot.kind == "forward" else "",
    )


def _gpu(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    if isinstance(node, ast.Starred):
        node = node.value
    return ctx.kind(node, st) in (GPU, MASK) or ctx.values.tuple_has_gpu(node, st)


# A GPU index tensor named as a mask (`pos_mask`, `bool_masked_pos`) is a boolean one:
# float tensors cannot index, and integer positions are named `idx`/`ids`/`indices`.
MASK_NAME_RE = re.compile(r"(^|_)(mask|masks|masked)(_|$)", re.IGNORECASE)
POSITIONS_NAME_RE = re.compile(r"(^|_)(idx|ids|id|index|indices|inds|ind|num|len|lens|pos|"
                               r"positions?|tokens?|labels?)(_|$)", re.IGNORECASE)


def _mask(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """A boolean GPU mask as the only index: known to be one, or a GPU tensor named as
    one (beside other indices, `x[arange(n), mask_pos]`, a name decides nothing)."""
    k = ctx.kind(node, st)
    if k == MASK:
        return True
    name = (dotted(node) or "").rsplit(".", 1)[-1]
    return k == GPU and bool(MASK_NAME_RE.search(name)) and not POSITIONS_NAME_RE.search(name)


def _optional_check(ctx: ModuleContext, test: ast.expr) -> bool:
    """`if self.cri_pix:` of an attribute set to None where the option is off, and else to
    an object a call builds (`build_loss(opt).to(device)`): a test of whether the object
    exists, not of a tensor's value."""
    name = dotted(test)
    if name is None or not name.startswith("self.") or name.count(".") != 1:
        return False
    assigns = ctx.index.assigns_by_name.get(name, ())
    nones = [a for a in assigns if isinstance(a.value, ast.Constant) and a.value.value is None]
    return bool(nones) and all(isinstance(a.value, ast.Call) for a in assigns
                               if a not in nones)


def _legacy_item(ctx: ModuleContext, node: ast.Subscript, st: State) -> bool:
    """`loss.data[0]`: before PyTorch 0.4 a loss was a 1-element tensor and this read its
    value into a Python number (what `.item()` does today)."""
    value = node.value
    return isinstance(node.ctx, ast.Load) and isinstance(value, ast.Attribute) \
        and value.attr == "data" and isinstance(node.slice, ast.Constant) \
        and node.slice.value == 0 and LOSS_RE.search(dotted(value.value) or "") is not None \
        and ctx.kind(value.value, st) in (GPU, DERIVED)


def _mixed_mask_index(ctx: ModuleContext, index: ast.AST, st: State) -> bool:
    """`x[:, mask]`, `x[idx, mask]`: a boolean GPU mask among several indices."""
    if not isinstance(index, ast.Tuple):
        return False
    # (a mask by name only beside whole slices, `x[mask, :]`: beside another index
    # tensor, `x[arange(n), mask_pos]`, it is most likely positions)
    others = [e for e in index.elts if not isinstance(e, ast.Slice)
              and not (isinstance(e, ast.Constant) and e.value is ...)]
    return any(ctx.kind(e, st) == MASK or (len(others) == 1 and _mask(ctx, e, st))
               for e in others)


def _host_tensor(ctx: ModuleContext, node: ast.AST, st: State) -> bool:
    """A tensor that lives on the host: `torch.zeros(n)` with no device, or `.cpu()`."""
    name = dotted(node)
    if name is None or "." in name:
        return False
    for a in ctx.index.scoped_assigns.get((st.func, name), ()):
        v = a.value
        if isinstance(v, ast.Call):
            qn = qualname(v.func, ctx.aliases) or ""
            tail = callee_tail(v)
            if (qn.startswith("torch.") and tail in CREATORS and not tail.endswith("_like")
                    and kwarg(v, "device") is None) or tail == "cpu":
                # `zeros_like(x)` lives where `x` does
                return True
    return False


# Post-processing of an evaluation's outputs (non-maximum suppression, box decoding) and
# the decoding of sequences (greedy or beam search, token by token): their results are
# read on the host by design, not a per-step habit.
POSTPROCESS_RE = re.compile(r"nms|non_max|suppress|post_?process|decode|to_coco|detections?$|"
                            r"beam|greedy|^_*search$|translate_batch", re.IGNORECASE)


def check_hot(ctx: ModuleContext, node: ast.AST, st: State) -> None:
    if st.hot is not None and (st.hot.generates or st.hot.measures):
        return  # decoding reads every token on the host anyway; a benchmark syncs to time
    if st.hot is not None and st.hot.kind == "eval" and st.func is not None \
            and st.via and POSTPROCESS_RE.search(st.func.name):
        return
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if not isinstance(t, ast.Subscript):
                continue
            if _host_tensor(ctx, t.value, st) and ctx.kind(node.value, st) in (GPU, MASK, DERIVED):
                _report(ctx, node, st, f"stores a GPU tensor into the host tensor "
                        f"`{ctx.segment(t.value)}`, copying it to the host", "setitem")
            elif _mixed_mask_index(ctx, t.slice, st) and ctx.kind(t.value, st) in (GPU, MASK):
                _report(ctx, node, st, "indexes with a boolean GPU mask next to other indices, "
                        "which the host must turn into positions (a sync)", "boolean-mask")
            elif isinstance(node, ast.AugAssign) and ctx.kind(t.slice, st) == MASK \
                    and ctx.kind(t.value, st) != CPU:
                # `l[mask] -= 1` reads `l[mask]` first: a gather whose size the host needs
                _report(ctx, node, st, "updates the elements a boolean GPU mask selects, "
                        "reading them first (`x[mask]`): the host must learn their number",
                        "boolean-mask")
            else:  # `mask[i, lengths[i]:] = 0`: the bounds of a store are read as well
                for sub in ast.walk(t.slice):
                    if isinstance(sub, ast.Slice):
                        check_hot(ctx, sub, st)
        return
    if isinstance(node, ast.Slice):
        for part in (node.lower, node.upper, node.step):
            if part is not None and ctx.kind(part, st) in (GPU, MASK):
                _report(ctx, part, st, "is a GPU tensor used as a slice bound, which the host "
                        "must read", "slice")
                return
        return
    if isinstance(node, ast.Call):
        _check_call(ctx, node, st)
    elif isinstance(node, ast.FormattedValue):
        if ctx.kind(node.value, st) in (GPU, MASK):
            _report(ctx, node.value, st, "formats a GPU tensor into a string, copying it to the "
                    "host", "format")
    elif isinstance(node, ast.Subscript):
        if _legacy_item(ctx, node, st):
            _report(ctx, node, st, "reads a GPU scalar the pre-0.4 way (today `.item()`), "
                    "copying it to the host", "item")
            return
        # (a tensor that a GPU mask can index is on the GPU itself, known or not)
        if isinstance(node.ctx, ast.Load) and (
                (_mask(ctx, node.slice, st) and ctx.kind(node.value, st) != CPU
                 and root_name(node.value) not in st.batch)
                or (_mixed_mask_index(ctx, node.slice, st)
                    and ctx.kind(node.value, st) in (GPU, MASK))):
            _report(ctx, node, st, "indexes with a boolean GPU mask, whose result size the host "
                    "must read back", "boolean-mask")
    elif isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Mod) and stringish(node.left) and _gpu(ctx, node.right, st):
            _report(ctx, node, st, "formats a GPU tensor into a string with `%`, copying it "
                    "to the host", "format")
    elif isinstance(node, ast.IfExp):
        if ctx.kind(node.test, st) in (GPU, MASK) and not _optional_check(ctx, node.test):
            _report(ctx, node.test, st, "is a GPU tensor used as the condition of `a if c else "
                    "b`, which needs its value on the host", "control-flow")
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        for cond in (c for gen in node.generators for c in gen.ifs):
            if ctx.kind(cond, st) in (GPU, MASK):  # `[x for x in xs if score > t]`
                _report(ctx, cond, st, "is a GPU tensor used as a comprehension's `if`, which "
                        "needs its value on the host", "control-flow")
    elif isinstance(node, (ast.If, ast.While, ast.Assert)):
        if _optional_check(ctx, node.test):
            return
        word = {ast.If: "`if`", ast.While: "`while`", ast.Assert: "`assert`"}[type(node)]
        _report(ctx, node.test, st, f"is a GPU tensor used as a Python {word} condition, which "
                "needs its value on the host", "control-flow")


def _check_call(ctx: ModuleContext, node: ast.Call, st: State) -> None:
    func = node.func
    tail = callee_tail(node)
    if isinstance(func, ast.Attribute):
        recv = ctx.kind(func.value, st)
        if recv == DERIVED and tail in HOST_COPY:
            # computed from GPU tensors by a function we cannot see (timm's accuracy())
            _report(ctx, node, st, HOST_COPY[tail].replace("a GPU", "what is most likely a "
                                                           "GPU"), tail)
            return
        if recv in (GPU, MASK):
            if tail in HOST_COPY:
                _report(ctx, node, st, HOST_COPY[tail], tail)
                return
            if tail == "to" and node.args and ctx.device_kind(node.args[0]) == "cpu":
                nb = kwarg(node, "non_blocking")
                if nb is None or not (isinstance(nb.value, ast.Constant) and nb.value.value is True):
                    _report(ctx, node, st, "copies a GPU tensor to the host", "to-cpu")
                return
            if tail in NONZERO:
                _report(ctx, node, st, "returns a tensor whose size depends on the data, so the "
                        "host must read it back", tail)
                return
        if tail == "format" and isinstance(func.value, ast.Constant) and (
                any(_gpu(ctx, a, st) for a in node.args)
                or any(ctx.kind(k.value, st) in (GPU, MASK) for k in node.keywords)):
            _report(ctx, node, st, "formats a GPU tensor into a string, copying it to the host",
                    "format")
            return
        if tail in PROGRESS_CALLS and _logs_gpu_value(ctx, node, st):
            _report(ctx, node, st, "hands a GPU tensor to a progress bar, which formats it "
                    "into a string", "progress")
            return
    qn = qualname(func, ctx.aliases) or ""
    if qn == "torch.cuda.synchronize" or (tail == "synchronize" and "cuda" in (dotted(func) or "")):
        _report(ctx, node, st, "blocks the CPU until the GPU is idle", "synchronize")
        return
    if qn == "torch.cuda.empty_cache":
        _report(ctx, node, st, "synchronizes and returns cached blocks that the next step will "
                "allocate again", "empty_cache")
        return
    if tail in LOGGER_CALLS and isinstance(func, ast.Attribute) and (
            tail.startswith("add_") or LOGGER_OWNER_RE.search(dotted(func.value) or "")) \
            and not qn.startswith(("torch.", "numpy.", "math.")) and _logs_gpu_value(ctx, node, st):
        _report(ctx, node, st, "hands a GPU tensor to a logger, which converts it to a Python "
                "number", "logger")
        return
    if isinstance(func, ast.Name):
        if tail in CONVERTERS and node.args and _gpu(ctx, node.args[0], st):
            _report(ctx, node, st, f"converts a GPU tensor to a Python {tail}, copying it to "
                    "the host", tail)
            return
        if tail in {"max", "min"} and node.args and not node.keywords \
                and tail not in ctx.index.functions and any(
                    ctx.kind(a, st) in (GPU, MASK) for a in node.args
                    if not isinstance(a, ast.Starred)):
            # (Python's max() compares the tensor's elements, or the tensors, with `>`:
            # each answer a GPU boolean that `if` reads on the host -- also against a
            # number: `max(num_pos.sum(), 1)`)
            _report(ctx, node, st, f"compares GPU values with the Python builtin `{tail}()`, "
                    "reading each comparison on the host", tail)
            return
        if tail == "print" and any(_gpu(ctx, a, st) for a in node.args
                                   if not isinstance(a, ast.JoinedStr)):
            _report(ctx, node, st, "prints a GPU tensor, copying it to the host", "print")
            return
    if qn.startswith("math.") and tail in MATH_FUNCS and node.args \
            and ctx.kind(node.args[0], st) in (GPU, MASK):
        _report(ctx, node, st, f"calls `math.{tail}` on a GPU tensor, which converts it to a "
                "Python float on the host", f"math.{tail}")
        return
    if qn.startswith("torch.") and tail in NONZERO | {"where"} and node.args \
            and ctx.kind(node.args[0], st) in (GPU, MASK):
        if tail == "where" and len(node.args) != 1:
            return
        _report(ctx, node, st, "returns a tensor whose size depends on the data, so the host "
                "must read it back", tail)
        return
    if qn in {"numpy.array", "numpy.asarray"} and node.args \
            and ctx.kind(node.args[0], st) in (GPU, MASK):
        _report(ctx, node, st, "copies a GPU tensor to the host", "numpy")
        return
    sizes = _size_args(node, qn, tail)
    if any(_reduced_on_gpu(ctx, a, st) for a in sizes):
        _report(ctx, node, st, "is given a size reduced on the GPU (`lengths.max()`), "
                "which the host must read before it can allocate", "size")


# Factories whose positional arguments are sizes or bounds: a GPU tensor there is read on
# the host (`torch.arange(lengths.max())`, `range(n_frames.max())`). `full`'s second
# argument is its fill value, which stays a tensor argument.
SIZE_FACTORIES = frozenset({"arange", "zeros", "ones", "empty", "rand", "randn", "randint",
                            "randperm", "eye", "linspace", "full"})


REDUCTIONS = frozenset({"max", "min", "sum", "amax", "amin"})


def _reduced_on_gpu(ctx: ModuleContext, node: ast.expr, st: State, depth: int = 0) -> bool:
    """A size computed on the GPU: `lengths.max()`, `dur.sum(-1).max() + 1`, or a name
    assigned one in this function (`max_len = lengths.max()`). Only reductions count: an
    attribute of a model or a tensor's shape is a host number."""
    if isinstance(node, ast.BinOp):
        return _reduced_on_gpu(ctx, node.left, st, depth) or \
            _reduced_on_gpu(ctx, node.right, st, depth)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in REDUCTIONS:
        return ctx.kind(node, st) in (GPU, MASK)
    if isinstance(node, ast.Name) and depth == 0:
        assigns = ctx.index.scoped_assigns.get((st.func, node.id), ())
        return len(assigns) == 1 and assigns[0].value is not None and _reduced_on_gpu(
            ctx, assigns[0].value, st, 1)
    return False


def _size_args(node: ast.Call, qn: str, tail: str) -> list[ast.expr]:
    args = [a for a in node.args if not isinstance(a, ast.Starred)]
    if isinstance(node.func, ast.Name) and tail == "range":
        return args
    if not (qn.startswith("torch.") and qn.count(".") == 1 and tail in SIZE_FACTORIES):
        return []
    return args[:1] if tail == "full" else args


def _logs_gpu_value(ctx: ModuleContext, node: ast.Call, st: State) -> bool:
    values: list[ast.expr] = [*node.args, *(k.value for k in node.keywords)]
    for v in list(values):
        if isinstance(v, ast.Dict):
            values.extend(x for x in v.values if x is not None)
    return any(ctx.kind(v, st) in (GPU, MASK) for v in values)
