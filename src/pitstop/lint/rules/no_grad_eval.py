"""LT013 no-grad-eval: an evaluation loop that runs the model with autograd recording."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import callee_tail, dotted, unwrap_iterable
from pitstop.lint.context import ModuleContext

CODE = "LT013"
EVAL_NAME_RE = re.compile(r"eval|valid|val_|_val|test|infer|predict|score|metric|bench",
                          re.IGNORECASE)
GRAD_OFF = frozenset({"no_grad", "inference_mode"})


def _grad_off_call(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (dotted(target) or "").rsplit(".", 1)[-1] in GRAD_OFF


def _under_no_grad(ctx: ModuleContext, node: ast.AST,
                   seen: frozenset[ast.AST] = frozenset()) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.With, ast.AsyncWith)) and any(
                _grad_off_call(i.context_expr) for i in cur.items):
            return True
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_grad_off_call(d) for d in cur.decorator_list):
                return True
            if cur in seen:  # recursion: no call site outside says anything
                return False
            # every call of this function in the module is made under no_grad
            sites = ctx.index.calls_by_tail.get(cur.name, [])
            return bool(sites) and all(_under_no_grad(ctx, c, seen | {cur}) for c in sites)
        cur = ctx.parents.get(cur)
    return False


def check(ctx: ModuleContext) -> None:
    for hot in ctx.hot_loops:
        loop = hot.node
        if hot.kind != "eval" or not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        if _under_no_grad(ctx, loop):
            continue
        func = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        scope = func.body if func is not None else ctx.tree.body  # type: ignore[attr-defined]
        text = "\n".join(ast.unparse(s) for s in scope) if func is not None else ctx.text
        if "set_grad_enabled(False)" in text or "requires_grad_(False)" in text \
                or "requires_grad = False" in text:
            continue
        # inner `with torch.no_grad():` around the model call
        if any(isinstance(n, (ast.With, ast.AsyncWith)) and any(
                _grad_off_call(i.context_expr) for i in n.items) for n in ast.walk(loop)):
            continue
        loader = " ".join(dotted(i) or "" for i in unwrap_iterable(loop.iter))
        fname = getattr(func, "name", "")
        signals = EVAL_NAME_RE.search(loader) or EVAL_NAME_RE.search(fname) or any(
            callee_tail(n) == "eval" for n in ast.walk(ast.Module(body=list(scope), type_ignores=[]))
            if isinstance(n, ast.Call))
        if not signals:
            continue
        ctx.report(
            CODE, loop,
            f"evaluation loop over `{ctx.segment(loop.iter)}` runs the model with autograd on: "
            "every activation is kept for a backward pass that never comes (more memory, "
            "smaller batches, slower). Wrap it in `torch.inference_mode()` or decorate the "
            "function with `@torch.no_grad()`.",
            evidence=(("loop_line", hot.line),),
        )
