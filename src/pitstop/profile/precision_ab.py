"""The precision A/B: what lower precision would buy *this* model on *this* machine.

At the end of the profiled window, in the training process, the outermost module's
forward is run on the last batch it saw, in fp32 and under ``torch.autocast`` with the
precision the device supports (bf16 on a CPU with bf16 instructions or an Ampere+ GPU,
fp16 on Volta/Turing), interleaved, a few times each
(:func:`pitstop.train.precision.time_autocast`: eval mode, no autograd, RNG restored, so
the model, its batch-norm statistics and the run's random stream are left as they
were). The fix list then quotes the measured ratio instead of a generic claim.

Skipped (and the reason kept) when the script already runs under autocast, under
torchrun/DDP (a forward there can join collectives the other ranks would not), when no
model call was seen, when the device has no fast low precision, or when one forward
takes so long that the A/B would hold the run up for more than :data:`BUDGET_S`.
"""

from __future__ import annotations

import os
import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pitstop.profile.recorder import Recorder

__all__ = ["BUDGET_S", "run_ab"]

BUDGET_S = 3.0
_CALLS = 8  # 2 warm-up + 3 x 2 timed forwards


def _device_of(module: Any, args: Any, torch: Any) -> Any:
    for p in module.parameters():
        return p.device
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return None


def run_ab(torch: Any, last_forward: tuple[Any, Any] | None, rec: Recorder) -> dict[str, Any]:
    """``{"dtype", "fp32_ms", "low_ms", "speedup", "what"}`` or ``{"skipped": why}``."""
    from pitstop.train.precision import choose_cuda_precision, cpu_bf16_flags, time_autocast

    if rec.autocast_seen:
        return {"skipped": "the script already runs its model under torch.autocast"}
    if rec.ddp_seen or os.environ.get("WORLD_SIZE", "1") not in ("", "1"):
        return {"skipped": "not under torchrun/DDP: a forward there can join collectives"}
    if last_forward is None:
        return {"skipped": "no model call (nn.Module forward) was seen"}
    module, args = last_forward
    device = _device_of(module, args, torch)
    if device is None:
        return {"skipped": "the model has no parameters and no tensor input"}
    if device.type == "cpu":
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                flags = cpu_bf16_flags(fh.read())
        except OSError:
            flags = []
        if not flags:
            return {"skipped": "this CPU has no bf16 instructions: bf16 would be emulated "
                               "(slower), fp32 stays"}
        dtype, name = torch.bfloat16, "bf16"
    elif device.type == "cuda":
        choice = choose_cuda_precision(torch.cuda.get_device_capability(device))
        if choice.precision == "fp32":
            return {"skipped": choice.why}
        name = choice.precision
        dtype = torch.bfloat16 if name == "bf16" else torch.float16
    else:
        return {"skipped": f"no precision rule for device type {device.type}"}
    fwd = [b - a for a, b in rec.intervals.get("forward", [])]
    per_call_s = (statistics.median(fwd) / 1e9) if fwd else 0.0
    if per_call_s * _CALLS > BUDGET_S:
        return {"skipped": f"one forward takes {per_call_s * 1e3:.0f} ms: the A/B would hold the "
                           f"run up more than {BUDGET_S:.0f} s"}
    try:
        timing = time_autocast(module, args, dtype, raise_errors=True)
    except Exception as err:
        return {"skipped": f"the model's forward fails under {name} autocast (in eval mode, "
                           f"no grad): {type(err).__name__}: {str(err)[:160]}"}
    if timing is None:
        return {"skipped": "the model has no parameters to time"}
    return {"dtype": name, "device": device.type, "fp32_ms": round(timing.fp32_s * 1e3, 3),
            "low_ms": round(timing.low_s * 1e3, 3), "speedup": round(timing.speedup, 3),
            "reps": timing.reps, "module": type(module).__name__,
            "what": f"forward of the last batch ({type(module).__name__}), fp32 vs {name} "
                    "autocast, median of interleaved runs"}
