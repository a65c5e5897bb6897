"""Following the calls a hot loop makes into the program: the function, method or
constructor a call runs (also a subclass's override called on ``self`` from its base),
walked with what the call hands it. :class:`CallFollowing` is the part of
:class:`~pitstop.lint.walk.Walker` that does it."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pitstop.lint.astutil import root_name
from pitstop.lint.index import FuncDef

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import HotRule, State

# calls are followed this many functions deep from a hot loop
MAX_FOLLOW_DEPTH = 6


class CallFollowing:
    """The part of the walker that follows calls into the program's functions."""

    ctx: ModuleContext
    rules: list[HotRule]
    _walked: set[tuple[int, frozenset[str], str]]

    if TYPE_CHECKING:  # the rest of the walker, which this part asks
        def walk_body(self, stmts: list[ast.stmt], st: State) -> None: ...

    def _follow(self, call: ast.Call, st: State) -> None:
        if st.depth >= MAX_FOLLOW_DEPTH:
            return
        ctx = self.ctx
        call = ctx.unwrap_partial(call)  # (the partial's arguments bind the parameters)
        target = ctx.function_target(call, st) or self._constructor(call, st)
        if target is not None:
            self._follow_into(call, st, *target)
        for override in self.overrides(call, st, target[1] if target else None):
            self._follow_into(call, st, *override)

    def _constructor(self, call: ast.Call, st: State) -> tuple[ModuleContext, FuncDef] | None:
        """`TriangularCausalMask(B, L, device=x.device)` made per batch: the `__init__` of
        a plain class of the program (not a module: one built per batch is rare, and its
        parameters are made for training) runs every time."""
        if not st.per_batch:
            return None
        sym = self.ctx.callee_sym(call, st)
        if sym is None or sym.kind != "class" \
                or self.ctx.program.class_is(sym.module, sym.name, "module"):
            return None
        return self.ctx.function_named(sym.module, f"{sym.name}.__init__")

    def overrides(self, call: ast.Call, st: State, fn: FuncDef | None
                   ) -> list[tuple[ModuleContext, FuncDef]]:
        """`self.train_on_batch(batch)` in a base trainer runs the method of the subclass
        the program instantiates: the program's overrides of the method called on self
        (``fn``, the base's own method; None when only subclasses define it, as
        `self.optimize_params()` in a base class that leaves it to each model)."""
        ctx = self.ctx
        if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "self" and st.func is not None):
            return []
        cls = ctx.index.class_of.get(st.func)
        if cls is None or (fn is not None and ctx.index.class_of.get(fn) is not cls):
            return []
        return [found for module, qual in ctx.program.overrides(ctx.key, cls.name, call.func.attr)
                if (found := ctx.function_named(module, qual)) is not None]

    def _follow_into(self, call: ast.Call, st: State, tctx: ModuleContext, fn: FuncDef) -> None:
        ctx = self.ctx
        if fn is st.func:
            return
        env = ctx.values.bind_params(fn, call, st, tctx)
        cls = tctx.index.class_of.get(fn)
        if tctx is ctx:  # keep module-level and self.* knowledge
            for k, v in st.env.items():
                if "." in k:
                    env.setdefault(k, v)
        caller_cls = ctx.index.class_of.get(st.func) if st.func is not None else None
        if cls is not None and (tctx is not ctx or cls is not caller_cls):
            # (a subclass's override called from its base: what its own __init__ sets)
            for k, v in tctx.walker.entry.class_env(cls).items():
                env.setdefault(k, v)
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if params and params[0] in {"self", "cls"} and isinstance(call.func, ast.Attribute):
            params = params[1:]
        batch: set[str] = set()
        batch_src: dict[str, str] = {}
        for p, a in zip(params, call.args, strict=False):
            root = root_name(a)
            if root in st.batch:
                batch.add(p)
                if root in st.batch_src:
                    batch_src[p] = st.batch_src[root]
        for kw in call.keywords:
            root = root_name(kw.value)
            if kw.arg and root in st.batch:
                batch.add(kw.arg)
        key = (id(fn), frozenset(f"{k}={v}" for k, v in env.items()), st.hot.kind if st.hot else "")
        walked = tctx.walker._walked
        if key in walked:
            return
        walked.add(key)
        line = getattr(call, "lineno", 0)
        where = f"line {line}" if tctx is ctx else f"{ctx.path}:{line}"
        via = st.via or f"(`{fn.name}` is called per batch from {where})"
        from pitstop.lint.walk import State  # (the walker's module imports this one)

        sub = State(hot=st.hot, env=env, batch=batch, batch_src=batch_src, via=via,
                    depth=st.depth + 1, func=fn, no_grad=st.no_grad, rare=st.rare)
        tctx.walker.rules = self.rules
        tctx.walker.walk_body(fn.body, sub)
