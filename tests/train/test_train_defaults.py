"""fast_defaults: what it changes, what it leaves, and that it says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from pitstop.train import fast_defaults


@pytest.fixture(autouse=True)
def restore_globals() -> Iterator[None]:
    bench, prec = torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision()
    yield
    torch.backends.cudnn.benchmark = bench
    torch.set_float32_matmul_precision(prec)


def test_turns_on_autotuning_and_tf32_and_reports_it() -> None:
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")
    record = fast_defaults()
    assert torch.backends.cudnn.benchmark is True
    assert torch.get_float32_matmul_precision() == "high"
    changed = {c.name: c for c in record.changed}
    assert changed["torch.backends.cudnn.benchmark"].before is False
    assert changed["torch.set_float32_matmul_precision"].value == "high"
    text = str(record)
    assert "changed   torch.backends.cudnn.benchmark: False -> True" in text
    assert "unchanged torch.backends.cudnn.allow_tf32" in text
    assert record.as_dict()["changed"][0]["why"]


def test_second_call_changes_nothing() -> None:
    fast_defaults()
    again = fast_defaults()
    assert again.changed == []
    assert {u.name for u in again.unchanged} >= {"torch.backends.cudnn.benchmark",
                                                 "torch.set_float32_matmul_precision"}


def test_deterministic_keeps_autotuning_off() -> None:
    torch.backends.cudnn.benchmark = True
    record = fast_defaults(deterministic=True)
    assert torch.backends.cudnn.benchmark is False
    assert "deterministic=True" in next(c.why for c in record.changed
                                        if c.name == "torch.backends.cudnn.benchmark")


def test_a_users_own_precision_choice_is_left_alone() -> None:
    torch.set_float32_matmul_precision("medium")
    record = fast_defaults()
    assert torch.get_float32_matmul_precision() == "medium"
    assert any(u.name == "torch.set_float32_matmul_precision" and "left as is" in u.why
               for u in record.unchanged)
