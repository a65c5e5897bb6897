"""LT009 zero-grad: ``zero_grad(set_to_none=False)`` or gradients zeroed by hand."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import dotted, kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix
from pitstop.lint.settings import options_owner

CODE = "LT009"


def check(ctx: ModuleContext) -> None:
    if "zero" not in ctx.text:
        return
    for call in ctx.calls:
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr == "zero_grad":
            kw = kwarg(call, "set_to_none")
            arg = kw.value if kw is not None else (call.args[0] if call.args else None)
            if isinstance(arg, ast.Attribute) and options_owner(arg.value):
                st = ctx.program.setting(arg.attr)
                if st is not None and st.default is False:
                    ctx.report(
                        CODE, call,
                        f"`{ctx.segment(call)}`: `{ctx.segment(arg)}` defaults to False "
                        f"({st.where}), so by default every step writes zeros into every "
                        "gradient tensor (a memset kernel per parameter) instead of dropping "
                        "them; make the default True.",
                    )
                continue
            if not (isinstance(arg, ast.Constant) and arg.value is False):
                continue
            fix = None
            if kw is not None:
                line = func.lineno
                fix = Fix(UNSAFE, "drop set_to_none=False (the default, True, frees the gradients)",
                          (Edit("kw_remove", line, ctx.char_column(line, func.col_offset),
                                "zero_grad", name="set_to_none"),))
            ctx.report(
                CODE, call,
                f"`{ctx.segment(call)}` writes zeros into every gradient tensor each step (a "
                "memset kernel per parameter, and the memory stays allocated); the default "
                "set_to_none=True just drops them.",
                fix=fix,
            )
        elif func.attr == "zero_" and ctx.has_train_loop:
            owner = dotted(func.value) or ""
            if owner.endswith(".grad") or owner.endswith(".grad.data"):
                ctx.report(
                    CODE, call,
                    f"`{ctx.segment(call)}` zeroes a gradient by hand, one kernel per "
                    "parameter; use `optimizer.zero_grad()` (set_to_none=True) or "
                    "`p.grad = None`.",
                )
