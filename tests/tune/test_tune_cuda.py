"""pitstop.tune on a real NVIDIA GPU (run by scripts/gpu-check.sh; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tune_factories import Records

import pitstop.tune

pytestmark = pytest.mark.cuda


def _conv_model() -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))

    def batch_fn(n: int):
        return torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,))

    return {"model": model, "batch_fn": batch_fn, "loss_fn": F.cross_entropy}


def test_model_options_on_cuda_are_all_tried_and_guarded() -> None:
    result = pitstop.tune.model(_conv_model(), batch_size=64, device="cuda", budget=90,
                                repeat_seconds=0.2, skip=("compile",))
    labels = " ".join(t.config.label() for t in result.trials)
    assert "cudnn.benchmark" in labels and "channels_last" in labels
    assert any(t.config.precision == "fp16" for t in result.trials)  # fp16 + GradScaler
    capability = torch.cuda.get_device_capability()
    if capability >= (8, 0):
        assert any(t.config.precision == "bf16" for t in result.trials)
        assert any(t.config.tf32 for t in result.trials)
    assert all(t.peak_bytes for t in result.trials if t.measured)  # CUDA peak memory
    assert result.batch is not None and result.batch.limit_bytes
    chosen = result.best
    assert chosen is not None and chosen.peak_bytes is not None
    assert chosen.peak_bytes <= result.batch.limit_bytes
    for option, why in result.not_tried:
        assert "no CUDA" not in why, (option, why)


def test_batch_size_search_survives_real_cuda_out_of_memory() -> None:
    free, _total = torch.cuda.mem_get_info()
    per_sample = max(2**28, free // 24)  # out of memory somewhere above ~20 samples

    class Hungry(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scratch = torch.empty(x.shape[0] * per_sample, dtype=torch.uint8, device=x.device)
            return self.lin(x) + scratch[:1].float() * 0

    def batch_fn(n: int):
        return torch.randn(n, 8), torch.randint(0, 10, (n,))

    result = pitstop.tune.model({"model": Hungry(), "batch_fn": batch_fn,
                                 "loss_fn": F.cross_entropy}, batch_size=2, device="cuda",
                                budget=60, repeat_seconds=0.1,
                                skip=("compile", "precision", "tf32", "optimizer", "cudnn"))
    assert result.batch is not None
    statuses = {t.config.batch_size: t.status for t in result.batch.trials}
    assert "oom" in statuses.values() or any("headroom" in (t.verdict or "")
                                             for t in result.batch.trials)
    assert result.best is not None and result.best.peak_bytes is not None
    assert result.best.peak_bytes <= result.batch.limit_bytes
    torch.cuda.empty_cache()


def test_loader_for_a_gpu_target_tries_pinned_memory() -> None:
    result = pitstop.tune.loader(Records(1024, wait=0.001), 32, device="cuda", budget=30,
                                 repeat_seconds=0.15, max_workers=2)
    assert result.domain.pin_choices == (True, False)
    assert any(t.config.pin_memory for t in result.trials if t.measured)
    assert any(not t.config.pin_memory for t in result.trials if t.measured)
    assert "copy to cuda" in result.consumer
