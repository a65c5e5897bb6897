"""microbatch="auto" on one process: real OOM exceptions from a byte budget the test
imposes on the model (see _train_helpers.OutOfBudget)."""

from __future__ import annotations

import logging

import pytest
import torch
from _train_helpers import OutOfBudget, capture_grads, tiny_data, tiny_mlp

from pitstop.train import TrainStep
from pitstop.train.microbatch import batch_size_of, micro_batches


def budgeted(budget_samples: int, *, in_backward: bool = False) -> OutOfBudget:
    return OutOfBudget(tiny_mlp(), bytes_per_sample=1000, budget=budget_samples * 1000,
                       in_backward=in_backward)


@pytest.mark.parametrize("in_backward", [False, True], ids=["oom-in-forward", "oom-in-backward"])
def test_halves_until_it_fits_and_keeps_the_full_batch_gradients(in_backward: bool,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    x, y = tiny_data(64)
    ref_model = tiny_mlp()
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    ref_grads: list[list[torch.Tensor]] = []
    capture_grads(ref_opt, ref_grads)
    TrainStep(ref_model, ref_opt, precision="fp32")(x, y)

    model = budgeted(12, in_backward=in_backward)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads: list[list[torch.Tensor]] = []
    capture_grads(opt, grads)
    step = TrainStep(model, opt, precision="fp32", microbatch="auto")
    with caplog.at_level(logging.WARNING, logger="pitstop.train"):
        loss = step(x, y)
    assert step.micro_batch_size == 8  # 64 -> 32 -> 16 -> 8
    assert model.attempts[:3] == [64, 32, 16]
    assert "retrying with 32" in caplog.text and "retrying with 8" in caplog.text
    assert len(grads) == 1  # one optimizer step, taken once everything fit
    for g, r in zip(grads[0], ref_grads[0], strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
    assert loss.item() == pytest.approx(torch.nn.functional.cross_entropy(tiny_mlp()(x), y).item(), rel=1e-5)

    # The size found is kept: the next batch starts at 8, no new out-of-memory.
    model.attempts.clear()
    step(x, y)
    assert model.attempts == [8] * 8


def test_partial_gradients_do_not_leak_into_the_retry() -> None:
    # The first attempt (32+32) does a full backward of the first half before the second
    # half fails; its gradients must be dropped, not added to the retry's.
    x, y = tiny_data(64)
    model = OutOfBudget(tiny_mlp(), bytes_per_sample=1, budget=10**9, fail_calls=(1,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads: list[list[torch.Tensor]] = []
    capture_grads(opt, grads)
    step = TrainStep(model, opt, precision="fp32", accumulate=2, microbatch="auto")
    step(x, y)
    assert model.attempts == [32, 32, 16, 16, 16, 16]
    ref = tiny_mlp()
    torch.nn.functional.cross_entropy(ref(x), y).backward()
    for g, p in zip(grads[0], ref.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-6)


def test_starts_from_the_accumulate_split() -> None:
    model = budgeted(100)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32",
                     accumulate=4, microbatch="auto")
    step(*tiny_data(64))
    assert model.attempts == [16, 16, 16, 16]


def test_clear_error_when_even_one_sample_does_not_fit() -> None:
    model = OutOfBudget(tiny_mlp(), bytes_per_sample=1000, budget=999)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32",
                     microbatch="auto")
    with pytest.raises(torch.OutOfMemoryError, match="even with micro-batches of 1 sample"):
        step(*tiny_data(8))
    assert model.attempts[:4] == [8, 4, 2, 1]
    assert all(p.grad is None for p in model.parameters())


def test_fp16_scaler_survives_the_retry() -> None:
    model = budgeted(16)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    step = TrainStep(model, opt, precision="fp16", microbatch="auto", clip_grad_norm=5.0,
                     allow_fp16_on_cpu=True)
    x, y = tiny_data(64)
    losses = [step(x, y).item() for _ in range(5)]
    assert step.micro_batch_size == 16
    assert step.skipped_steps == 0 and step.optimizer_steps == 5
    assert losses[-1] < losses[0]


def test_library_allocation_failures_count_as_out_of_memory() -> None:
    # cuBLAS handle/workspace allocation fails with a RuntimeError, not OutOfMemoryError
    # (message as PyTorch's CUDABlasHandlePool raises it).
    model = OutOfBudget(tiny_mlp(), bytes_per_sample=1000, budget=16 * 1000,
                        runtime_error="CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                                      "`cublasCreate(handle)`")
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32",
                     microbatch="auto")
    step(*tiny_data(64))
    assert step.micro_batch_size == 16 and model.attempts[:3] == [64, 32, 16]


def test_other_runtime_errors_are_not_retried() -> None:
    model = OutOfBudget(tiny_mlp(), bytes_per_sample=1000, budget=16 * 1000,
                        runtime_error="mat1 and mat2 shapes cannot be multiplied")
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32",
                     microbatch="auto")
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        step(*tiny_data(64))
    assert model.attempts == [64]


def test_without_auto_the_error_propagates() -> None:
    model = budgeted(8)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32")
    with pytest.raises(torch.OutOfMemoryError, match="budget"):
        step(*tiny_data(16))


def test_micro_batches_split_nested_batches_and_weight_by_share() -> None:
    batch = ({"a": torch.arange(10), "mask": torch.ones(10, 2)}, torch.arange(10) * 2, "tag", torch.tensor(3.0))
    assert batch_size_of(batch) == 10
    parts = list(micro_batches(batch, 10, 4))
    assert [w for _, w in parts] == [0.4, 0.4, 0.2]
    assert [p[0]["a"].tolist() for p, _ in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert all(p[2] == "tag" and p[3].item() == 3.0 for p, _ in parts)  # not batch-shaped: kept
