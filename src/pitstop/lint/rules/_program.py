"""What the program-level rules (cudnn-benchmark, amp-missing, tf32) share. They are
decided per file here and confirmed by the engine once the whole package has been seen:
each finding carries the package facts that must be absent (its ``condition``)."""

from __future__ import annotations

import ast

from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix


def first_gpu_train_loop(ctx: ModuleContext) -> ast.AST | None:
    if not ctx.gpu_program:
        return None
    for hot in ctx.hot_loops:
        if hot.kind == "train":
            return hot.node
    return None


def insert_after_imports(ctx: ModuleContext, stmt: str, why: str) -> Fix | None:
    if ctx.aliases.get("torch") != "torch":
        return None
    return Fix(UNSAFE, why, (Edit("insert_after_imports", value=stmt),))
