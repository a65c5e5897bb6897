"""The gradient-reset watch that turns backward() calls into step boundaries."""

from __future__ import annotations

import torch

from pitstop.profile.gradwatch import GradWatch


def _watched() -> tuple[torch.nn.Module, GradWatch]:
    model = torch.nn.Linear(4, 2)
    model(torch.randn(3, 4)).sum().backward()
    watch = GradWatch()
    watch.pick([model], None)
    watch.remember()
    return model, watch


def test_accumulating_into_the_same_gradients_is_not_a_reset() -> None:
    _model, watch = _watched()
    assert watch.was_reset() is False  # nothing happened between the two backward calls


def test_every_way_of_resetting_the_gradients_is_seen() -> None:
    model, watch = _watched()
    model.zero_grad(set_to_none=True)
    assert watch.was_reset() is True
    model, watch = _watched()
    model.zero_grad(set_to_none=False)  # grad.zero_(): the version counter moves
    assert watch.was_reset() is True
    model, watch = _watched()
    for p in model.parameters():
        p.grad.data.zero_()  # .data hides the write from the version counter; the values do not
    assert watch.was_reset() is True


def test_a_leaf_of_the_graph_is_watched_when_there_is_no_module() -> None:
    w = torch.randn(3, requires_grad=True)
    loss = (w * 2).sum()
    loss.backward()
    watch = GradWatch()
    watch.pick([], (loss,))
    watch.remember()
    w.grad = None
    assert watch.was_reset() is True
