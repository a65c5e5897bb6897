"""``pitstop profile`` on CUDA, for real, on loop shapes real scripts have: a hand-written
update rule (steps at backward(), the bf16 A/B measured on the GPU), LBFGS closures, a
Python input pipeline feeding the GPU. Skipped without a GPU (scripts/gpu-check.sh runs
them)."""

from __future__ import annotations

import pytest
from test_profile_loops import _measured, _profile, _sites
from test_profile_scenarios import _bottleneck

pytestmark = pytest.mark.cuda


def test_cuda_hand_written_update_steps_at_backward_and_measures_low_precision(tmp_path) -> None:
    _, doc = _profile(tmp_path, "cuda_loops.py", "hand", "30")
    facts = doc["facts"]
    assert facts["device"] == "cuda"
    assert facts["step_boundary"] == "backward"
    assert doc["status"] == "complete" and len(_measured(doc)) == 12
    assert all(s["device_ms"] is not None and s["device_ms"] > 0 for s in _measured(doc))
    ab = facts.get("precision_ab") or {}
    assert ab.get("device") == "cuda" and ab.get("dtype") in ("bf16", "fp16"), ab
    assert ab["fp32_ms"] > 0 and ab["low_ms"] > 0
    # 4096-wide matmuls over 4096 rows: the GPU is busy, not the host.
    assert _bottleneck(doc) in ("compute-bound", "memory-bound"), doc["headline"]


def test_cuda_lbfgs_closure_is_forward_and_backward(tmp_path) -> None:
    _, doc = _profile(tmp_path, "cuda_loops.py", "lbfgs", "8", steps=("--steps", "4", "--warmup", "2"))
    assert doc["facts"]["device"] == "cuda"
    assert doc["status"] == "complete"
    share = doc["ranks"][0]["phase_share"]
    assert share["forward"] + share["backward"] > share["optimizer"], share
    assert doc["facts"]["backwards_per_step"] >= 2


def test_cuda_python_get_batch_is_input_bound_and_named(tmp_path) -> None:
    _, doc = _profile(tmp_path, "cuda_loops.py", "get_batch", "30", steps=("--steps", "20", "--warmup", "3"))
    assert doc["facts"]["device"] == "cuda"
    assert _bottleneck(doc) == "input-bound", (doc["headline"], doc["facts"].get("other_sites"))
    assert _sites(doc, "input")[0].startswith("get_batch (")
