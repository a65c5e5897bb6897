"""The rules of ``pitstop lint``, one module per rule (``_dataloader`` and ``_program``
hold what several rules share).

``HOT_RULES`` run on every expression that executes once per batch (see
:mod:`pitstop.lint.context`); ``MODULE_RULES`` run once per module after the walk.
"""

from __future__ import annotations

from collections.abc import Callable

from pitstop.lint.context import HotRule, ModuleContext
from pitstop.lint.rules import (
    amp_deprecated,
    amp_missing,
    conv_bias_bn,
    cudnn_benchmark,
    dataparallel,
    ddp_no_sync,
    debug_api,
    loader_persistent_workers,
    loader_pin_memory,
    loader_workers,
    no_grad_eval,
    non_blocking,
    sync,
    tensor_on_device,
    tf32,
    zero_grad,
)

HOT_RULES: list[tuple[str, HotRule]] = [
    (sync.CODE, sync.check_hot),
    (non_blocking.CODE, non_blocking.check_hot),
    (tensor_on_device.CODE, tensor_on_device.check_hot),
]

MODULE_RULES: list[tuple[str, Callable[[ModuleContext], None]]] = [
    (loader_workers.CODE, loader_workers.check),
    (loader_pin_memory.CODE, loader_pin_memory.check),
    (loader_persistent_workers.CODE, loader_persistent_workers.check),
    (cudnn_benchmark.CODE, cudnn_benchmark.check),
    (amp_missing.CODE, amp_missing.check),
    (amp_deprecated.CODE, amp_deprecated.check),
    (zero_grad.CODE, zero_grad.check),
    (ddp_no_sync.CODE, ddp_no_sync.check),
    (tf32.CODE, tf32.check),
    (no_grad_eval.CODE, no_grad_eval.check),
    (debug_api.CODE, debug_api.check),
    (dataparallel.CODE, dataparallel.check),
    (conv_bias_bn.CODE, conv_bias_bn.check),
]
