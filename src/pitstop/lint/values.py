"""The value model: what an expression evaluates to as the code runs, statement by
statement -- a GPU tensor (a model's output, a loss, a ``.to(device)`` result and what is
computed from it), a boolean GPU mask, a host value (``.item()`` results, literals,
shapes, ``torch.tensor`` without a device), a model, a loader, an instance of a class of
the program, or unknown (None).

Kinds are short strings so that environments stay cheap to copy: ``gpu``, ``mask``,
``cpu``, ``model``, ``loader`` / ``loader@MODULE|ID`` (a DataLoader built at a known
place), ``obj@MODULE|Class``.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    ITERATION_METHODS,
    LOSS_RE,
    MODEL_EXACT,
    MODEL_RE,
    callee_tail,
    dotted,
    iter_shallow,
    kwarg,
    last_name,
    move_target,
    param_names,
    qualname,
    root_name,
    target_names,
)
from pitstop.lint.devices import CPU as DEV_CPU
from pitstop.lint.devices import GPU as DEV_GPU
from pitstop.lint.index import MODEL_FACTORY_RE, FuncDef, ModuleIndex
from pitstop.lint.loaders import DROP_INS
from pitstop.lint.summary import BATCH_WRAPPERS

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

GPU = "gpu"  # a tensor on an accelerator
MASK = "mask"  # a boolean tensor on an accelerator
CPU = "cpu"  # certainly a host value (Python number, CPU tensor, numpy array)
MODEL = "model"  # a module (callable; its outputs are GPU tensors in a GPU program)
LOADER = "loader"  # a DataLoader or another iterable of batches

HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "size", "dim", "numel",
                          "ndimension", "element_size", "nelement", "get_device",
                          "data_ptr", "is_contiguous", "stride", "storage_offset", "__len__"})
META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad",
                        "layout", "names", "is_leaf"})
MASK_METHODS = frozenset({"bool", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge",
                          "le", "logical_and", "logical_or", "logical_not", "isclose", "any",
                          "all", "isneginf", "isposinf", "signbit"})
# Methods that keep a boolean mask a mask (its shape or place changes, not its values).
MASK_KEEPING = frozenset({"unsqueeze", "expand", "expand_as", "view", "view_as", "reshape",
                          "squeeze", "permute", "transpose", "flatten", "repeat", "contiguous",
                          "t", "clone", "detach", "logical_not", "__invert__", "flip"})
MODEL_METHODS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers",
                           "modules", "children", "state_dict", "named_modules", "train",
                           "eval", "zero_grad", "apply", "register_forward_hook",
                           "load_state_dict", "requires_grad_"})
CREATORS = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                      "randint", "arange", "linspace", "eye", "zeros_like", "ones_like",
                      "empty_like", "full_like", "rand_like", "randn_like", "from_numpy",
                      "logspace", "randperm", "scalar_tensor"})
# Calls on tensors whose result is no tensor.
NOT_DERIVED = frozenset({"isinstance", "len", "print", "str", "repr", "format", "append", "extend",
                         "update", "add_scalar", "log", "info", "debug", "warning", "set_postfix",
                         "save", "dump", "id", "type", "hasattr", "getattr", "setattr",
                         "backward", "step", "zero_grad", "clip_grad_norm_", "clip_grad_value_",
                         "set_description", "write", "add_batch", "copy_", "record"})
TORCH_MASKS = frozenset({"isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
                         "logical_and", "logical_or", "logical_not", "isclose", "any", "all"})


# `build_model(cfg)`, `create_network()`, `get_backbone(...)`: functions that make a model
BUILDER_RE = re.compile(r"^(build|create|get|make|load|init|setup|construct|instantiate|unwrap|"
                        r"wrap|prepare)_?"
                        r"(model|net|network|backbone|generator|discriminator|classifier|"
                        r"encoder|decoder|unet|transformer|policy)s?$", re.IGNORECASE)


PLACED = "!gpu"  # a loader whose batches arrive on the accelerator (accelerate, Fabric)
# A value computed from GPU tensors by a function the analysis cannot see: probably a GPU
# tensor. Reading it on the host (`.item()`, `.cpu()`) syncs; formatting it may not.
DERIVED = "derived"
# a Python list that GPU tensors were appended to (`all_b.append(b[idx])`): not a tensor
# itself (`if all_b:` reads its length), but `torch.cat(all_b)` is a GPU tensor
GPU_LIST = "gpu-list"
# An optimizer's `self.param_groups`, and one group of it: `group["params"]` holds the
# model's parameters (on the GPU in a GPU program); its other entries are settings
PARAM_GROUPS = "param-groups"
PARAM_GROUP = "param-group"
# ... and its `self.state` (a dict keyed by parameter), one parameter's entry of it: its
# buffers (`exp_avg`) live with the parameter, its `step` count is a host number
PARAM_STATE = "param-state"
PARAM_STATE_ENTRY = "param-state-entry"
# Model methods that compute on their inputs: what they return is the model's output
COMPUTING_METHOD_RE = re.compile(r"loss|forward|predict|infer|decode|encode|logit|score|"
                                 r"compute|calc|embed|sample|generate|output", re.IGNORECASE)
# An average meter (`AverageMeter().update(val, n)`) fed GPU tensors keeps its sums on the GPU:
# the walk notes it under the meter's name plus this suffix; these are its GPU reads
METER = "#meter"
METER_READS = frozenset({"avg", "val", "sum", "average", "mean", "global_avg", "median",
                         "value", "total"})
# Methods of an accelerator object that hand back what they are given (placed).
PLACERS = frozenset({"prepare", "setup_dataloaders", "prepare_data_loader"})
COLLECTIVES = frozenset({"gather", "all_gather", "gather_for_metrics", "reduce", "all_reduce",
                         "reduce_mean", "reduce_tensor", "pad_across_processes",
                         "all_reduce_mean", "sync_tensor", "reduce_value", "concat_all_gather",
                         "gather_tensor", "mean", "sum", "detach", "float"})


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


def meter_key(node: ast.AST) -> str | None:
    """The name a meter is noted under: `top1`, `self.meters.loss`, or a meter kept in a
    dict by a literal key (`train_meters["top1"]`)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        owner = dotted(node.value)
        return f"{owner}[{node.slice.value!r}]" if owner else None
    return dotted(node)


