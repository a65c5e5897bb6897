"""What a loop iterates: the loader behind a batch iterable (also inside `enumerate`,
`tqdm`, `zip`), whether its one batch is the whole split, and the kinds of what it
yields (a model's parameters, GPU tensors zipped with others). :class:`LoopIterables` is
the part of :class:`~pitstop.lint.walk.Walker` that answers these."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pitstop.lint.astutil import callee_tail
from pitstop.lint.values_kinds import CPU, GPU, GPU_LIST, is_loader_kind, is_model, loader_ref

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State


class LoopIterables:
    """The part of the walker that reads loop iterables."""

    ctx: ModuleContext

    def _zipped_kinds(self, it: ast.expr, target: ast.expr, st: State
                      ) -> list[tuple[ast.expr, str]]:
        """`for real, fake in zip(real_outs, fake_outs)` over lists of GPU tensors, `for i,
        out in enumerate(outs)`: the kind of each part of the loop target."""
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and isinstance(target, ast.Tuple)):
            return []
        values = self.ctx.values
        if it.func.id == "zip" and len(it.args) == len(target.elts) and not it.keywords:
            return [(t, GPU) for t, a in zip(target.elts, it.args, strict=True)
                    if values.kind(a, st) in (GPU, GPU_LIST)]
        if it.func.id == "enumerate" and len(target.elts) == 2 and it.args:
            out: list[tuple[ast.expr, str]] = [(target.elts[0], CPU)]
            if values.kind(it.args[0], st) in (GPU, GPU_LIST):
                out.append((target.elts[1], GPU))
            return out
        return []

    def _parameters_of_model(self, loop: ast.For | ast.AsyncFor, st: State) -> ast.expr | None:
        """The loop target that holds a GPU model's parameters, in a GPU program:
        `p` in `for p in net.parameters()`, in `for name, p in layer.named_parameters()`
        (also a child module's: `list(net.children())[-1]`)."""
        ctx = self.ctx
        it = loop.iter
        if not ctx.gpu_program or not isinstance(it, ast.Call) or not isinstance(
                it.func, ast.Attribute) or it.func.attr not in {"parameters", "named_parameters"}:
            return None
        owner: ast.expr = it.func.value
        for _ in range(4):  # `list(net.children())[-1]`: a part of a model is a model
            if isinstance(owner, ast.Subscript):
                owner = owner.value
            elif isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) \
                    and owner.func.id == "list" and owner.args:
                owner = owner.args[0]
            elif isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) \
                    and owner.func.attr in {"children", "modules"}:
                owner = owner.func.value
            else:
                break
        values = ctx.values
        if not (is_model(values.kind(owner, st)) or values.looks_like_module(owner, st)
                or self._assigned_from_model(owner, st)):
            return None
        if it.func.attr == "parameters":
            return loop.target
        if isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2:
            return loop.target.elts[1]
        return None

    def _assigned_from_model(self, owner: ast.expr, st: State) -> bool:
        """`last_layer = list(net.children())[-1]`: a part of a model is a model."""
        if not isinstance(owner, ast.Name):
            return False
        for a in self.ctx.index.scoped_assigns.get((st.func, owner.id), ()):
            for sub in ast.walk(a.value) if a.value is not None else ():
                if isinstance(sub, ast.Call) and callee_tail(sub) in {"children", "modules"} \
                        and isinstance(sub.func, ast.Attribute):
                    k = self.ctx.values.kind(sub.func.value, st)
                    if is_model(k) or self.ctx.values.looks_like_module(sub.func.value, st):
                        return True
        return False

    def _any_loader_kind(self, it: ast.expr, st: State) -> str | None:
        """The kind of the loader a batch iterable wraps, known or not."""
        from pitstop.lint.astutil import unwrap_iterable

        for inner in unwrap_iterable(it):
            k = self.ctx.values.kind(inner, st)
            if is_loader_kind(k):
                return k
        return None

    def _one_batch_pass(self, it: ast.expr, st: State) -> bool:
        """Does this iterable come from a DataLoader whose one batch is its whole split?"""
        ref = loader_ref(self._loader_kind(it, st))
        return ref is not None and self.ctx.program.loader_one_batch(*ref)

    def _loader_kind(self, it: ast.expr, st: State) -> str | None:
        """The loader a batch iterable comes from (``loader@MODULE|ID``), if known."""
        ctx = self.ctx
        from pitstop.lint.astutil import unwrap_iterable

        for inner in unwrap_iterable(it):
            k = ctx.values.kind(inner, st)
            if k is not None and k.startswith("loader@"):
                return k
            if isinstance(inner, ast.Call) and inner.args:
                k = ctx.values.kind(inner.args[0], st)
                if k is not None and k.startswith("loader@"):
                    return k
            if isinstance(inner, (ast.Name, ast.Attribute)):
                r = ctx.resolve_name(inner, st)
                if r is not None and r.kind == "loader" and r.name:
                    return f"loader@{r.module}|{r.name}"
        return None
