"""pitstop.train on a real GPU (skipped without CUDA; run by scripts/gpu-check.sh)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from _train_helpers import assert_same_structure, nested, tiny_data, tiny_mlp
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


# (precision, optimizer, microbatch): every per-step path TrainStep has on one GPU.
# fp16 is checked with a fused optimizer, which takes the GradScaler's inf flag on the
# device; with an unfused one the scaler itself reads the flag on the host (a sync
# PyTorch's GradScaler.step makes, documented in TrainStep).
SYNC_FREE_CONFIGS = [
    ("bf16", "foreach", None),
    ("bf16", "foreach", "auto"),
    ("fp32", "foreach", None),
    ("fp16", "fused", None),
    ("fp16", "fused", "auto"),
]


@pytest.mark.parametrize(("precision", "kind", "microbatch"), SYNC_FREE_CONFIGS)
def test_trainstep_call_never_waits_for_the_gpu(precision: str, kind: str,
                                                microbatch: str | None) -> None:
    model = tiny_mlp().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=kind == "fused",
                            foreach=True if kind == "foreach" else None)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    step = TrainStep(model, opt, precision=precision, accumulate=2,
                     clip_grad_norm=1.0, scheduler=sched, microbatch=microbatch)
    metrics = Metrics("cuda")
    x, y = cuda_batch(32)
    bad = x.clone()
    bad[0, 0] = float("inf")
    step(x, y)  # first call: lazy state (optimizer moments, scaler) outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        # An inf input makes the fp16 scaler skip a step (without a scaler it would
        # poison the weights, so only fp16 gets it).
        for batch in ((x, bad, x) if precision == "fp16" else (x, x, x)):
            loss = step(batch, y)
            if batch is x:
                metrics.update("loss", loss, n=32)
        # The check is live: a real sync in the same mode raises.
        with pytest.raises(RuntimeError, match="synchroniz"):
            loss.item()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert loss.is_cuda and not loss.requires_grad
    assert metrics.compute()["loss"] > 0  # the one sync, outside the step
    if precision == "fp16":
        assert step.skipped_steps == 1 and step.optimizer_steps == 3
    else:
        assert step.skipped_steps == 0 and step.optimizer_steps == 4


def test_auto_precision_on_this_gpu() -> None:
    model = tiny_mlp().cuda()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))
    major, _ = torch.cuda.get_device_capability()
    assert step.precision == ("bf16" if major >= 8 else "fp16" if major >= 7 else step.precision)
    assert (step.scaler is not None) == (step.precision == "fp16")


def trajectory(precision: str) -> list[float]:
    model = tiny_mlp().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    step = TrainStep(model, opt, precision=precision, accumulate=2)
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
    pinned: dict[str, Any] = {"x": torch.randn(64, 64).pin_memory(),
                              "y": [torch.arange(4).pin_memory()]}
    moved = to_device(pinned, "cuda")  # non_blocking: no sync, so no error here
    pageable = torch.randn(64, 64)
    with pytest.raises(RuntimeError, match="synchroniz"):
        to_device(pageable, "cuda")  # a blocking copy: the right call for pageable memory
    torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(moved["x"].cpu(), pinned["x"]) and moved["y"][0].is_cuda


def test_to_device_round_trip_through_the_gpu() -> None:
    batch = nested()
    on_gpu = to_device(batch, "cuda")
    assert on_gpu["pair"].image.is_cuda and on_gpu["sample"].meta["mask"].is_cuda
    assert_same_structure(batch, to_device(on_gpu, "cpu"), same_values=True)


def test_prefetcher_with_the_tuned_loader_keeps_every_batch_intact() -> None:
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


def test_compute_stream_waits_for_the_side_stream_copy() -> None:
    # A 256 MiB copy from pinned memory takes milliseconds; the compute stream is idle
    # and reads the batch microseconds after it is handed out. Without wait_stream the
    # read would see a half-written batch. One batch per prefetcher, so no allocation
    # (which may serialize streams) falls between the copy and the read.
    torch.ones(8, device="cuda").aminmax()  # cache the small result blocks on the compute stream
    for value in (1.0, 2.0, 3.0):
        host = torch.full((64 * 2**20,), value).pin_memory()
        torch.cuda.synchronize()
        lo_hi = [torch.stack(x.aminmax()) for x in DevicePrefetcher([host], "cuda")]
        assert lo_hi[0].tolist() == [value, value]


def test_batch_memory_is_not_reused_while_the_compute_stream_still_reads_it() -> None:
    # The compute stream runs ~25 ms behind the host (a spin kernel before each read;
    # the technique of PyTorch's own record_stream test, pytorch/pytorch#27371),
    # so by the time it reads batch i the host has handed out batch i+1 and dropped
    # batch i. Without record_stream the allocator would give batch i's memory to the
    # side-stream copy of batch i+2 or i+3 at once, and the read would see its values.
    batches = [torch.full((4 * 2**20,), float(k + 1)).pin_memory() for k in range(8)]
    torch.cuda.synchronize()
    seen = []
    for x in DevicePrefetcher(batches, "cuda"):
        torch.cuda._sleep(50_000_000)  # ~25 ms of GPU clock cycles on the compute stream
        seen.append(torch.stack(x.aminmax()))
    assert [t.tolist() for t in seen] == [[k + 1.0, k + 1.0] for k in range(8)]


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
