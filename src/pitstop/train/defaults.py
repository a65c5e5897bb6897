"""``fast_defaults()``: switch on the global PyTorch settings that are safe and fast.

Two switches matter for nearly every training run and are off by default for
reasons that rarely apply to training:

* ``torch.backends.cudnn.benchmark`` lets cuDNN time its convolution algorithms on
  the first call for each input shape and keep the fastest. It is off by default
  because it makes algorithm choice (and so the last bits of results) depend on
  timing, which matters only when runs must be bit-for-bit reproducible.
* ``torch.set_float32_matmul_precision("high")`` lets float32 matrix multiplies use
  TF32 tensor cores (Ampere and newer: up to ~8x the fp32 throughput, 10-bit
  mantissa inputs with fp32 accumulation). The default "highest" keeps full fp32.

The function returns a :class:`FastDefaults` record of what it changed and what it
left alone, with the reason for each, so a training script can print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class SettingChange:
    """One global setting: its name, the value it has now, the value before, and why."""

    name: str
    value: Any
    before: Any
    why: str


@dataclass
class FastDefaults:
    """What :func:`fast_defaults` did. ``print(record)`` gives one line per setting."""

    changed: list[SettingChange] = field(default_factory=list)
    unchanged: list[SettingChange] = field(default_factory=list)

    def __str__(self) -> str:
        lines = ["pitstop.train.fast_defaults:"]
        for item in self.changed:
            lines.append(f"  changed   {item.name}: {item.before!r} -> {item.value!r}  ({item.why})")
        for item in self.unchanged:
            lines.append(f"  unchanged {item.name} = {item.value!r}  ({item.why})")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        """JSON-able form (for logs and reports)."""

        def row(item: SettingChange) -> dict[str, Any]:
            return {"name": item.name, "value": item.value, "before": item.before, "why": item.why}

        return {"changed": [row(c) for c in self.changed],
                "unchanged": [row(c) for c in self.unchanged]}


def _cuda_capability() -> tuple[int, int] | None:
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def fast_defaults(*, deterministic: bool = False) -> FastDefaults:
    """Turn on cudnn autotuning and TF32 matmuls (unless told to stay deterministic).

    Args:
        deterministic: keep results reproducible run to run: cudnn autotuning is
            switched off (it picks algorithms by timing) instead of on. TF32 stays
            allowed: it is less precise than fp32 but deterministic.

    Returns:
        A printable record of each setting, changed or left alone, and why.
    """
    record = FastDefaults()
    capability = _cuda_capability()
    on_gpu = capability is not None
    no_gpu_note = "" if on_gpu else "; no effect on this machine (no CUDA device)"

    before_bench = bool(torch.backends.cudnn.benchmark)
    want_bench = not deterministic
    why_bench = (
        "deterministic=True: cudnn must not choose algorithms by timing"
        if deterministic
        else "cuDNN times its conv algorithms once per input shape and keeps the fastest"
    ) + no_gpu_note
    if before_bench != want_bench:
        torch.backends.cudnn.benchmark = want_bench
        record.changed.append(SettingChange("torch.backends.cudnn.benchmark", want_bench,
                                            before_bench, why_bench))
    else:
        record.unchanged.append(SettingChange("torch.backends.cudnn.benchmark", before_bench,
                                              before_bench, "already " + why_bench))

    before_prec = torch.get_float32_matmul_precision()
    if capability is not None and capability < (8, 0):
        tf32_note = f"; this GPU (sm_{capability[0]}{capability[1]}) has no TF32, so no effect here"
    elif on_gpu:
        tf32_note = ""
    else:
        tf32_note = "; no effect here unless the CPU's oneDNN supports reduced-precision fp32"
    if before_prec == "highest":
        torch.set_float32_matmul_precision("high")
        record.changed.append(SettingChange(
            "torch.set_float32_matmul_precision", "high", before_prec,
            "float32 matmuls may use TF32 tensor cores (fp32 range, 10-bit mantissa, fp32 "
            "accumulation)" + tf32_note))
    else:
        record.unchanged.append(SettingChange(
            "torch.set_float32_matmul_precision", before_prec, before_prec,
            f"already {before_prec!r}: set by the user or another library, left as is"))

    conv_tf32 = bool(torch.backends.cudnn.allow_tf32)
    record.unchanged.append(SettingChange(
        "torch.backends.cudnn.allow_tf32", conv_tf32, conv_tf32,
        "PyTorch's default already lets convolutions use TF32" if conv_tf32
        else "switched off by the user or another library, left as is"))
    return record
