"""LT011 tf32: a float32 GPU training program whose matmuls never get TF32.

Only where fp32 matmuls do much of the work: attention, transformers, explicit matmuls,
RNN cells, or Linear layers that are more than a head on a convolutional or recurrent
network (cuDNN convolutions and RNNs use TF32 by default already)."""

from __future__ import annotations

from pitstop.lint.context import ANY, ModuleContext
from pitstop.lint.rules._program import first_gpu_train_loop, insert_after_imports

CODE = "LT011"
_OFF = "-reduced_precision -precision_external -tf32_enabled"
CONDITION = ANY.join((f"{_OFF} +matmul_heavy",
                      f"{_OFF} +has_linear +has_embedding",
                      f"{_OFF} +has_linear -has_conv -has_rnn"))


def check(ctx: ModuleContext) -> None:
    loop = first_gpu_train_loop(ctx)
    if loop is None or {"reduced_precision", "precision_external", "tf32_enabled"} & ctx.facts:
        return
    ctx.report(
        CODE, loop,
        "float32 GPU training program whose matmuls (Linear layers, attention) run in full "
        "fp32 precision: on Ampere and newer GPUs "
        "`torch.set_float32_matmul_precision(\"high\")` runs them on tensor cores (TF32), "
        "several times faster, at ~10 bits of mantissa.",
        fix=insert_after_imports(ctx, 'torch.set_float32_matmul_precision("high")',
                                 "enable TF32 matmuls after the imports"),
        condition=CONDITION,
    )
