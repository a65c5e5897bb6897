"""Which autocast precision a device runs fast, decided from what the device reports.

* CUDA: bf16 where the GPU has native bf16 tensor cores (compute capability 8.0+,
  Ampere and newer); fp16 with a GradScaler on Volta/Turing (7.x) and P100 (6.0),
  which have fast fp16 but no bf16; fp32 on the rest (e.g. sm_61 consumer Pascal,
  whose fp16 rate is a small fraction of its fp32 rate).
* CPU: bf16 only when the CPU has bf16 instructions that oneDNN uses
  (``avx512_bf16`` or ``amx_bf16`` on x86, ``bf16`` on Arm), read from
  ``/proc/cpuinfo``; otherwise bf16 is emulated and slower than fp32, so fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pitstop.sysroot import Sysroot

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

X86_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # "bf16" / "fp16" / "fp32"
    why: str


def cpu_bf16_flags(cpuinfo: str | None) -> list[str]:
    """The bf16-capable instruction-set flags in a ``/proc/cpuinfo`` text."""
    found: set[str] = set()
    for line in (cpuinfo or "").splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "flags":
            found.update(f for f in value.split() if f in X86_BF16_FLAGS)
        elif key == "features" and "bf16" in value.split():  # aarch64 (ARMv8.6 BF16)
            found.add("bf16")
    return sorted(found)


def choose_cpu_precision(cpuinfo: str | None) -> PrecisionChoice:
    flags = cpu_bf16_flags(cpuinfo)
    if flags:
        return PrecisionChoice("bf16", f"CPU has bf16 instructions ({', '.join(flags)})")
    if cpuinfo is None:
        return PrecisionChoice("fp32", "cannot read /proc/cpuinfo to check for bf16 instructions")
    return PrecisionChoice("fp32", "CPU lacks avx512_bf16/amx_bf16 (Arm: bf16): bf16 would be "
                                   "emulated, slower than fp32")


def choose_cuda_precision(capability: tuple[int, int], name: str = "GPU") -> PrecisionChoice:
    sm = f"sm_{capability[0]}{capability[1]}"
    if capability >= (8, 0):
        return PrecisionChoice("bf16", f"{name} ({sm}) has bf16 tensor cores")
    if capability >= (7, 0) or capability == (6, 0):
        return PrecisionChoice("fp16", f"{name} ({sm}) has fast fp16 but no bf16: fp16 with a "
                                       f"GradScaler")
    return PrecisionChoice("fp32", f"{name} ({sm}) has neither fast fp16 nor bf16")


def choose_precision(device: torch.device, sysroot: Sysroot | None = None) -> PrecisionChoice:
    """The precision ``"auto"`` means on ``device``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return choose_cuda_precision(torch.cuda.get_device_capability(index),
                                     torch.cuda.get_device_name(index))
    if device.type == "cpu":
        if not torch.backends.mkldnn.is_available():
            return PrecisionChoice("fp32", "this torch build has no oneDNN: bf16 would be slow")
        return choose_cpu_precision((sysroot or Sysroot()).read_text("/proc/cpuinfo"))
    return PrecisionChoice("fp32", f"no fast-precision rule for device type {device.type!r}")
