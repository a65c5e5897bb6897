"""TrainStep: accumulation equals the full batch, precision paths, bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from _train_helpers import capture_grads, tiny_data, tiny_mlp

from pitstop.train import TrainStep
from pitstop.train.precision import (
    choose_cpu_precision,
    choose_cuda_precision,
    cpu_bf16_flags,
    measure_cpu_bf16,
)


def grads_of_one_step(batch: int, accumulate: int, **kw: object) -> list[torch.Tensor]:
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads: list[list[torch.Tensor]] = []
    capture_grads(opt, grads)
    step = TrainStep(model, opt, precision="fp32", accumulate=accumulate, **kw)  # type: ignore[arg-type]
    x, y = tiny_data(batch)
    step(x, y)
    assert len(grads) == 1
    return grads[0]


@pytest.mark.parametrize(("batch", "accumulate"), [(32, 4), (30, 4), (7, 3), (5, 8)])
def test_accumulated_gradients_equal_full_batch_gradients(batch: int, accumulate: int) -> None:
    full = grads_of_one_step(batch, 1)
    acc = grads_of_one_step(batch, accumulate)
    for g_full, g_acc in zip(full, acc, strict=True):
        torch.testing.assert_close(g_acc, g_full, rtol=1e-5, atol=1e-6)


def test_returned_loss_is_the_batch_mean_as_a_detached_device_tensor() -> None:
    model = tiny_mlp()
    x, y = tiny_data(24)
    expected = torch.nn.functional.cross_entropy(model(x), y).item()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0), precision="fp32",
                     accumulate=5)  # 24 = 5+5+5+5+4: unequal micro-batches, still the mean
    loss = step(x, y)
    assert isinstance(loss, torch.Tensor)
    assert not loss.requires_grad and loss.device == x.device
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert step.micro_batch_size == 5


def test_gradients_are_freed_and_scheduler_steps_with_optimizer() -> None:
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = TrainStep(model, opt, precision="fp32", scheduler=sched, clip_grad_norm=0.01)
    x, y = tiny_data(8)
    step(x, y)
    step(x, y)
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
    assert step.optimizer_steps == 2 and step.skipped_steps == 0
    assert step.last_grad_norm is not None and step.last_grad_norm.item() > 0.01


def test_clipping_bounds_the_update() -> None:
    model = tiny_mlp()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    TrainStep(model, opt, precision="fp32", clip_grad_norm=1e-3)(*tiny_data(16))
    moved = math.sqrt(sum(float((p.detach() - b).pow(2).sum()) for p, b in
                          zip(model.parameters(), before, strict=True)))
    assert moved == pytest.approx(1e-3, rel=1e-3)  # lr 1 x clipped norm


def test_dict_and_tuple_inputs_reach_the_model_as_keywords_and_positionals() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 3)
            self.b = nn.Linear(2, 3)

        def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
            return self.a(left) + self.b(right)

    torch.manual_seed(0)
    model = TwoInputs()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(model, opt, precision="fp32", accumulate=2)
    y = torch.randint(0, 3, (6,))
    left, right = torch.randn(6, 4), torch.randn(6, 2)
    l1 = step({"left": left, "right": right}, y)
    l2 = step((left, right), y)
    assert l2.item() < l1.item()  # it learns from both call styles


def loss_trajectory(precision: str, steps: int = 25, **kw: object) -> list[float]:
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    step = TrainStep(model, opt, precision=precision, accumulate=2, **kw)  # type: ignore[arg-type]
    x, y = tiny_data(64)
    return [step(x, y).item() for _ in range(steps)]


def test_bf16_trains_like_fp32() -> None:
    fp32 = loss_trajectory("fp32")
    bf16 = loss_trajectory("bf16")
    assert fp32[-1] < 0.6 * fp32[0]  # the model does learn
    for a, b in zip(fp32, bf16, strict=True):
        assert b == pytest.approx(a, abs=0.03, rel=0.03)


def test_fp16_with_grad_scaler_trains_like_fp32() -> None:
    # fp16 is refused on CPU unless asked for: the scaler path itself is exercised here
    # with CPU fp16 autocast and a real torch.amp.GradScaler("cpu").
    fp32 = loss_trajectory("fp32")
    fp16 = loss_trajectory("fp16", allow_fp16_on_cpu=True)
    for a, b in zip(fp32, fp16, strict=True):
        assert b == pytest.approx(a, abs=0.02, rel=0.02)


def test_fp16_skips_step_on_inf_gradients_and_holds_the_scheduler() -> None:
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = TrainStep(model, opt, precision="fp16", scheduler=sched, clip_grad_norm=1.0,
                     allow_fp16_on_cpu=True)
    assert step.scaler is not None
    x, y = tiny_data(8)
    step(x, y)
    assert not step.last_step_skipped
    scale = step.scaler.get_scale()
    before = [p.detach().clone() for p in model.parameters()]
    bad = x.clone()
    bad[0, 0] = float("inf")
    step(bad, y)
    assert step.last_step_skipped and step.skipped_steps == 1 and step.optimizer_steps == 1
    assert step.scaler.get_scale() < scale  # the scaler backed off
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), b)  # no update from inf gradients
    assert sched.last_epoch == 1  # not advanced by the skipped step
    assert all(p.grad is None for p in model.parameters())
    step(x, y)
    assert step.optimizer_steps == 2 and not step.last_step_skipped


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_fp16_with_a_fused_optimizer_counts_device_side_skips(optimizer: str) -> None:
    # A fused optimizer takes the GradScaler's inf flag and skips on the device (its
    # step() is still called), so a skip cannot be seen by whether step() ran.
    model = tiny_mlp()
    opt = getattr(torch.optim, optimizer)(model.parameters(), lr=0.1, fused=True)
    assert getattr(opt, "_step_supports_amp_scaling", False)  # the path under test
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = TrainStep(model, opt, precision="fp16", scheduler=sched, clip_grad_norm=1.0,
                     allow_fp16_on_cpu=True)
    x, y = tiny_data(8)
    step(x, y)
    assert not step.last_step_skipped and step.optimizer_steps == 1
    before = [p.detach().clone() for p in model.parameters()]
    bad = x.clone()
    bad[0, 0] = float("inf")
    step(bad, y)
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), b)  # the device-side skip held the parameters
    assert step.last_step_skipped
    assert step.skipped_steps == 1 and step.optimizer_steps == 1
    step(x, y)
    step(bad, y)
    assert step.skipped_steps == 2 and step.optimizer_steps == 2 and step.last_step_skipped
    assert sched.last_epoch == 4  # known only on the device: the scheduler advanced each call
    assert step.state_dict()["skipped_steps"] == 2


def test_auto_precision_is_a_checked_choice() -> None:
    model = tiny_mlp()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert step.precision in ("bf16", "fp32")
    assert step.precision_reason  # says why
    assert step.scaler is None


# Excerpts of real /proc/cpuinfo files: an Intel Xeon with AVX-512 BF16 but no AMX
# (Cooper Lake), this project's build machine (a KVM guest on a Sapphire Rapids Xeon,
# with AMX), an Intel Skylake-SP server, an AWS Graviton3.
XEON_BF16 = "processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
XEON_AMX = ("processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512bw avx512_bf16 "
            "avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8\n")
SKYLAKE = "processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512bw avx512_vnni\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve bf16 i8mm\n"


def test_cpu_precision_from_cpuinfo_flags_and_measurement() -> None:
    assert cpu_bf16_flags(XEON_BF16) == ["avx512_bf16"]
    assert cpu_bf16_flags(XEON_AMX) == ["amx_bf16", "avx512_bf16"]
    # unmeasured: the families known to run bf16 fast, else fp32
    assert choose_cpu_precision(XEON_AMX).precision == "bf16"
    assert choose_cpu_precision(GRAVITON3).precision == "bf16"
    assert choose_cpu_precision(XEON_BF16).precision == "fp32"
    assert choose_cpu_precision(SKYLAKE).precision == "fp32"
    assert choose_cpu_precision(None).precision == "fp32"
    # measured on the model: the measurement decides, and the reason quotes it
    slow = choose_cpu_precision(XEON_AMX, measured_speedup=0.6)
    assert slow.precision == "fp32" and "0.60x" in slow.why
    fast = choose_cpu_precision(XEON_BF16, measured_speedup=1.4)
    assert fast.precision == "bf16" and "1.40x" in fast.why
    # no bf16 instructions: fp32 whatever a measurement says (bf16 is emulated there)
    assert choose_cpu_precision(SKYLAKE, measured_speedup=2.0).precision == "fp32"


def test_auto_precision_measures_the_model_and_leaves_it_unchanged() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64),
                                torch.nn.Dropout(0.5), torch.nn.Linear(64, 10))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    speedup = measure_cpu_bf16(model)
    assert speedup is not None and speedup > 0
    assert model.training and all(m.training for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="auto")
    assert step.precision in ("bf16", "fp32") and step.precision_reason


@pytest.mark.parametrize(("cap", "expected"), [((9, 0), "bf16"), ((8, 6), "bf16"), ((7, 5), "fp16"),
                                               ((7, 0), "fp16"), ((6, 0), "fp16"), ((6, 1), "fp32")])
def test_cuda_precision_from_compute_capability(cap: tuple[int, int], expected: str) -> None:
    assert choose_cuda_precision(cap).precision == expected


# ---------------------------------------------------------------- bad input

def test_batch_on_another_device_than_the_model() -> None:
    model = tiny_mlp().to("meta")
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32")
    with pytest.raises(ValueError, match=r"batch is on cpu but the model is on meta.*to_device"):
        step(*tiny_data(4))
    x, y = tiny_data(4)
    with pytest.raises(ValueError, match=r"targets is on cpu but the model is on meta"):
        step(x.to("meta"), y)


def test_optimizer_without_the_models_parameters() -> None:
    other = tiny_mlp()
    with pytest.raises(ValueError, match=r"optimizer holds none of the model's.*model\.parameters"):
        TrainStep(tiny_mlp(), torch.optim.SGD(other.parameters(), lr=0.1))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_accumulate_below_one(bad: object) -> None:
    model = tiny_mlp()
    with pytest.raises(ValueError, match=r"accumulate must be an integer >= 1.*accumulate=1"):
        TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), accumulate=bad)  # type: ignore[arg-type]


def test_fp16_on_cpu_names_the_fix() -> None:
    model = tiny_mlp()
    with pytest.raises(ValueError, match=r"fp16.*needs a CUDA GPU.*'bf16'.*'fp32'.*allow_fp16_on_cpu"):
        TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp16")


def test_other_bad_arguments() -> None:
    model = tiny_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainStep(model, opt, precision="fp8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="microbatch must be None or 'auto'"):
        TrainStep(model, opt, microbatch="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clip_grad_norm must be a positive"):
        TrainStep(model, opt, clip_grad_norm=0.0)
    with pytest.raises(ValueError, match="inputs hold no tensor"):
        TrainStep(model, opt, precision="fp32")("not a tensor", None)


def test_state_dict_resumes_scaler_and_micro_batch() -> None:
    model = tiny_mlp()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp16",
                     microbatch="auto", accumulate=2, allow_fp16_on_cpu=True)
    x, y = tiny_data(16)
    bad = x.clone()
    bad[0, 0] = float("inf")
    step(x, y)
    step(bad, y)  # lowers the loss scale
    saved = step.state_dict()
    fresh = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp16",
                      microbatch="auto", allow_fp16_on_cpu=True)
    fresh.load_state_dict(saved)
    assert fresh.scaler is not None and step.scaler is not None
    assert fresh.scaler.get_scale() == step.scaler.get_scale() < 65536.0
    assert fresh.micro_batch_size == 8 and fresh.skipped_steps == 1 and fresh.optimizer_steps == 1
    with pytest.raises(ValueError, match="precision='fp16' to resume"):
        TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="fp32").load_state_dict(saved)
