"""What a call evaluates to: torch factories and functions, tensor and model methods,
moves to a device, builtins, lambdas, accelerator placers and collectives, classes and
functions of the program."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    ITERATION_METHODS,
    LOSS_RE,
    callee_tail,
    dotted,
    kwarg,
    move_target,
    qualname,
    root_name,
)
from pitstop.lint.describe import BATCH_WRAPPERS
from pitstop.lint.devices import CPU as DEV_CPU
from pitstop.lint.devices import GPU as DEV_GPU
from pitstop.lint.loaders import DROP_INS
from pitstop.lint.values_kinds import (
    COLLECTIVES,
    CPU,
    CREATORS,
    DERIVED,
    GPU,
    GPU_LIST,
    HOST_METHODS,
    LOADER,
    MASK,
    MASK_KEEPING,
    MASK_METHODS,
    MODEL,
    MODEL_METHODS,
    NOT_DERIVED,
    PLACED,
    PLACERS,
    STORAGE_METHODS,
    TORCH_MASKS,
    is_loader_kind,
    is_model,
    placed,
)
from pitstop.lint.values_models import BUILDER_RE, ModelRecognition, _loss_callee, class_name

if TYPE_CHECKING:
    from pitstop.lint.index import ModuleIndex
    from pitstop.lint.walk import State


class CallKinds(ModelRecognition):
    """The part of :class:`~pitstop.lint.values.ValueModel` that evaluates calls."""

    _lambdas_open: set[int]

    if TYPE_CHECKING:  # the rest of the value model, which this part asks
        def tuple_has_gpu(self, node: ast.AST, st: State) -> bool: ...
        def return_kind_of_call(self, call: ast.Call, st: State) -> str | None: ...

    def _call_kind(self, node: ast.Call, st: State) -> str | None:
        ctx = self.ctx
        func = node.func
        if isinstance(func, ast.Call) and LOSS_RE.search(callee_tail(func)) and any(
                self.kind(a, st) in (GPU, MASK) for a in node.args):
            return GPU  # `nn.L1Loss()(pred, target)`: a loss built and applied at once
        tail = callee_tail(node)
        if tail.lstrip("_").startswith(("is_", "has_")):
            # `x.is_complex()`, `has_torch_function(args)`, `torch._is_functional_tensor(x)`:
            # Python booleans
            return CPU
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
                if tail in HOST_METHODS or tail in STORAGE_METHODS or tail == "keys":
                    return CPU
                if tail in MASK_METHODS or (recv == MASK and tail in MASK_KEEPING):
                    return MASK
                return GPU
            if recv == DERIVED:
                return CPU if tail in HOST_METHODS or tail in STORAGE_METHODS else (
                    None if tail in NOT_DERIVED else DERIVED)
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
