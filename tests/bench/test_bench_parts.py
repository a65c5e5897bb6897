"""The model, the measurement harness and the rung definitions (no loader involved)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pitstop.bench.ladder import CompileTimeout, Context, applicability, is_slower, time_bound
from pitstop.bench.measure import Measurement, Plan, measure
from pitstop.bench.model import SIZES, BasicBlock, build_model, spec_for
from pitstop.bench.rungs import RUNGS, parse_rungs


def test_model_is_a_resnet_with_batchnorm_and_residual_blocks() -> None:
    model = build_model(SIZES["small"], num_classes=10)
    kinds = {type(m) for m in model.modules()}
    assert BasicBlock in kinds and nn.BatchNorm2d in kinds
    out = model(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 10)
    cl = build_model(SIZES["tiny"], 3).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    assert cl(x).shape == (2, 3)


def test_same_seed_same_initial_weights_and_global_rng_untouched() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = build_model(SIZES["tiny"], 4)
    assert torch.equal(torch.rand(1), expected_next)
    b = build_model(SIZES["tiny"], 4)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_model_is_sized_by_device() -> None:
    assert spec_for("auto", torch.device("cpu")).name == "small"
    assert spec_for("auto", torch.device("cuda")).name == "large"
    assert spec_for("tiny", torch.device("cuda")).name == "tiny"


def test_measure_warms_up_then_times_each_repeat_after_a_sync() -> None:
    events: list[str] = []

    def run(n: int, tick: object) -> int:
        events.append(f"run {n}")
        return n * 4

    m = measure(run, Plan(warmup=2, steps=3, repeats=4), sync=lambda: events.append("sync"))
    assert events[0] == "run 2"
    timed = [e for e in events if e == "run 3"]
    assert len(timed) == 4
    # every timed run is bracketed by syncs: the clock is read only after the device is idle
    for i, e in enumerate(events):
        if e == "run 3":
            assert events[i - 1] == "sync" and events[i + 1] == "sync"
    assert m.samples == 4 * 3 * 4 and len(m.rates) == 4 and m.steps == 12
    assert m.min <= m.median <= m.max


def _m(*rates: float) -> Measurement:
    return Measurement(rates=list(rates), samples=1, timed_seconds=1, warmup_seconds=0, steps=1)


def test_keep_rule_needs_a_clear_slowdown() -> None:
    base = _m(100, 101, 102)
    assert is_slower(_m(80, 81, 82), base)
    assert not is_slower(_m(99, 100, 101), base)      # within noise
    assert not is_slower(_m(90, 91, 103), base)       # one repeat reached the base median
    assert not is_slower(_m(120, 130, 140), base)


def _ctx(device: str = "cpu", *, quick: bool = False, precision: str = "bf16",
         compile_problem: str | None = None) -> Context:
    return Context(torch.device(device), quick, precision,
                   None if precision != "fp32" else "no fast bf16 here", compile_problem)


def test_applicability_on_a_cpu() -> None:
    by_name = {r.name: r for r in RUNGS}
    ctx = _ctx()
    assert applicability(by_name["pinned"], ctx)[0] == "not applicable"  # type: ignore[index]
    assert applicability(by_name["cudnn-benchmark"], ctx)[0] == "not applicable"  # type: ignore[index]
    for name in ("naive", "workers", "no-sync", "mixed-precision", "channels-last", "compile"):
        assert applicability(by_name[name], ctx) is None
    assert applicability(by_name["mixed-precision"], _ctx(precision="fp32")) == (
        "not applicable", "no fast bf16 here")
    status, reason = applicability(by_name["compile"], _ctx(quick=True))  # type: ignore[misc]
    assert status == "skipped" and "--quick" in reason
    status, reason = applicability(by_name["compile"], _ctx(compile_problem="no C++ compiler"))  # type: ignore[misc]
    assert status == "not applicable" and reason == "no C++ compiler"
    assert applicability(by_name["pinned"], _ctx("cuda")) is None
    assert applicability(by_name["cudnn-benchmark"], _ctx("cuda")) is None


def test_parse_rungs() -> None:
    assert parse_rungs("0,2") == {0, 2}
    assert parse_rungs("1-3, compile") == {1, 2, 3, 7}
    assert parse_rungs("no-sync,channels-last") == {4, 6}
    for bad in ("9", "warp", "5-2"):
        with pytest.raises(ValueError):
            parse_rungs(bad)


def test_time_bound_interrupts_a_long_call() -> None:
    with pytest.raises(CompileTimeout), time_bound(0.05):
        while True:
            pass
    with time_bound(5):
        pass  # and the alarm is disarmed afterwards


def test_recommendation_is_the_fastest_kept_configuration() -> None:
    from pitstop.bench.ladder import Knobs, LadderResult, RungResult
    from pitstop.bench.report import recommendation, recommendation_text

    def row(index: int, status: str, knobs: list[str], median: float | None) -> RungResult:
        rung = RUNGS[index]
        return RungResult(index, rung.name, rung.title, rung.change, status, knobs=knobs,
                          applied={"num_workers": 3},
                          measurement=_m(median, median, median) if median else None)

    rungs = [row(0, "baseline", [], 100), row(1, "kept", ["workers"], 150),
             row(4, "slower", ["workers", "no_sync"], 90),
             row(6, "kept", ["workers", "channels_last"], 140)]
    result = LadderResult(rungs, None, Knobs(workers=True, channels_last=True))
    rec = recommendation(result, device="cpu", batch_size=32, log_every=50)
    assert rec is not None
    assert rec["knobs"] == ["workers"] and rec["speedup"] == 1.5
    assert rec["no_measurable_gain"] == ["channels_last"]
    assert rec["left_out_as_slower"] == ["no per-step sync"]
    assert "channels_last" not in rec["snippet"] and "loader(dataset" in rec["snippet"]
    text = recommendation_text(rec)
    assert text.startswith("recommended for this machine: DataLoader workers (3)")
    assert "no faster: channels_last" in text


def test_snippet_compiles_and_applies_the_thread_recommendation_on_cpu_only() -> None:
    from pitstop.bench.ladder import Knobs
    from pitstop.bench.report import snippet

    for device in ("cpu", "cuda"):
        for knobs in (Knobs(), Knobs(workers=True, no_sync=True), Knobs(workers=True, pinned=True)):
            code = snippet(knobs, device=device, batch_size=8, log_every=10)
            compile(code, f"<snippet {device} {knobs}>", "exec")
            expected = knobs.workers and device == "cpu"
            assert ("use_training_threads(train_loader)" in code) is expected, code
    kept_own = snippet(Knobs(workers=True), device="cpu", batch_size=8, log_every=10,
                       cut_threads=False)  # rung 1 found torch's own thread count faster
    assert "use_training_threads" not in kept_own
