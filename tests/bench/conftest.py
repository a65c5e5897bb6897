"""Fixtures for the bench tests (helpers live in _bench_helpers.py)."""

from __future__ import annotations

import pytest
from _bench_helpers import tiny_source

from pitstop.bench.dataset import DataSource


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> DataSource:
    """A 24-image synthetic set, built once per test session."""
    return tiny_source(tmp_path_factory.mktemp("bench-cache"))
