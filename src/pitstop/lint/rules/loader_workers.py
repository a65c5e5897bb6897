"""LT002 loader-workers: a DataLoader built with num_workers absent or 0 -- at the call,
through ``**kwargs`` on every path, or through an option whose default is 0."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import kwarg
from pitstop.lint.context import ModuleContext
from pitstop.lint.loaders import ABSENT, POSITIONS, whole_split_batch
from pitstop.lint.model import UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import (
    ZERO,
    arg_values,
    call_position,
    cheap_items,
    dataloader_calls,
    number_state,
    suggested_workers,
)

CODE = "LT002"


def check(ctx: ModuleContext) -> None:
    for call in dataloader_calls(ctx):
        if cheap_items(ctx, call) or whole_split_batch(call):
            continue  # nothing to decode or load, or all of it at once: workers cannot help
        values = arg_values(ctx, call, "num_workers")
        scope = ctx.index.owner.get(call)
        judged = [number_state(ctx, v, scope) for v in values]
        if not judged or any(j.state != ZERO for j in judged):
            continue
        n = suggested_workers(ctx.cpus, ctx.local_world_size)
        line, col = call_position(ctx, call)
        explicit = kwarg(call, "num_workers")
        positional = explicit is None and len(call.args) > POSITIONS["num_workers"]
        stars = any(k.arg is None for k in call.keywords)
        edit: Edit | None = None
        if explicit is not None and isinstance(explicit.value, ast.Constant):
            edit = Edit("kw_set", line, col, "DataLoader", name="num_workers", value=str(n))
        elif positional and isinstance(call.args[POSITIONS["num_workers"]], ast.Constant):
            edit = Edit("arg_set", line, col, "DataLoader", index=5, value=str(n))
        elif explicit is None and not positional and values == [ABSENT]:
            edit = Edit("kw_add", line, col, "DataLoader", name="num_workers", value=str(n))
        j = judged[0]
        if j.why == "absent":
            what = "with no num_workers (so 0)" if not stars else \
                "with no num_workers on any path through its `**` keyword arguments (so 0)"
        elif j.where:
            what = f"with num_workers={j.why} ({j.where}), so 0 unless the user passes it"
        else:
            what = "with num_workers=0"
        ctx.report(
            CODE, call,
            f"DataLoader built {what}: every batch is loaded, decoded and collated in the "
            f"training process while the GPU waits. Start with num_workers={n} "
            f"({ctx.cpus} CPUs usable by this process, LOCAL_WORLD_SIZE={ctx.local_world_size}: "
            f"Lightning's conservative bound max(1, cpus // local_world_size - 1)); measure "
            f"the real optimum with `pitstop bench`.",
            fix=Fix(UNSAFE, f"set num_workers={n}", (edit,)) if edit else None,
            evidence=(("num_workers", 0), ("cpus_usable", ctx.cpus),
                      ("local_world_size", ctx.local_world_size), ("suggested", n),
                      *((("default_at", j.where),) if j.where else ())),
        )
