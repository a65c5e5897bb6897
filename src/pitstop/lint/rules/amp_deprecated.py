"""LT007 amp-deprecated: ``torch.cuda.amp.autocast`` / ``GradScaler`` and
``torch.cpu.amp.autocast``, deprecated since PyTorch 2.4 in favour of ``torch.amp``."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import dotted, is_partial, qualname
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import SAFE, Edit, Fix

CODE = "LT007"

# old name -> (new callee, device type, names of the old positional parameters)
REPLACEMENTS = {
    "torch.cuda.amp.autocast": ("torch.amp.autocast", "cuda", ("enabled", "dtype", "cache_enabled")),
    "torch.cuda.amp.autocast_mode.autocast": ("torch.amp.autocast", "cuda",
                                              ("enabled", "dtype", "cache_enabled")),
    "torch.cpu.amp.autocast": ("torch.amp.autocast", "cpu", ("enabled", "dtype", "cache_enabled")),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", "cuda",
                                  ("init_scale", "growth_factor", "backoff_factor",
                                   "growth_interval", "enabled")),
    "torch.cuda.amp.grad_scaler.GradScaler": ("torch.amp.GradScaler", "cuda",
                                              ("init_scale", "growth_factor", "backoff_factor",
                                               "growth_interval", "enabled")),
}


FALLBACK_ERRORS = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError"})


def compat_fallback(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the call in an `except AttributeError/TypeError/ImportError:` handler -- the
    fallback for old PyTorch versions after trying `torch.amp` first?"""
    for anc in ctx.index.ancestors(call):
        if isinstance(anc, ast.ExceptHandler) and anc.type is not None:
            types = anc.type.elts if isinstance(anc.type, ast.Tuple) else [anc.type]
            if any((dotted(t) or "").rsplit(".", 1)[-1] in FALLBACK_ERRORS for t in types):
                return True
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
    return False


def check(ctx: ModuleContext) -> None:
    if ".amp" not in ctx.text and "amp import" not in ctx.text and "import amp" not in ctx.text:
        return
    torch_bound = ctx.aliases.get("torch") == "torch"
    for call in ctx.calls:
        qn = qualname(call.func, ctx.aliases)
        if is_partial(call, ctx.aliases) and call.args:
            _report_partial(ctx, call)
            continue
        if qn not in REPLACEMENTS and isinstance(call.func, ast.Name):
            _report_alias(ctx, call)
            continue
        if qn not in REPLACEMENTS or compat_fallback(ctx, call):
            continue
        new, device, names = REPLACEMENTS[qn]
        fix = None
        if torch_bound and len(call.args) <= len(names) and not any(
                isinstance(a, ast.Starred) for a in call.args):
            line = call.func.lineno
            col = ctx.char_column(line, call.func.col_offset)
            tail = call.func.attr if isinstance(call.func, ast.Attribute) else \
                call.func.id if isinstance(call.func, ast.Name) else ""
            fix = Fix(SAFE, f'use {new}("{device}", ...)',
                      (Edit("replace_callee", line, col, tail, value=new,
                            prepend=f'"{device}"', names=names[: len(call.args)]),))
        ctx.report(
            CODE, call,
            f"`{qn.replace('.autocast_mode', '').replace('.grad_scaler', '')}` is deprecated "
            f"since PyTorch 2.4 and warns on every use; use `{new}(\"{device}\", ...)`.",
            fix=fix,
        )


def _report_alias(ctx: ModuleContext, call: ast.Call) -> None:
    """`autocast = torch.cuda.amp.autocast` at the top of the module (often in a `try:`,
    with a dummy class for old PyTorch in the `except:`), then `with autocast(...):`: the
    deprecated API under another name. No automatic fix: the alias is the place to edit."""
    assert isinstance(call.func, ast.Name)
    assigns = ctx.index.scoped_assigns.get((None, call.func.id), ())
    for a in assigns:
        qn = qualname(a.value, ctx.aliases) if isinstance(a.value, ast.Attribute) else None
        if qn in REPLACEMENTS:
            new, device, _ = REPLACEMENTS[qn]
            ctx.report(
                CODE, call,
                f"`{call.func.id}` is `{qn}` (line {a.lineno}), deprecated since PyTorch 2.4, "
                f"which warns on every use; bind it to "
                f'`functools.partial({new}, "{device}")` instead.',
            )
            return


def _report_partial(ctx: ModuleContext, call: ast.Call) -> None:
    """`null_context = partial(torch.cuda.amp.autocast, enabled=False)`: the deprecated
    API called later through the partial (no automatic fix: the arguments move)."""
    qn = qualname(call.args[0], ctx.aliases)
    if qn not in REPLACEMENTS or compat_fallback(ctx, call):
        return
    new, device, _ = REPLACEMENTS[qn]
    ctx.report(
        CODE, call.args[0],
        f"`{qn.replace('.autocast_mode', '').replace('.grad_scaler', '')}` is deprecated "
        f"since PyTorch 2.4 and warns on every use, also through `partial`; use "
        f"`partial({new}, \"{device}\", ...)`.",
    )
