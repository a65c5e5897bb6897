"""One intra-op thread for the tune tests: on a small machine shared with other work, two
OpenMP threads that wait for each other at every operator make step times swing by 100x,
and the tests check decisions, not speed."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
