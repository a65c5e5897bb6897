"""Fixtures for the doctor tests (helpers live in doctor_helpers.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from doctor_helpers import machine_facts

_cache: dict[str, dict[str, Any]] = {}


@pytest.fixture
def facts_of():
    """``facts_of("rtx4090-workstation")``: facts from the real probes run on a fake
    machine, as a fresh deep copy that a test may modify."""

    def get(name: str) -> dict[str, Any]:
        if name not in _cache:
            _cache[name] = json.loads(json.dumps(machine_facts(name)))
        return copy.deepcopy(_cache[name])

    return get
