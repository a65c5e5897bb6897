"""The rungs of the ladder: names, the knob each adds, and ``--rungs`` parsing.

Kept free of torch so that the CLI can check ``--rungs`` without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rung:
    index: int
    name: str
    knob: str | None
    title: str
    change: str


RUNGS: tuple[Rung, ...] = (
    Rung(0, "naive", None, "naive loop",
         "num_workers=0, no pinned memory, loss.item() printed every step, fp32, "
         "cudnn autotuner off"),
    Rung(1, "workers", "workers", "DataLoader workers",
         "decode and augment in worker processes (count from pitstop.train.loader); "
         "on a CPU, measured with torch's threads cut to the CPUs the workers leave and "
         "uncut, the faster kept"),
    Rung(2, "pinned", "pinned", "pinned memory + non_blocking",
         "pin_memory=True, non_blocking copies, DevicePrefetcher on a side stream"),
    Rung(3, "cudnn-benchmark", "cudnn_benchmark", "cudnn.benchmark",
         "cuDNN times its convolution algorithms once per shape and keeps the fastest"),
    Rung(4, "no-sync", "no_sync", "no per-step sync",
         "loss kept on the device in pitstop.train.Metrics, read every N steps"),
    Rung(5, "mixed-precision", "mixed_precision", "mixed precision",
         'TrainStep(precision="auto"): bf16/fp16 autocast (GradScaler for fp16)'),
    Rung(6, "channels-last", "channels_last", "channels_last",
         "model and inputs in NHWC memory format"),
    Rung(7, "compile", "compile", "torch.compile",
         "torch.compile(model); compile time excluded by the warm-up"),
)

RUNG_BY_NAME = {r.name: r for r in RUNGS}


def parse_rungs(text: str) -> set[int]:
    """``"0,1,4"``, ``"0-4"``, ``"workers,compile"`` -> rung indices. Raises ValueError."""
    chosen: set[int] = set()
    for raw in text.split(","):
        part = raw.strip().lower()
        if not part:
            continue
        if part in RUNG_BY_NAME:
            chosen.add(RUNG_BY_NAME[part].index)
        elif "-" in part and all(p.strip().isdigit() for p in part.split("-", 1)):
            lo, hi = (int(p) for p in part.split("-", 1))
            if lo > hi or hi >= len(RUNGS):
                raise ValueError(f"range {part!r} is outside 0-{len(RUNGS) - 1}")
            chosen.update(range(lo, hi + 1))
        elif part.isdigit() and int(part) < len(RUNGS):
            chosen.add(int(part))
        else:
            names = ", ".join(f"{r.index}={r.name}" for r in RUNGS)
            raise ValueError(f"unknown rung {raw.strip()!r}; rungs are {names}")
    return chosen