def stringish(node: ast.AST) -> bool:
    """A string expression: `"%f"`, `'%10s' * 2 + '%10.4g'`, an f-string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        return stringish(node.left) or stringish(node.right)
    return False


def is_loader_kind(k: str | None) -> bool:
    return k is not None and k.startswith(LOADER)


def loader_key(k: str | None) -> str | None:
    """``MODULE|ID`` of a known loader's kind (``loader@MODULE|ID``, placed or not), or
    ``ID`` alone for a loader of the module at hand (``loader@L:C``); None otherwise."""
    if k is None or not k.startswith(f"{LOADER}@"):
        return None
    return k[len(LOADER) + 1:].removesuffix(PLACED)


def loader_ref(k: str | None) -> tuple[str, str] | None:
    """(module, loader id) of a loader kind that names its module (``loader@MODULE|ID``)."""
    key = loader_key(k)
    if key is None or "|" not in key:
        return None
    module, _, lid = key.partition("|")
    return module, lid


def is_model(k: str | None) -> bool:
    """A module: ``model``, or ``model@MODULE|Class`` when its class is known."""
    return k is not None and k.startswith(MODEL)


def placed(k: str | None) -> bool:
    return k is not None and k.endswith(PLACED)


class ValueModel:
    """Kinds of the expressions of one module."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self._return_memo: dict[tuple[int, tuple[tuple[str, str], ...]], str | None] = {}
        self._lambdas_open: set[int] = set()  # lambdas being evaluated (no recursion)

    # ------------------------------------------------------------------ models
    def is_model_callee(self, func: ast.AST, st: State) -> bool:
        ctx = self.ctx
        if isinstance(func, ast.Attribute) and (func.attr == "forward"
                                                or func.attr.startswith("forward_")):
            func = func.value  # `model.forward(x)`, `model.forward_emb(...)`: the model called
        if isinstance(func, ast.Subscript) and isinstance(func.slice, ast.Constant) \
                and isinstance(func.slice.value, str):
            func = func.value  # `self.model["generator"](x)`: one of a dict of models
            if dotted(func) == "self":
                return False
        name = dotted(func)
        if name is None:
            return False
        if is_model(st.env.get(name)) or name in ctx.index.model_names:
            return True
        k = st.env.get(name)
        if k is not None and (k in (GPU, MASK, CPU) or k.startswith(("obj@", LOADER))):
            return False  # a known value that is not a model
        if name == "self" and st.func is not None:
            cls = ctx.index.class_of.get(st.func)
            return cls is not None and (cls.name in ctx.index.module_classes or
                                        ctx.program.class_is(ctx.key, cls.name, "module"))
        tail = name.rsplit(".", 1)[-1]
        return bool(MODEL_RE.search(tail.lower())) or tail in MODEL_EXACT

    def looks_like_module(self, node: ast.AST, st: State) -> bool:
        """``Net()``, ``resnet50()``, ``model``: something that is a module, not a tensor."""
        if isinstance(node, ast.Call):
            tail = callee_tail(node)
            if class_name(tail) and tail not in {"Tensor", "DataLoader"}:
                return True
            if tail in {"to", "cuda", "half", "float", "bfloat16"} and isinstance(
                    node.func, ast.Attribute):
                return self.looks_like_module(node.func.value, st)
            if MODEL_FACTORY_RE.search(qualname(node.func, self.ctx.aliases) or "") or \
                    BUILDER_RE.search(tail):
                return True
            return is_model(self._program_kind(node, st))
        if isinstance(node, (ast.Name, ast.Attribute)):
            return is_model(st.env.get(dotted(node) or "")) or self.is_model_callee(node, st)
        return False

    def module_kind(self, node: ast.AST, st: State, moved: ast.AST) -> str:
        """The kind of a module moved with `.to()`/`.cuda()`: its class kept when known."""
        k = self.kind(node, st)
        if is_model(k):
            return k  # type: ignore[return-value]
        if isinstance(node, ast.Call):
            prog = self._program_kind(node, st)
            if is_model(prog):
                return prog  # type: ignore[return-value]
        return MODEL

    # ------------------------------------------------------------------ kinds
    def kind(self, node: ast.AST, st: State) -> str | None:
        """What ``node`` evaluates to: GPU, MASK, CPU, MODEL, a loader or object kind, or
        None (unknown)."""
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name is not None and name in st.env:
                return st.env[name]
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
            # a dict of GPU tensors (`{"d": d_loss, "g": g_loss}`): its items are on the GPU
            return GPU if any(v is not None and self.kind(v, st) in (GPU, MASK)
                              for v in node.values[:16]) else CPU
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

    def _call_kind(self, node: ast.Call, st: State) -> str | None:
        ctx = self.ctx
        func = node.func
        if isinstance(func, ast.Call) and LOSS_RE.search(callee_tail(func)) and any(
                self.kind(a, st) in (GPU, MASK) for a in node.args):
            return GPU  # `nn.L1Loss()(pred, target)`: a loss built and applied at once
        tail = callee_tail(node)
        if tail.startswith(("is_", "has_")):
            return CPU  # `x.is_complex()`, `has_torch_function(args)`: Python booleans
        if ctx.devices.gpu_tensor_type(func) or (tail == "type" and node.args and isinstance(
                func, ast.Attribute) and ctx.devices.gpu_tensor_type(node.args[0])):
            return GPU  # `Tensor(np.ones(n))`, `imgs.type(Tensor)` (Tensor: torch.cuda.FloatTensor)
        if isinstance(func, ast.Attribute):
            recv = self.kind(func.value, st)
            if tail == "to":
                target = move_target(node)
                dk = ctx.devices.kind(target, st.func) if target is not None else None
                if dk is None and target is not None and self._device_of_gpu_value(target, st):
                    dk = DEV_GPU  # `mask.to(center.device)` of a GPU value's device
                if dk == DEV_GPU or (dk == "maybe" and ctx.gpu_program):
                    if recv == MASK or self._names_bool_tensor(func.value, st):
                        return MASK  # a boolean mask moved is still a mask
                    return self.module_kind(func.value, st, node) if is_model(recv) or \
                        self.looks_like_module(func.value, st) else GPU
                if dk == DEV_CPU:
                    return CPU
                if target is not None and dk is None:
                    other = self.kind(target, st)
                    if other in (GPU, MASK):
                        return GPU
                return recv if recv in (GPU, MASK, CPU) or is_model(recv) else None
            if tail == "cuda":
                return self.module_kind(func.value, st, node) if is_model(recv) or \
                    self.looks_like_module(func.value, st) else GPU
            if tail == "cpu":  # a tensor or a module brought to the host
                return CPU
            if tail == "type" and not node.args and not node.keywords:
                return CPU  # `x.type()`: the name of its type, a string
            if tail in {"parameters", "buffers"} and is_model(recv) and ctx.gpu_program:
                return GPU_LIST  # the model's tensors, on its device
            if tail in MODEL_METHODS and tail not in {"train", "eval", "apply", "float", "half"}:
                return None  # model.parameters(), .state_dict(): no tensor
            if is_model(recv) and tail in {"train", "eval", "float", "half", "bfloat16",
                                           "requires_grad_", "to_empty"}:
                return recv
            if recv in (GPU, MASK):
                if tail in HOST_METHODS or tail == "keys":
                    return CPU
                if tail in MASK_METHODS or (recv == MASK and tail in MASK_KEEPING):
                    return MASK
                return GPU
            if recv == DERIVED:
                return CPU if tail in HOST_METHODS else (None if tail in NOT_DERIVED else DERIVED)
            if is_model(recv) and tail in {"forward", "generate", "__call__", "module",
                                           "compute"}:
                # (a torchmetrics metric is a module: `.compute()` hands back its state,
                # on the device the metric was moved to)
                return GPU if ctx.gpu_program else None
            if tail in PLACERS and len(node.args) == 1:
                inner = self.kind(node.args[0], st)
                if is_loader_kind(inner) and not placed(inner):
                    return f"{inner}{PLACED}"
                return inner
            if recv is not None and recv.startswith("obj@"):
                # a method of an object of the program: what it returns, where known
                # (`losses = computer.compute(pred, y)`, a dict of GPU losses)
                return self.return_kind_of_call(node, st) if st.per_batch else None
            if tail in COLLECTIVES and node.args and any(
                    self.kind(a, st) in (GPU, MASK, DERIVED) for a in node.args
                    if not isinstance(a, ast.Starred)):
                return GPU  # accelerator.gather(loss), dist_util.reduce_mean(loss)
        qn = qualname(func, ctx.aliases) or ""
        if tail == "Variable" and node.args and qn in {"torch.autograd.Variable", "Variable",
                                                       "torch.autograd.variable.Variable"}:
            return self.kind(node.args[0], st)  # the pre-0.4 wrapper: the tensor itself
        if tail == "clip_grad_norm_" and ctx.gpu_program:
            return GPU  # the total norm, a tensor on the parameters' device
        if tail in {"DistributedDataParallel", "DDP", "DataParallel", "FullyShardedDataParallel",
                    "FSDP", "compile"} and (tail != "compile" or "torch" in qn):
            return MODEL if ctx.gpu_program else None
        if tail in {"float", "int", "bool", "len", "str", "repr", "round", "abs", "time", "type",
                    "id", "hash", "callable", "isinstance", "issubclass", "hasattr",
                    "perf_counter"} and isinstance(func, ast.Name):
            return CPU
        if tail == "DataLoader" or tail in DROP_INS:
            from pitstop.lint.loaders import is_dataloader, loader_id

            if is_dataloader(ctx.index, node):
                return f"{LOADER}@{ctx.key}|{loader_id(node)}"
        if tail == "sum" and isinstance(func, ast.Name) and node.args \
                and self._sums_gpu_items(node.args[0], st):
            return GPU  # `loss = sum(losses)`: the builtin adds the GPU tensors up
        if tail == "sum" and isinstance(func, ast.Name) and node.args \
                and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)) \
                and self._over_derived(node.args[0], st):
            return DERIVED  # `sum([l.mean() for l in losses_dict.values()])`, the dict derived
        if tail in {"tuple", "list"} and isinstance(func, ast.Name) and len(node.args) == 1:
            inner = self.kind(node.args[0], st)
            return inner if inner in (GPU, GPU_LIST) else None
        if tail == "filter" and isinstance(func, ast.Name) and len(node.args) == 2:
            inner = self.kind(node.args[1], st)  # `filter(lambda p: p.grad is not None, ps)`
            return inner if inner in (GPU, GPU_LIST) else None
        if tail in BATCH_WRAPPERS and node.args and not isinstance(node.args[0], ast.Starred):
            inner = self.kind(node.args[0], st)  # tqdm(loader), log_every(loader, 10)
            if is_loader_kind(inner):
                return inner
        if tail in {"allclose", "equal", "is_tensor", "is_floating_point", "is_complex",
                    "is_grad_enabled", "numel"} and qn.startswith("torch."):
            return CPU
        if tail in CREATORS and qn.startswith("torch."):
            dev = kwarg(node, "device")
            if dev is not None:
                dk = ctx.devices.kind(dev.value, st.func)
                if dk == DEV_GPU or (dk == "maybe" and ctx.gpu_program) or \
                        self.kind(dev.value, st) == GPU or self._device_of_gpu_value(dev.value, st):
                    return GPU
                return CPU if dk == DEV_CPU else None
            if tail.endswith("_like") and node.args:
                return self.kind(node.args[0], st)
            return CPU
        if st.env.get(dotted(func) or "") == CPU:  # `model = model.cpu()`; `model(x)`
            return CPU
        wrapped = self._iterator_over_loader(node, st)
        if wrapped is not None:
            return wrapped
        prog = self._program_kind(node, st)
        if prog is not None:
            return prog
        lam = self._lambda(node.func, st)
        if lam is not None:
            return self._lambda_kind(lam, node, st)
        if isinstance(func, ast.Name) and is_model(st.env.get(func.id)) and ctx.gpu_program:
            return GPU  # a module of the program on the GPU called: its outputs are there
        sym = ctx.callee_sym(node, st) if st.per_batch else None
        if sym is not None and sym.kind == "func":
            # a function of the program: what it returns, not what its name suggests
            found = self.return_kind_of_call(node, st)
            if found is None and self._model_method(node, st):
                return GPU  # `model.calculate_loss(...)`: a model's outputs, as for a call
            if found is None and self._from_gpu_args(node, st):
                return DERIVED  # `reduce_loss_dict(losses)`: computed from GPU values
            return found
        if sym is None and st.per_batch and self._model_method(node, st):
            return GPU  # `self.model.bpr_loss(u, p, n)`, the model's class chosen by name
        if class_name(tail) and tail not in {"Tensor", "DataLoader"} \
                and isinstance(func, (ast.Name, ast.Attribute)) and not qn.startswith(
                    ("torch.utils", "numpy", "collections", "typing")) \
                and not (isinstance(func, ast.Attribute) and dotted(func.value) == "self"
                         and (LOSS_RE.search(tail) or self.is_model_callee(func, st))):
            # (a class built; not `self.G_lossfn(...)`, a loss module the model holds, nor
            # `self.MAE_encoder(x)`, a sub-module called)
            first = self.kind(node.args[0], st) if node.args and not isinstance(
                node.args[0], ast.Starred) else None
            if is_loader_kind(first):
                return first  # CycleIterator(loader), DataPrefetcher(loader): its batches
            return MODEL if ctx.gpu_program else None
        if BUILDER_RE.search(tail):  # `unwrap_model(unet)`, `build_model(cfg)`: a model
            return MODEL
        if self.is_model_callee(func, st):
            return GPU if ctx.gpu_program else None
        argkinds = [self.kind(a, st) for a in node.args if not isinstance(a, ast.Starred)]
        argkinds += [self.kind(k.value, st) for k in node.keywords]
        any_gpu = GPU in argkinds or MASK in argkinds
        if _loss_callee(func) or qn.startswith("torch.nn.functional."):
            if any_gpu:
                return GPU
            # `self.G_lossfn(self.E, self.H)`: a loss module the model holds, applied to
            # what its forward pass stored on self -- most likely on the GPU
            holder = dotted(func) or ""
            if ctx.gpu_program and holder.startswith("self.") and holder.count(".") == 1 \
                    and node.args and CPU not in argkinds:
                return DERIVED
            return None
        if qn.startswith("torch.") and not qn.startswith(("torch.cuda.", "torch.distributed.")):
            if tail in TORCH_MASKS:
                return MASK if any_gpu else None
            if tail in {"stack", "cat", "concat", "concatenate"} and MASK in argkinds + [
                    self.kind(e, st) for a in node.args if isinstance(a, (ast.Tuple, ast.List))
                    for e in a.elts]:
                return MASK  # a stack of boolean masks is a mask
            if tail in {"stack", "cat", "concat"} and node.args and isinstance(
                    node.args[0], (ast.Tuple, ast.List)) and any(
                    self.kind(e, st) in (GPU, MASK) for e in node.args[0].elts):
                return GPU
            if tail in {"stack", "cat", "concat", "vstack", "hstack"} and node.args \
                    and argkinds[:1] == [GPU_LIST]:
                return GPU
            if any_gpu:
                return GPU
            # (computed from what is most likely on the GPU -- an unseen layer's output,
            # `pad_packed_sequence(self.lstm(x))` -- is most likely there too)
            return DERIVED if DERIVED in argkinds else None
        if qn.startswith(("numpy.", "np.", "math.")):
            return CPU
        if self.moves_batch(node, st):
            return GPU  # `to_device(batch, device)`, `prepare_batch(batch, device=device)`
        # a function of the program: what does it return for these arguments?
        found = self.return_kind_of_call(node, st)
        if found is None and (any_gpu or DERIVED in argkinds) and not qn.startswith(
                ("builtins", "torch.cuda", "torch.distributed")) and tail not in NOT_DERIVED:
            return DERIVED  # `acc1, acc5 = accuracy(output, target)` (timm, torchmetrics...)
        return found

    def _iterator_over_loader(self, node: ast.Call, st: State) -> str | None:
        """`CycleIterator(train_loader)`, `DataPrefetcher(loader)`: an iterable class of
        the program (or one it does not show) over a loader yields that loader's batches,
        placed where the loader places them."""
        tail = callee_tail(node)
        if not node.args or isinstance(node.args[0], ast.Starred) or not tail[:1].isupper():
            return None
        first = self.kind(node.args[0], st)
        if not is_loader_kind(first):
            return None
        sym = self.ctx.callee_sym(node, st)
        if sym is None:
            return first
        if sym.kind != "class":
            return None
        summary = self.ctx.program.klass(sym.module, sym.name)
        if summary is not None and ITERATION_METHODS & set(summary.methods):
            return first
        return None

    def _lambda(self, func: ast.expr, st: State) -> ast.Lambda | None:
        """The module-level lambda a call runs (`reduce_sum = lambda x, *a: x.sum(*a)`,
        called as `reduce_sum(t)` or, through `d2l = sys.modules[__name__]`, as
        `d2l.reduce_sum(t)`)."""
        name = dotted(func)
        if name is None or name in st.env:
            return None
        index = self.ctx.index
        parts = name.split(".")
        if len(parts) == 2 and _only_value(index, parts[0]) is not None and \
                _is_self_module(_only_value(index, parts[0])):
            parts = parts[1:]
        if len(parts) != 1 or (st.func is not None and (
                (st.func, parts[0]) in index.scoped_assigns
                or parts[0] in {a.arg for a in st.func.args.args})):
            return None
        value = _only_value(index, parts[0])
        return value if isinstance(value, ast.Lambda) else None

    def _lambda_kind(self, lam: ast.Lambda, call: ast.Call, st: State) -> str | None:
        if id(lam) in self._lambdas_open or len(self._lambdas_open) > 3:
            return None
        from dataclasses import replace

        env = dict(st.env)
        params = [a.arg for a in lam.args.args]
        for p in params:
            env.pop(p, None)
        for p, a in zip(params, call.args, strict=False):
            if isinstance(a, ast.Starred):
                break
            k = self.kind(a, st)
            if k is not None:
                env[p] = k
        self._lambdas_open.add(id(lam))
        try:
            return self.kind(lam.body, replace(st, env=env))
        finally:
            self._lambdas_open.discard(id(lam))

    def _program_kind(self, node: ast.Call, st: State) -> str | None:
        """What the program model says a call returns: a model, a loader, an object."""
        ctx = self.ctx
        name = dotted(node.func)
        if name is None:
            return None
        head = name.split(".", 1)[0]
        if head in st.env and not st.env[head].startswith("obj@"):
            return None
        kind = ctx.kind_of_resolved(ctx.resolve_call_result(node, st))
        # (a model by its class is followed where it is called, not where it is returned)
        return MODEL if is_model(kind) else kind

    # ------------------------------------------------------------------ returns
    def return_kind_of_call(self, call: ast.Call, st: State) -> str | None:
        if st.depth > 2 or st.hot is None or st.rare:
            return None
        target = self.ctx.function_target(call, st)
        if target is None:
            return None
        tctx, fn = target
        env = self.bind_params(fn, call, st, tctx)
        return tctx.values.return_kind(fn, env, st.depth + 1)

    def return_kind(self, fn: FuncDef, env: dict[str, str], depth: int) -> str | None:
        key = (id(fn), tuple(sorted(env.items())))
        memo = self._return_memo
        if key in memo:
            return memo[key]
        memo[key] = None
        returns = self.ctx.index.returns.get(fn, [])
        result: str | None = None
        if returns:
            sub = self._simulate(fn, env, depth)
            kinds = {self.kind(r.value, sub) if not isinstance(r.value, ast.Tuple) else
                     (GPU if any(self.kind(e, sub) == GPU for e in r.value.elts) else None)
                     for r in returns if r.value is not None}
            # (one path on the GPU is enough; `torch.zeros(n).bool()` on a shortcut path
            # beside a mask moved to the GPU still hands back a mask)
            result = kinds.pop() if len(kinds) == 1 else (
                GPU if GPU in kinds else (MASK if MASK in kinds else None))
        memo[key] = result
        return result

    def _simulate(self, fn: FuncDef, env: dict[str, str], depth: int) -> State:
        """The kinds of a function's names at its end, its assignments taken in source
        order, no findings (`x = x.to(device); return x` returns a GPU tensor;
        `out.append(gpu)` makes `out` a list of GPU tensors)."""
        from pitstop.lint.walk import State

        sub = State(env=dict(env), depth=depth, func=fn)
        steps = sorted((n for n in iter_shallow(fn.body, into_loops=True)
                        if isinstance(n, (ast.Assign, ast.AugAssign, ast.Call))),
                       key=lambda n: (n.lineno, n.col_offset))
        fresh = {t.id for n in steps if isinstance(n, ast.Assign) and _empty_dict(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}
        for n in steps:
            if isinstance(n, (ast.Assign, ast.AugAssign)) and fresh:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:  # `losses = {}` ... `losses["total"] += loss`: GPU losses
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                            and t.value.id in fresh and self.kind(n.value, sub) in (GPU, MASK):
                        sub.env[t.value.id] = GPU
            if isinstance(n, ast.Assign):
                self.bind(n.targets, n.value, sub)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                self.accumulate(n.target.id, n.value, sub)
            elif isinstance(n, ast.Call) and callee_tail(n) == "append" and len(n.args) == 1 \
                    and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and (self.kind(n.args[0], sub) == GPU or self.tuple_has_gpu(n.args[0], sub)):
                sub.env[n.func.value.id] = GPU  # its items are GPU tensors
        return sub

    def accumulate(self, name: str, value: ast.expr, st: State) -> None:
        """``name += value``: a Python number that a GPU value is added to is a GPU
        tensor from then on (`gen_loss = 0.0` ... `gen_loss += sc_loss + mag_loss`), and
        one that a value derived from the batch is added to is derived too; adding a
        host number changes nothing."""
        k = self.kind(value, st)
        if k in (GPU, MASK):
            st.env[name] = GPU
        elif k == DERIVED and st.env.get(name) in (None, CPU):
            st.env[name] = DERIVED

    def return_items(self, fn: FuncDef, env: dict[str, str], depth: int, n: int
                     ) -> list[str | None] | None:
        """Kinds of the items of the ``n``-tuple a function returns (`return out, lengths`)."""
        tuples = [r.value for r in self.ctx.index.returns.get(fn, [])
                  if isinstance(r.value, ast.Tuple) and len(r.value.elts) == n]
        if not tuples:
            return None
        sub = self._simulate(fn, env, depth)
        out: list[str | None] = []
        for i in range(n):
            kinds = {self.kind(t.elts[i], sub) for t in tuples}
            out.append(kinds.pop() if len(kinds) == 1 else None)
        return out

    def bind_params(self, fn: FuncDef, call: ast.Call | None, st: State,
                    callee_ctx: ModuleContext | None = None) -> dict[str, str]:
        """The callee's parameters bound to the kinds of the call's arguments."""
        env: dict[str, str] = {}
        if callee_ctx is None or callee_ctx is self.ctx:
            env = {k: v for k, v in st.env.items() if k.startswith("self.")}
        if call is None:
            return env
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        cctx = callee_ctx or self.ctx
        if params and params[0] in {"self", "cls"} and fn in cctx.index.class_of:
            cls = cctx.index.class_of[fn]
            unbound = isinstance(call.func, ast.Attribute) and dotted(call.func.value) == cls.name
            if not unbound:  # obj.method(x), obj(x) -> __call__/forward: self is obj
                params = params[1:]
        extra: list[ast.expr] = []
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if i >= len(params):
                extra.append(arg)
                continue
            k = self.kind(arg, st)
            if k is not None:
                env[params[i]] = k
        if fn.args.vararg is not None and extra and all(
                self.kind(a, st) in (GPU, MASK) for a in extra):
            env[fn.args.vararg.arg] = GPU  # `def add(self, *args)`: a tuple of GPU tensors
        named = set(param_names(fn))
        for kw in call.keywords:
            if kw.arg:
                k = self.kind(kw.value, st)
                if k is None:
                    continue
                if kw.arg in named or fn.args.kwarg is None:
                    env[kw.arg] = k
                elif k in (GPU, MASK, DERIVED):
                    # `update(loss=loss)` into `def update(self, **kwargs)`: a dict of them
                    env[fn.args.kwarg.arg] = GPU if k != DERIVED else DERIVED
            elif fn.args.kwarg is not None and self.kind(kw.value, st) in (GPU, MASK):
                env[fn.args.kwarg.arg] = GPU  # `update(**loss_dict)`
        return env

    def bind(self, targets: list[ast.expr], value: ast.expr, st: State) -> None:
        """Assign ``value``'s kind to ``targets`` in ``st`` (and track batch data)."""
        ctx = self.ctx
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self.bind([t], v, st)
                continue
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, ast.Call) \
                    and callee_tail(value) in PLACERS and len(value.args) == len(target.elts):
                for t, v in zip(target.elts, value.args, strict=True):  # accelerator.prepare
                    k = self.kind(v, st)
                    if k is None and self.ctx.loops.is_batch_source(v, st):
                        k = LOADER
                    for name in target_names(t):
                        if k is None:
                            st.env.pop(name, None)
                        else:
                            st.env[name] = f"{k}{PLACED}" if is_loader_kind(k) and not placed(k) else k
                continue
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, ast.Call) \
                    and not any(isinstance(e, ast.Starred) for e in target.elts):
                items = self._tuple_kinds(value, st, len(target.elts))
                if items is not None:
                    for t, k in zip(target.elts, items, strict=True):
                        for name in target_names(t):
                            if k is None:
                                st.env.pop(name, None)
                            else:
                                st.env[name] = k
                    continue
            k = self.kind(value, st)
            from_batch = self._from_batch(value, st)
            if from_batch and isinstance(value, ast.Call) and callee_tail(value) == "next" \
                    and value.args and placed(self.kind(value.args[0], st)):
                from_batch, k = False, GPU  # a batch that accelerate/Fabric already placed
            rare = ctx.loops.rarity(value, st) == "rare" if isinstance(
                value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) else False
            src = self._batch_source(value, st) if from_batch else None
            for name in target_names(target):
                if k is None:
                    st.env.pop(name, None)
                else:
                    st.env[name] = k
                if from_batch and "." not in name:
                    st.batch.add(name)
                    if src:
                        st.batch_src[name] = src
                elif name in st.batch and not from_batch:
                    st.batch.discard(name)
                if rare:
                    ctx.rare_names.add(name)

    def moves_batch(self, call: ast.Call, st: State) -> bool:
        """A helper handed batch data and a GPU device: it moves the batch there."""
        if not st.batch or not any(root_name(a) in st.batch for a in call.args
                                   if not isinstance(a, ast.Starred)):
            return False
        dev = kwarg(call, "device")
        devices = self.ctx.devices
        if dev is not None:
            return devices.is_gpu(dev.value, st.func)
        return any(devices.kind(a, st.func) in (DEV_GPU, "maybe") and devices.is_gpu(a, st.func)
                   for a in call.args[1:] if isinstance(a, (ast.Name, ast.Attribute)))

    def _tuple_kinds(self, call: ast.Call, st: State, n: int) -> list[str | None] | None:
        """Kinds of the items of the tuple a program function returns, when known."""
        ctx = self.ctx
        sym = ctx.callee_sym(call, st)
        if sym is None or sym.kind != "func":
            k = self.kind(call, st)
            return [k] * n if k in (GPU, DERIVED) else None
        out = [ctx.kind_of_resolved(ctx.program.returns_item(sym.module, sym.name, i))
               for i in range(n)]
        if not any(out) and st.hot is not None and not st.rare and st.depth <= 2:
            target = ctx.function_target(call, st)
            if target is not None:
                tctx, fn = target
                env = self.bind_params(fn, call, st, tctx)
                items = tctx.values.return_items(fn, env, st.depth + 1, n)
                if items is not None and None in items and self._from_gpu_args(call, st):
                    # what the body does is beyond the simulation (a list filled in a loop
                    # by sub-modules): as for a function not seen, computed from GPU values
                    items = [DERIVED if k is None else k for k in items]
                if (items is None or None in items) and self._model_method(call, st):
                    # `loss, tags = model.calculate_loss(...)`: a model's outputs
                    items = [GPU if k is None else k for k in (items or [None] * n)]
                return items
        return out if any(out) else None

    def _names_bool_tensor(self, node: ast.expr, st: State) -> bool:
        """A boolean tensor, or a local name last assigned one above
        (`mask = torch.from_numpy(m).to(torch.bool)` ... `mask.to(device)`)."""
        aliases = self.ctx.aliases
        if _bool_tensor(node, aliases):
            return True
        if not isinstance(node, ast.Name) or st.func is None:
            return False
        value = self.ctx.index.value_above(st.func, node.id, node.lineno)
        return value is not None and _bool_tensor(value, aliases)

    def _device_of_gpu_value(self, node: ast.expr, st: State) -> bool:
        """`x.device`, `next(iter(outputs.values())).device`: the device of a GPU value."""
        if not (isinstance(node, ast.Attribute) and node.attr == "device"):
            return False
        inner: ast.expr = node.value
        for _ in range(6):
            if isinstance(inner, ast.Call) and callee_tail(inner) in {"next", "iter"} \
                    and isinstance(inner.func, ast.Name) and inner.args:
                inner = inner.args[0]
            elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                    and inner.func.attr in {"values", "parameters", "buffers"}:
                inner = inner.func.value
            elif isinstance(inner, ast.Subscript):
                inner = inner.value
            else:
                break
        k = self.kind(inner, st)
        return k in (GPU, MASK) or (is_model(k) and self.ctx.gpu_program)

    def _model_method(self, call: ast.Call, st: State) -> bool:
        """A method of a model of a GPU program that computes on its inputs
        (`model.calculate_loss(x)`; not `model.get_step()`, a host counter)."""
        return self.ctx.gpu_program and isinstance(call.func, ast.Attribute) \
            and call.func.attr not in MODEL_METHODS and bool(call.args) \
            and COMPUTING_METHOD_RE.search(call.func.attr) is not None \
            and self.is_model_callee(call.func.value, st)

    def _sums_gpu_items(self, items: ast.expr, st: State) -> bool:
        """Are these GPU tensors to add up: a list GPU tensors were appended to, the values
        of a dict of GPU losses, a comprehension over GPU values?"""
        if isinstance(items, (ast.GeneratorExp, ast.ListComp)):
            # `sum(l for l in losses)`: the items themselves; `sum(x.size(0) for x in xs)`
            # adds host integers
            if self.kind(items.elt, st) == GPU:
                return True
            # `sum(l for l in losses)`, `sum([l.mean() for l in losses_dict.values()])`
            root = root_name(items.elt)
            return root is not None and not (isinstance(items.elt, ast.Call) and callee_tail(
                items.elt) in HOST_METHODS) and any(
                    isinstance(g.target, ast.Name) and g.target.id == root
                    and self._gpu_items(g.iter, st) for g in items.generators)
        return self._gpu_items(items, st) or self.tuple_has_gpu(items, st)

    def _over_derived(self, comp: ast.GeneratorExp | ast.ListComp, st: State) -> bool:
        """Does this comprehension compute from the items of a value derived from GPU
        tensors (not their sizes or host copies)?"""
        elt = comp.elt
        while isinstance(elt, ast.Call) and isinstance(elt.func, ast.Attribute):
            elt = elt.func.value  # `l.mean()`, `l.float().mean()`: computed from `l`
        root = root_name(elt)
        return root is not None and not (isinstance(comp.elt, ast.Call) and callee_tail(
            comp.elt) in HOST_METHODS) and any(
                isinstance(g.target, ast.Name) and g.target.id == root
                and self.kind(g.iter, st) == DERIVED for g in comp.generators)

    def _gpu_items(self, items: ast.expr, st: State) -> bool:
        """Does iterating ``items`` give GPU tensors (a list of them, a dict's values)?"""
        if isinstance(items, ast.Call) and callee_tail(items) == "values" \
                and isinstance(items.func, ast.Attribute):
            return self.kind(items.func.value, st) == GPU
        return self.kind(items, st) in (GPU, GPU_LIST)

    def _from_gpu_args(self, call: ast.Call, st: State) -> bool:
        # (`self.relocate_input([x, x_lengths])`: a list of GPU tensors handed in)
        return callee_tail(call) not in NOT_DERIVED and any(
            self.kind(a, st) in (GPU, MASK, DERIVED) or (
                isinstance(a, (ast.List, ast.Tuple)) and self.tuple_has_gpu(a, st))
            for a in call.args if not isinstance(a, ast.Starred))

    def _batch_source(self, value: ast.expr, st: State) -> str | None:
        """The loader a batch value comes from: `next(it)` over a loader of the program,
        or the batch it is computed from."""
        if isinstance(value, ast.Call) and callee_tail(value) == "next" and value.args:
            k = self.kind(value.args[0], st)
            if k is not None and is_loader_kind(k):
                return k
        for sub in ast.walk(value):
            if isinstance(sub, ast.Name) and sub.id in st.batch_src:
                return st.batch_src[sub.id]
        return None

    def _from_batch(self, value: ast.expr, st: State) -> bool:
        """Is ``value`` (still host) batch data: a name holding a batch, an item of one,
        or ``next(it)`` over a loader."""
        if isinstance(value, ast.Call):
            if callee_tail(value) == "Variable" and value.args:
                return self._from_batch(value.args[0], st)  # the pre-0.4 wrapper
            if callee_tail(value) == "next" and value.args and (
                    is_loader_kind(self.kind(value.args[0], st))
                    or self.ctx.loops.is_batch_source(value.args[0], st)):
                return True
            if callee_tail(value) in {"cat", "stack", "concat"} and value.args and (
                    qualname(value.func, self.ctx.aliases) or "").startswith("torch.") \
                    and root_name(value.args[0]) in st.batch:
                return True  # `images = torch.cat(images, dim=0)`: the batch, still on the host
            return isinstance(value.func, ast.Attribute) and root_name(value.func.value) in st.batch \
                and callee_tail(value) not in {"to", "cuda"}
        if isinstance(value, ast.BinOp):  # `y = y - n_seen_classes`: still the host batch
            return (self._from_batch(value.left, st) and self.kind(value.right, st) != GPU) \
                or (self._from_batch(value.right, st) and self.kind(value.left, st) != GPU)
        if isinstance(value, ast.IfExp):  # `y = y - k if per_context else y`
            return self._from_batch(value.body, st) and self._from_batch(value.orelse, st)
        return root_name(value) in st.batch


