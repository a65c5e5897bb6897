"""LT015 dataparallel: ``torch.nn.DataParallel`` (or its functional form
``nn.parallel.data_parallel``) in a program that trains."""

from __future__ import annotations

from pitstop.lint.astutil import callee_tail, qualname
from pitstop.lint.context import OR, ModuleContext

CODE = "LT015"
CLASSES = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                     "torch.nn.parallel.data_parallel.DataParallel", "DataParallel"})
FUNCTIONS = frozenset({"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel."
                       "data_parallel", "data_parallel"})


def check(ctx: ModuleContext) -> None:
    if "ata_parallel" not in ctx.text and "DataParallel" not in ctx.text:
        return
    for tail in ("DataParallel", "data_parallel"):
        for call in ctx.index.calls_by_tail.get(tail, ()):
            qn = qualname(call.func, ctx.aliases) or callee_tail(call)
            if qn not in CLASSES | FUNCTIONS:
                continue
            form = "`nn.DataParallel`" if tail == "DataParallel" else \
                "`nn.parallel.data_parallel(...)` (the functional DataParallel)"
            ctx.report(
                CODE, call,
                f"{form} trains in one process with one Python thread per GPU: it "
                "re-copies the model to every GPU each step and gathers outputs on GPU 0, and is "
                "usually slower than DistributedDataParallel (one process per GPU, launched with "
                "torchrun).",
                condition=f"+train_program{OR}train_run",  # the program trains
            )
