"""Shared fixtures; the helpers themselves live in ``pitstop_testing``."""

from __future__ import annotations

import pytest
from pitstop_testing import REPO, SRC, pitstop_env, run_pitstop

__all__ = ["REPO", "SRC", "pitstop_env", "run_pitstop"]


@pytest.fixture
def pitstop_cli():
    return run_pitstop


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (run by scripts/gpu-check.sh on a GPU machine)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