def _only_value(index: ModuleIndex, name: str) -> ast.expr | None:
    """The value of a module-level name assigned exactly once."""
    assigns = index.scoped_assigns.get((None, name), ())
    if len(assigns) != 1:
        return None
    return assigns[0].value


def _is_self_module(value: ast.expr | None) -> bool:
    """`sys.modules[__name__]`: the module itself."""
    return isinstance(value, ast.Subscript) and dotted(value.value) == "sys.modules" and \
        isinstance(value.slice, ast.Name) and value.slice.id == "__name__"


def _empty_dict(node: ast.expr) -> bool:
    """`{}`, `dict()`, `defaultdict(float)`, `OrderedDict()`: a new, empty mapping."""
    if isinstance(node, ast.Dict):
        return not node.keys
    return isinstance(node, ast.Call) and callee_tail(node) in {
        "dict", "defaultdict", "OrderedDict"} and not node.keywords and (
            callee_tail(node) == "defaultdict" or not node.args)


def class_name(name: str) -> bool:
    """Is ``name`` spelled as a class (`Net`, `MaskTransformer`, `ResNet_3D`), not as a
    constant (`MODELS`) or a function with a capital first word (`GAN_training_function`)?"""
    return name[:1].isupper() and not name.isupper() and re.search(r"_[a-z]", name) is None


def _bool_tensor(node: ast.expr, aliases: dict[str, str]) -> bool:
    """`torch.eye(n, dtype=torch.bool)`: a boolean tensor built by a torch factory;
    `x.bool()`, `x.to(torch.bool)`: one converted."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and (
            (node.func.attr == "bool" and not node.args)
            or (node.func.attr == "to" and len(node.args) == 1
                and (qualname(node.args[0], aliases) or "") == "torch.bool")):
        return True
    dtype = kwarg(node, "dtype")
    return dtype is not None and (qualname(node.func, aliases) or "").startswith("torch.") \
        and (qualname(dtype.value, aliases) or "") == "torch.bool"


def _loss_callee(func: ast.expr) -> bool:
    """A loss applied: `criterion(out, y)`, `self.l1_loss(...)`, one of a dict of losses
    (`criterion["cce"](out, y)`), or its forward called by name (`loss.forward(y, t)`)."""
    if isinstance(func, ast.Subscript) or (
            isinstance(func, ast.Attribute) and func.attr in {"forward", "__call__"}):
        func = func.value
    name = last_name(func)
    return name is not None and LOSS_RE.search(name) is not None
