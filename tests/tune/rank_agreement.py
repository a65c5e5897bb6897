"""Run under torchrun: every rank tunes the same model, which behaves differently by rank
(``rank_memory_bound``: the memory limit; ``rank_slow_under_bf16``: how long a bf16 step
takes), through the same agreement the CLI uses, and writes its own answer to
OUTDIR/rankN.json. Usage: rank_agreement.py OUTDIR [FACTORY]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_factories

from pitstop.bench.distributed import detect
from pitstop.tune.distributed import RankAgreement
from pitstop.tune.model_tune import tune_model


def main() -> None:
    out = Path(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 else "rank_memory_bound"
    slow = name == "rank_slow_under_bf16"
    info = detect()
    assert info is not None, "run me under torchrun"
    group = RankAgreement(info, torch.device("cpu"))
    try:
        result = tune_model(getattr(tune_factories, name)(), device="cpu",
                            budget=10 if slow else 20, batch_size=8, repeat_seconds=0.05,
                            agree=group.reduce, world_size=info.world_size,
                            skip=(("compile", "optimizer", "batch-size") if slow
                                  else ("compile", "precision", "optimizer")))
    finally:
        group.close()
    oom = sorted({t.config.batch_size for t in result.trials if t.status == "oom"})
    (out / f"rank{info.rank}.json").write_text(json.dumps(
        {"settings": result.settings, "oom_sizes": oom, "world_size": info.world_size,
         "trials": [[t.config.label(), t.status, t.reason] for t in result.trials]}))


if __name__ == "__main__":
    main()
