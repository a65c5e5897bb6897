"""The rules of ``pitstop lint``, one module per rule (the DataLoader rules share one).

``HOT_RULES`` run on every expression that executes once per batch (see
:mod:`pitstop.lint.context`); ``MODULE_RULES`` run once per module after the walk.
"""

from __future__ import annotations

from collections.abc import Callable

from pitstop.lint.context import HotRule, ModuleContext
from pitstop.lint.rules import (
    amp_deprecated,
    conv_bias_bn,
    dataparallel,
    ddp_no_sync,
    debug_api,
    loaders,
    no_grad_eval,
    non_blocking,
    program,
    sync,
    tensor_on_device,
    zero_grad,
)

HOT_RULES: list[tuple[str, HotRule]] = [
    (sync.CODE, sync.check_hot),
    (non_blocking.CODE, non_blocking.check_hot),
    (tensor_on_device.CODE, tensor_on_device.check_hot),
]

MODULE_RULES: list[tuple[str, Callable[[ModuleContext], None]]] = [
    (loaders.WORKERS, loaders.check_workers),
    (loaders.PIN_MEMORY, loaders.check_pin_memory),
    (loaders.PERSISTENT, loaders.check_persistent),
    (program.CUDNN, program.check_cudnn),
    (program.AMP_MISSING, program.check_amp_missing),
    (amp_deprecated.CODE, amp_deprecated.check),
    (zero_grad.CODE, zero_grad.check),
    (ddp_no_sync.CODE, ddp_no_sync.check),
    (program.TF32, program.check_tf32),
    (no_grad_eval.CODE, no_grad_eval.check),
    (debug_api.CODE, debug_api.check),
    (dataparallel.CODE, dataparallel.check),
    (conv_bias_bn.CODE, conv_bias_bn.check),
]
