"""Which autocast precision a device runs fast, decided from what the device reports and,
on a CPU, from a quick measurement of the model itself.

* CUDA: bf16 where the GPU has native bf16 tensor cores (compute capability 8.0+,
  Ampere and newer); fp16 with a GradScaler on Volta/Turing (7.x) and P100 (6.0),
  which have fast fp16 but no bf16; fp32 on the rest (e.g. sm_61 consumer Pascal,
  whose fp16 rate is a small fraction of its fp32 rate).
* CPU without bf16 instructions (``avx512_bf16`` / ``amx_bf16`` on x86, ``bf16`` on
  Arm, read from ``/proc/cpuinfo``): fp32, since bf16 would be emulated.
* CPU with them: bf16 only when it is *measured* faster on the model
  (:func:`measure_cpu_bf16`: its forward on a synthetic batch, fp32 against bf16
  autocast, in eval mode under ``no_grad``, so nothing of the model changes), by at
  least :data:`BF16_MIN_SPEEDUP`. Having the instructions is not enough: autocast casts
  weights and activations at every layer, and for small layers those casts cost more
  than the faster matmul saves (a small MLP ran 1.4–1.7× *slower* in bf16 on an AMX
  Xeon). Without a model, or when the measurement cannot run, the CPU family decides:
  bf16 on the families known to run it fast (AMX tiles, Arm bf16), fp32 otherwise.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from pitstop.sysroot import Sysroot

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

X86_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
#: Flags of CPU families whose bf16 matmuls are known to beat fp32 (used unmeasured).
KNOWN_GOOD_BF16 = ("amx_bf16", "bf16")
#: bf16 must be at least this much faster than fp32 to be chosen from a measurement.
BF16_MIN_SPEEDUP = 1.10
#: A measurement gives up (fewer repetitions) when one fp32 forward takes longer.
MEASURE_BUDGET_S = 0.5


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # "bf16" / "fp16" / "fp32"
    why: str
    #: bf16 speed over fp32 where it was measured (fp32 time / bf16 time), else None
    measured_speedup: float | None = None


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


def choose_cpu_precision(cpuinfo: str | None, measured_speedup: float | None = None
                         ) -> PrecisionChoice:
    """fp32 or bf16 for a CPU: from its flags and, when given, a measured bf16 speed-up
    (fp32 time / bf16 time on the model)."""
    flags = cpu_bf16_flags(cpuinfo)
    if cpuinfo is None:
        return PrecisionChoice("fp32", "cannot read /proc/cpuinfo to check for bf16 instructions")
    if not flags:
        return PrecisionChoice("fp32", "CPU lacks avx512_bf16/amx_bf16 (Arm: bf16): bf16 would be "
                                       "emulated, slower than fp32")
    have = ", ".join(flags)
    if measured_speedup is not None:
        if measured_speedup >= BF16_MIN_SPEEDUP:
            return PrecisionChoice("bf16", f"bf16 autocast measured {measured_speedup:.2f}x the "
                                           f"speed of fp32 on this model's forward ({have})",
                                   measured_speedup)
        return PrecisionChoice("fp32", f"bf16 autocast measured {measured_speedup:.2f}x the speed "
                                       f"of fp32 on this model's forward, below "
                                       f"{BF16_MIN_SPEEDUP:.2f}x, although the CPU has {have}: "
                                       "the casts cost more than the faster matmuls save",
                               measured_speedup)
    good = [f for f in flags if f in KNOWN_GOOD_BF16]
    if good:
        return PrecisionChoice("bf16", f"CPU family known to run bf16 faster ({', '.join(good)}); "
                                       "not measured on this model")
    return PrecisionChoice("fp32", f"CPU has {have} but not AMX: bf16 is not known to be faster "
                                   "here and was not measured on this model")


def choose_cuda_precision(capability: tuple[int, int], name: str = "GPU") -> PrecisionChoice:
    sm = f"sm_{capability[0]}{capability[1]}"
    if capability >= (8, 0):
        return PrecisionChoice("bf16", f"{name} ({sm}) has bf16 tensor cores")
    if capability >= (7, 0) or capability == (6, 0):
        return PrecisionChoice("fp16", f"{name} ({sm}) has fast fp16 but no bf16: fp16 with a "
                                       f"GradScaler")
    return PrecisionChoice("fp32", f"{name} ({sm}) has neither fast fp16 nor bf16")


def _synthetic_input(model: torch.nn.Module, device: torch.device) -> torch.Tensor | None:
    """A batch the model's first layer accepts, when that layer tells its input shape."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            return torch.randn(64, m.in_features, device=device)
        if isinstance(m, torch.nn.Conv2d):
            return torch.randn(8, m.in_channels, 64, 64, device=device)
        if isinstance(m, torch.nn.Conv1d):
            return torch.randn(8, m.in_channels, 256, device=device)
        if isinstance(m, torch.nn.Embedding):
            return torch.randint(0, m.num_embeddings, (8, 128), device=device)
        if isinstance(m, (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)):
            shape = (8, 64, m.input_size) if m.batch_first else (64, 8, m.input_size)
            return torch.randn(*shape, device=device)
    return None


