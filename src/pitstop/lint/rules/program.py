"""Program-level rules, decided once the whole package has been seen:
LT005 cudnn-benchmark, LT006 amp-missing, LT011 tf32."""

from __future__ import annotations

import ast

from pitstop.lint.context import ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix

CUDNN = "LT005"
AMP_MISSING = "LT006"
TF32 = "LT011"


def _first_gpu_train_loop(ctx: ModuleContext) -> ast.AST | None:
    if not ctx.gpu_program:
        return None
    for hot in ctx.hot_loops:
        if hot.kind == "train":
            return hot.node
    return None


def _insert(ctx: ModuleContext, stmt: str, why: str) -> Fix | None:
    if ctx.aliases.get("torch") != "torch":
        return None
    return Fix(UNSAFE, why, (Edit("insert_after_imports", value=stmt),))


def check_amp_missing(ctx: ModuleContext) -> None:
    loop = _first_gpu_train_loop(ctx)
    if loop is None or "reduced_precision" in ctx.facts:
        return
    ctx.report(
        AMP_MISSING, loop,
        f"GPU training loop (line {getattr(loop, 'lineno', '?')}) runs in float32: no autocast "
        "anywhere in this program. bf16/fp16 autocast runs matmuls and convolutions on tensor "
        "cores, typically 2-3x faster, and halves activation memory. Wrap the forward pass and "
        "loss in `torch.autocast(\"cuda\", dtype=torch.bfloat16)`.",
        condition="-reduced_precision",
    )


def check_tf32(ctx: ModuleContext) -> None:
    loop = _first_gpu_train_loop(ctx)
    if loop is None or {"reduced_precision", "tf32_enabled"} & ctx.facts:
        return
    ctx.report(
        TF32, loop,
        "float32 GPU training program that never enables TF32 for matmuls: on Ampere and "
        "newer GPUs `torch.set_float32_matmul_precision(\"high\")` runs them on tensor cores, "
        "several times faster, at ~10 bits of mantissa.",
        fix=_insert(ctx, 'torch.set_float32_matmul_precision("high")',
                    "enable TF32 matmuls after the imports"),
        condition="-reduced_precision -tf32_enabled",
    )


def check_cudnn(ctx: ModuleContext) -> None:
    if not ctx.gpu_program or "deterministic" in ctx.facts:
        return
    explicit_false = False
    for assign in ctx.assigns:
        value = assign.value
        for t in assign.targets:
            if isinstance(t, ast.Attribute) and t.attr == "benchmark" and "cudnn" in ast.unparse(t) \
                    and isinstance(value, ast.Constant) and value.value is False:
                explicit_false = True
                line = value.lineno
                ctx.report(
                    CUDNN, assign,
                    "`cudnn.benchmark = False` in a convolutional GPU training program: cuDNN "
                    "uses heuristics instead of timing its algorithms once per input shape, "
                    "often leaving 10-30% of convolution speed unused.",
                    fix=Fix(UNSAFE, "set it to True",
                            (Edit("replace_literal", line, ctx.char_column(line, value.col_offset),
                                  "False", value="True"),)),
                    condition="+has_conv -deterministic",
                )
    loop = _first_gpu_train_loop(ctx)
    if loop is None or explicit_false or "cudnn_benchmark_true" in ctx.facts:
        return
    ctx.report(
        CUDNN, loop,
        "convolutional GPU training program that never sets `torch.backends.cudnn.benchmark = "
        "True`: with fixed input sizes cuDNN would time its algorithms once and pick the "
        "fastest, often 10-30% faster convolutions.",
        fix=_insert(ctx, "torch.backends.cudnn.benchmark = True",
                    "turn the cuDNN autotuner on after the imports"),
        condition="+has_conv -cudnn_benchmark_true -deterministic",
    )
