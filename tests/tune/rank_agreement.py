"""Run under torchrun: every rank tunes the same model, whose memory limit differs by rank,
through the same agreement the CLI uses, and writes its own answer to OUTDIR/rankN.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_factories import rank_memory_bound

from pitstop.bench.distributed import detect
from pitstop.tune.distributed import RankAgreement
from pitstop.tune.model_tune import tune_model


def main() -> None:
    out = Path(sys.argv[1])
    info = detect()
    assert info is not None, "run me under torchrun"
    group = RankAgreement(info, torch.device("cpu"))
    try:
        result = tune_model(rank_memory_bound(), device="cpu", budget=20, batch_size=8,
                            repeat_seconds=0.05, agree=group.reduce, world_size=info.world_size,
                            skip=("compile", "precision", "optimizer"))
    finally:
        group.close()
    oom = sorted({t.config.batch_size for t in result.trials if t.status == "oom"})
    (out / f"rank{info.rank}.json").write_text(json.dumps(
        {"settings": result.settings, "oom_sizes": oom, "world_size": info.world_size}))


if __name__ == "__main__":
    main()
