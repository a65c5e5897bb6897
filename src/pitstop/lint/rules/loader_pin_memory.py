"""LT003 loader-pin-memory: a DataLoader whose batches go to a GPU (wherever in the
program they are moved), without pin_memory=True."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, kwarg
from pitstop.lint.context import OR, USE_GPU, ModuleContext
from pitstop.lint.loaders import ABSENT, PINS_ITSELF, dataset_on_device, whole_split_batch
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import (
    arg_values,
    call_position,
    cheap_items,
    dataloader_calls,
    flag_state,
)

CODE = "LT003"
ANY_LOADER_TO_GPU = "loader_gpu_any"  # some batch of the program goes to the GPU, loader unknown


def check(ctx: ModuleContext) -> None:
    if not ctx.gpu_program:
        return
    for call in dataloader_calls(ctx):
        # (a TensorDataset's batches are slices of tensors already built; a Dataset whose
        # __getitem__ calls and indexes nothing hands back prompt strings and indices --
        # one that slices held lists still has its batches collated into tensors)
        if cheap_items(ctx, call, plain=True) or callee_tail(call) in PINS_ITSELF \
                or dataset_on_device(ctx.index, call) or whole_split_batch(call):
            continue
        values = arg_values(ctx, call, "pin_memory")
        states = {flag_state(ctx, v) for v in values}
        if states != {"false"}:
            continue
        line, col = call_position(ctx, call)
        explicit = kwarg(call, "pin_memory")
        fix = None
        if explicit is None and values == [ABSENT] and not any(k.arg is None for k in call.keywords):
            fix = Fix(SAFE, "add pin_memory=True",
                      (Edit("kw_add", line, col, "DataLoader", name="pin_memory", value="True"),))
        elif explicit is not None and isinstance(explicit.value, ast.Constant):
            fix = Fix(UNSAFE, "set pin_memory=True",
                      (Edit("kw_set", line, col, "DataLoader", name="pin_memory", value="True"),))
        ctx.report(
            CODE, call,
            "DataLoader feeds batches that the program copies to the GPU, but does not pin "
            "them: each copy from pageable memory goes through a staging buffer and cannot "
            "overlap with compute. Add `pin_memory=True`.",
            fix=fix,
            condition=f"+{USE_GPU}{ctx.loader_key(call)}{OR}{ANY_LOADER_TO_GPU}",
        )
