"""Metrics: exact running means kept on the device; every(); TensorBoard sink."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pitstop.train import Metrics, every


def test_means_are_exact_and_weighted_by_n() -> None:
    m = Metrics("cpu")
    for v in (1.0, 2.0, 3.0, 4.0):
        m.update("loss", torch.tensor(v), n=1)
    m.update("acc", torch.tensor(0.5), n=10)
    m.update("acc", torch.tensor(1.0), n=30)
    m.update("tokens", torch.tensor(0.25), n=torch.tensor(4))  # n as a device tensor
    m.update("tokens", 0.75, n=4)
    assert m.compute() == {"loss": 2.5, "acc": 0.875, "tokens": 0.5}
    s = m.summary()
    assert s["acc"].count == 40 and s["acc"].total == 35.0


def test_weighted_value_is_not_rounded_to_float32() -> None:
    m = Metrics("cpu")
    third = torch.tensor(1 / 3, dtype=torch.float32)  # times 3 rounds to 1.0 in float32
    m.update("x", third, n=3)
    assert m.compute()["x"] == third.item()


def test_many_small_updates_stay_exact() -> None:
    m = Metrics("cpu")
    values = torch.rand(10_000, dtype=torch.float32)
    for v in values:
        m.update("x", v)
    expected = values.double().mean().item()
    assert m.compute()["x"] == pytest.approx(expected, rel=1e-12, abs=0)


def test_reset_starts_a_new_interval_and_update_stays_lazy() -> None:
    m = Metrics("cpu")
    m.update("loss", torch.tensor(10.0))
    m.reset()
    m.update("loss", torch.tensor(4.0), n=2)
    assert m.compute() == {"loss": 4.0}
    assert isinstance(m._sums["loss"], torch.Tensor)  # kept as a tensor, not a float


def test_bad_updates() -> None:
    m = Metrics("cpu")
    with pytest.raises(ValueError, match=r"takes a scalar.*value\.mean\(\)"):
        m.update("loss", torch.ones(3))
    with pytest.raises(ValueError, match="create Metrics"):
        m.update("loss", torch.ones((), device="meta"))
    assert Metrics("cpu").compute() == {}


def test_every() -> None:
    due = every(3)
    assert [s for s in range(10) if due(s)] == [0, 3, 6, 9]
    with pytest.raises(ValueError, match="n >= 1"):
        every(0)


def test_tensorboard_sink_writes_scalars(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    m = Metrics("cpu", writer=tmp_path / "tb")
    m.update("loss", torch.tensor(2.0))
    m.compute(step=1)
    m.reset()
    m.update("loss", torch.tensor(1.0))
    m.compute(step=2)
    m.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, 2.0), (2, 1.0)]
