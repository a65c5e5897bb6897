"""LT006 amp-missing: a GPU training loop in a program that never uses autocast."""

from __future__ import annotations

from pitstop.lint.context import ModuleContext
from pitstop.lint.rules._program import first_gpu_train_loop

CODE = "LT006"


def check(ctx: ModuleContext) -> None:
    loop = first_gpu_train_loop(ctx)
    if loop is None or {"reduced_precision", "precision_external"} & ctx.facts:
        return
    ctx.report(
        CODE, loop,
        f"GPU training loop (line {getattr(loop, 'lineno', '?')}) runs in float32: no autocast, "
        "bf16/fp16 or mixed-precision setting anywhere in this program. bf16/fp16 autocast "
        "runs matmuls and convolutions on tensor cores, typically 2-3x faster, and halves "
        "activation memory. Wrap the forward pass and loss in "
        "`torch.autocast(\"cuda\", dtype=torch.bfloat16)`.",
        condition="-reduced_precision -precision_external",
    )
