from __future__ import annotations

import json

import pytest

from pitstop.findings import (
    CodeDoc,
    Finding,
    Location,
    Remedy,
    Severity,
    UnknownCodeError,
    all_docs,
    get_doc,
    sorted_findings,
)


def test_finding_serialises_with_evidence_and_remedy() -> None:
    f = Finding(
        code="DR999", title="t", severity=Severity.PROBLEM,
        evidence={"shm_bytes": 67108864}, remedy=Remedy.shell("docker run --shm-size=8g ..."),
        location=Location("train.py", 3, 4),
    )
    d = json.loads(json.dumps(f.to_dict()))
    assert d["code"] == "DR999"
    assert d["severity"] == "problem"
    assert d["evidence"] == {"shm_bytes": 67108864}
    assert d["remedy"] == {"kind": "shell", "text": "docker run --shm-size=8g ..."}
    assert d["location"] == {"path": "train.py", "line": 3, "column": 4}


def test_malformed_codes_are_rejected() -> None:
    with pytest.raises(ValueError):
        Finding(code="X1", title="t", severity=Severity.INFO)
    with pytest.raises(ValueError):
        CodeDoc(code="DR001", name="Not Kebab", title="t", category="c",
                severity=Severity.INFO, what="w", why="w", example="e", fix="f",
                fix_safety="manual")


def test_sorted_findings_worst_first() -> None:
    a = Finding("LT001", "a", Severity.INFO)
    b = Finding("LT002", "b", Severity.PROBLEM)
    c = Finding("LT003", "c", Severity.WARNING)
    assert [f.code for f in sorted_findings([a, b, c])] == ["LT002", "LT003", "LT001"]


def test_every_registered_code_is_fully_documented() -> None:
    docs = all_docs()
    names = [d.name for d in docs]
    assert len(names) == len(set(names)), "two codes share a name"
    for d in docs:
        assert get_doc(d.code) is d
        assert get_doc(d.code.lower()) is d
        for text in (d.what, d.why, d.example, d.fix, d.fix_safety):
            assert text.strip()


def test_unknown_code() -> None:
    with pytest.raises(UnknownCodeError):
        get_doc("DR000x")
