"""Environments: assignments bound to names (batch data tracked), a call's arguments
bound to the callee's parameters, and what a function of the program returns for them
(its body simulated in source order)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    callee_tail,
    dotted,
    iter_shallow,
    param_names,
    qualname,
    root_name,
    target_names,
)
from pitstop.lint.values_calls import CallKinds
from pitstop.lint.values_kinds import (
    CPU,
    DERIVED,
    GPU,
    LOADER,
    MASK,
    PLACED,
    PLACERS,
    is_loader_kind,
    placed,
)

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.index import FuncDef
    from pitstop.lint.walk import State


class ValueBinding(CallKinds):
    """The part of :class:`~pitstop.lint.values.ValueModel` that binds names and follows
    calls into the program's functions."""

    _return_memo: dict[tuple[int, tuple[tuple[str, str], ...]], str | None]

    # ------------------------------------------------------------------ returns
    def return_kind_of_call(self, call: ast.Call, st: State) -> str | None:
        if st.depth > 2 or st.hot is None or st.rare:
            return None
        ctx = self.ctx
        target = ctx.function_target(call, st)
        found = None
        if target is not None:
            tctx, fn = target
            found = tctx.values.return_kind(fn, self.bind_params(fn, call, st, tctx), st.depth + 1)
        if found is None:
            # `self._forward(batch)` in a base trainer whose own `_forward` raises
            # NotImplementedError: what the subclasses' overrides return
            for octx, ofn in ctx.walker.overrides(call, st, target[1] if target else None):
                env = self.bind_params(ofn, call, st, octx)
                cls = octx.index.class_of.get(ofn)
                if cls is not None:
                    for k, v in octx.walker.entry.class_env(cls).items():
                        env.setdefault(k, v)
                found = octx.values.return_kind(ofn, env, st.depth + 1)
                if found is not None:
                    break
        return found

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
                if (items is None or None in items or DERIVED in items) and (
                        self._model_method(call, st) or (
                            ctx.gpu_program and self.is_model_callee(call.func, st))):
                    # `loss, tags = model.calculate_loss(...)`, `feats, pred = model(x)`:
                    # a model's outputs, on its device
                    items = [GPU if k in (None, DERIVED) else k for k in (items or [None] * n)]
                if items is not None and None in items and self._from_gpu_args(call, st):
                    # what the body does is beyond the simulation (a list filled in a loop
                    # by sub-modules): as for a function not seen, computed from GPU values
                    items = [DERIVED if k is None else k for k in items]
                return items
        return out if any(out) else None


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
            if self.ctx.loops.pulls_batch(value, st):
                return True  # `inputs = data_loader_source.next()`
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


def _empty_dict(node: ast.expr) -> bool:
    """`{}`, `dict()`, `defaultdict(float)`, `OrderedDict()`: a new, empty mapping."""
    if isinstance(node, ast.Dict):
        return not node.keys
    return isinstance(node, ast.Call) and callee_tail(node) in {
        "dict", "defaultdict", "OrderedDict"} and not node.keywords and (
            callee_tail(node) == "defaultdict" or not node.args)