@contextlib.contextmanager
def _inert(model: torch.nn.Module, cuda_device: torch.device | None = None) -> Any:
    """Run the model without changing it: eval mode (no batch-norm statistics updated,
    no dropout), no autograd, the RNG state restored; training flags restored after."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    devices = [cuda_device] if cuda_device is not None else []
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            yield
    finally:
        for m, was in flags:
            m.training = was


@dataclass(frozen=True)
class AutocastTiming:
    """Median seconds of one forward in fp32 and under autocast, and the speed-up."""

    fp32_s: float
    low_s: float
    reps: int

    @property
    def speedup(self) -> float:
        return self.fp32_s / self.low_s if self.low_s > 0 else 0.0


def time_autocast(model: torch.nn.Module, sample: Any, dtype: torch.dtype, *,
                  reps: int = 3, budget_s: float = MEASURE_BUDGET_S,
                  raise_errors: bool = False) -> AutocastTiming | None:
    """Time ``model``'s forward on ``sample`` (a tensor, or a tuple of positional
    arguments) in fp32 and under ``torch.autocast(dtype=dtype)``, interleaved, after one
    warm-up each; fewer repetitions when one forward takes longer than ``budget_s``.
    The model is left exactly as it was (see :func:`_inert`). None when it fails (or the
    model's exception, with ``raise_errors``)."""
    try:
        device = next(model.parameters()).device
    except StopIteration:
        return None
    args = tuple(sample) if isinstance(sample, (tuple, list)) else (sample,)
    cuda = device.type == "cuda"

    def forward(low: bool) -> float:
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=low):
            model(*args)
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    try:
        with _inert(model, cuda_device=device if cuda else None):
            first = forward(False)  # warm-up: oneDNN/cuBLAS set-up, caches
            forward(True)
            if first > budget_s:
                reps = 1
            fp32, low = [], []
            for _ in range(reps):
                fp32.append(forward(False))
                low.append(forward(True))
    except Exception:
        if raise_errors:
            raise
        return None
    return AutocastTiming(statistics.median(fp32), statistics.median(low), reps)


def measure_cpu_bf16(model: torch.nn.Module, sample: Any = None, *,
                     reps: int = 3) -> float | None:
    """fp32 time / bf16-autocast time of ``model``'s forward on ``sample`` (or on a
    synthetic batch its first layer accepts); None when it cannot be measured."""
    try:
        device = next(model.parameters()).device
    except StopIteration:
        return None
    with torch.random.fork_rng(devices=[]):  # the synthetic batch draws from the RNG too
        x = sample if sample is not None else _synthetic_input(model, device)
        if x is None:
            return None
        timing = time_autocast(model, x, torch.bfloat16, reps=reps)
    return timing.speedup if timing is not None and timing.low_s > 0 else None


def choose_precision(device: torch.device, sysroot: Sysroot | None = None,
                     model: torch.nn.Module | None = None) -> PrecisionChoice:
    """The precision ``"auto"`` means on ``device`` (for ``model``, measured on a CPU
    with bf16 instructions)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return choose_cuda_precision(torch.cuda.get_device_capability(index),
                                     torch.cuda.get_device_name(index))
    if device.type == "cpu":
        if not torch.backends.mkldnn.is_available():
            return PrecisionChoice("fp32", "this torch build has no oneDNN: bf16 would be slow")
        cpuinfo = (sysroot or Sysroot()).read_text("/proc/cpuinfo")
        measured = None
        if model is not None and cpu_bf16_flags(cpuinfo):
            measured = measure_cpu_bf16(model)
        return choose_cpu_precision(cpuinfo, measured)
    return PrecisionChoice("fp32", f"no fast-precision rule for device type {device.type!r}")
