"""LT011 tf32: a float32 GPU training program that never enables TF32."""

from __future__ import annotations

from pitstop.lint.context import ModuleContext
from pitstop.lint.rules._program import first_gpu_train_loop, insert_after_imports

CODE = "LT011"


def check(ctx: ModuleContext) -> None:
    loop = first_gpu_train_loop(ctx)
    if loop is None or {"reduced_precision", "tf32_enabled"} & ctx.facts:
        return
    ctx.report(
        CODE, loop,
        "float32 GPU training program that never enables TF32 for matmuls: on Ampere and "
        "newer GPUs `torch.set_float32_matmul_precision(\"high\")` runs them on tensor cores, "
        "several times faster, at ~10 bits of mantissa.",
        fix=insert_after_imports(ctx, 'torch.set_float32_matmul_precision("high")',
                    "enable TF32 matmuls after the imports"),
        condition="-reduced_precision -tf32_enabled",
    )
