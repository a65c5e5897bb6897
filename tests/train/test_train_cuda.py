"""pitstop.train on a real GPU (skipped without CUDA; run by scripts/gpu-check.sh)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from _train_helpers import tiny_data, tiny_mlp
from torch.utils.data import TensorDataset

from pitstop.train import DevicePrefetcher, Metrics, TrainStep, loader, to_device

pytestmark = pytest.mark.cuda


@pytest.fixture
def sync_errors() -> Iterator[None]:
    """Any host-device synchronization inside the block raises RuntimeError."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def cuda_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = tiny_data(n)
    return x.cuda(), y.cuda()


@pytest.mark.parametrize("microbatch", [None, "auto"])
def test_trainstep_call_never_waits_for_the_gpu(microbatch: str | None) -> None:
    model = tiny_mlp().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    step = TrainStep(model, opt, precision="bf16", accumulate=2, clip_grad_norm=1.0,
                     scheduler=sched, microbatch=microbatch)  # type: ignore[arg-type]
    metrics = Metrics("cuda")
    x, y = cuda_batch(32)
    step(x, y)  # first call: lazy state (optimizer moments) outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            loss = step(x, y)
            metrics.update("loss", loss, n=32)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert loss.is_cuda and not loss.requires_grad
    assert metrics.compute()["loss"] > 0  # the one sync, outside the step


def test_auto_precision_on_this_gpu() -> None:
    model = tiny_mlp().cuda()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))
    major, _ = torch.cuda.get_device_capability()
    assert step.precision == ("bf16" if major >= 8 else "fp16" if major >= 7 else step.precision)
    assert (step.scaler is not None) == (step.precision == "fp16")


def trajectory(precision: str) -> list[float]:
    model = tiny_mlp().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    step = TrainStep(model, opt, precision=precision, accumulate=2)  # type: ignore[arg-type]
    x, y = cuda_batch(64)
    return [step(x, y).item() for _ in range(25)]


def test_fp16_and_bf16_train_like_fp32_on_gpu() -> None:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # a true fp32 reference, no TF32
    try:
        fp32 = trajectory("fp32")
    finally:
        torch.set_float32_matmul_precision(before)
    for precision in ("fp16", "bf16"):
        other = trajectory(precision)
        for a, b in zip(fp32, other, strict=True):
            assert b == pytest.approx(a, abs=0.03, rel=0.03), precision


def test_pinned_batches_copy_without_blocking_and_pageable_ones_block(sync_errors: None) -> None:
    pinned = {"x": torch.randn(64, 64).pin_memory(), "y": [torch.arange(4).pin_memory()]}
    moved = to_device(pinned, "cuda")  # non_blocking: no sync, so no error here
    pageable = torch.randn(64, 64)
    with pytest.raises(RuntimeError, match="synchroniz"):
        to_device(pageable, "cuda")  # a blocking copy: the right call for pageable memory
    torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(moved["x"].cpu(), pinned["x"]) and moved["y"][0].is_cuda


def test_prefetcher_overlaps_copies_and_keeps_every_batch_intact() -> None:
    n, width = 48, 1 << 16
    data = torch.arange(n, dtype=torch.float32)[:, None].expand(n, width).contiguous()
    dl = loader(TensorDataset(data, torch.arange(n)), 4, shuffle=False, device="cuda", num_workers=0)
    assert dl.pin_memory
    busy = torch.randn(2048, 2048, device="cuda")
    sums, labels = [], []
    for x, y in DevicePrefetcher(dl, "cuda"):
        assert x.is_cuda and y.is_cuda
        for _ in range(4):  # keep the compute stream busy while the next copy runs
            busy = torch.tanh(busy @ busy)
        sums.append(x.sum(dim=1))
        labels.append(y)
    got = torch.cat(sums).cpu()
    expected = torch.arange(n, dtype=torch.float32) * width
    assert torch.equal(got, expected)
    assert torch.cat(labels).cpu().tolist() == list(range(n))


def test_auto_microbatch_survives_a_real_cuda_oom() -> None:
    # A real allocator limit: cap this process's caching allocator at 128 MiB. Fixed
    # costs: weights 17 MiB, their gradients 17 MiB, the batch 17 MiB; activations
    # ~48 KiB per sample (200 MiB for all 4096), so only ~1500 samples fit at once.
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(128 * 2**20 / total)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(4096, 1024, device="cuda")
        y = torch.randint(0, 10, (4096,), device="cuda")
        step = TrainStep(model, opt, precision="fp32", microbatch="auto")
        loss = step(x, y)
        assert torch.isfinite(loss).item()
        assert step.micro_batch_size is not None and step.micro_batch_size < 4096
        assert step.optimizer_steps == 1
        loss2 = step(x, y)  # the size found is kept
        assert torch.isfinite(loss2).item() and step.optimizer_steps == 2
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


def test_batch_on_cpu_with_model_on_gpu() -> None:
    model = tiny_mlp().cuda()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="batch is on cpu but the model is on cuda"):
        step(*tiny_data(4))
