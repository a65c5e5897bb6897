"""LT015 dataparallel: ``torch.nn.DataParallel`` used for training."""

from __future__ import annotations

from pitstop.lint.astutil import callee_tail, qualname
from pitstop.lint.context import ModuleContext

CODE = "LT015"


def check(ctx: ModuleContext) -> None:
    if "DataParallel" not in ctx.text or "backward" not in ctx.text:
        return
    for call in ctx.calls:
        if callee_tail(call) != "DataParallel":
            continue
        qn = qualname(call.func, ctx.aliases) or ""
        if qn not in {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                      "torch.nn.parallel.data_parallel.DataParallel", "DataParallel"}:
            continue
        ctx.report(
            CODE, call,
            "`nn.DataParallel` trains in one process with one Python thread per GPU: it "
            "re-copies the model to every GPU each step and gathers outputs on GPU 0, and is "
            "usually slower than DistributedDataParallel (one process per GPU, launched with "
            "torchrun).",
        )
