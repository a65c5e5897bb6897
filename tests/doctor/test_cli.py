"""``pitstop doctor`` end to end on this real machine, and its usage errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pitstop.doctor.facts import SCHEMA_VERSION
from pitstop.doctor.schema import REPORT_SCHEMA


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_real_machine_json(run_pitstop: Any, tmp_path: Path) -> None:
    r = run_pitstop("doctor", "--json", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(doc, REPORT_SCHEMA)
    codes = {c["code"] for c in doc["checks"]}
    assert len(codes) >= 30
    for c in doc["checks"]:
        assert c["status"] in ("ok", "warning", "problem", "unknown")
    wrong = any(c["status"] in ("warning", "problem") for c in doc["checks"])
    assert r.returncode == (1 if wrong else 0)
    # This machine has no NVIDIA GPU: the GPU checks must not claim anything.
    if not doc["facts"]["pci"].get("nvidia_gpus"):
        for c in doc["checks"]:
            if c["layer"] == "gpu":
                assert c["status"] == "unknown", c
    assert doc["facts"]["storage"]["path"] == str(tmp_path.resolve())


def test_real_machine_table(run_pitstop: Any, tmp_path: Path) -> None:
    r = run_pitstop("doctor", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert "Storage" in r.stdout and "DR030" in r.stdout
    assert "problem(s)" in r.stdout


def test_doctor_writes_nothing(run_pitstop: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"shard{i}.bin").write_bytes(os.urandom(300_000))
    before = snapshot(tmp_path)
    r = run_pitstop("doctor", "--json", "--data", str(data), cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    r = run_pitstop("doctor", "--data", str(data), "--io", "--io-seconds", "0.4", "--json",
                    cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert snapshot(tmp_path) == before  # the --io temp file is gone, the data untouched
    io = json.loads(r.stdout)["facts"]["io"]
    assert io["measured"] is True
    assert io.get("temp_file") is True  # 900 kB of data is too little: it used a temp file
    blocks = {res["block_bytes"]: res for res in io["results"]}
    assert blocks[131072]["reads"] > 0 and blocks[131072]["mb_per_s"] > 0


def test_from_roundtrip_on_real_facts(run_pitstop: Any, tmp_path: Path) -> None:
    r = run_pitstop("doctor", "--collect", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "f.json").write_text(r.stdout)
    r2 = run_pitstop("doctor", "--from", str(tmp_path / "f.json"), "--json")
    assert r2.returncode in (0, 1), r2.stderr
    assert json.loads(r2.stdout)["facts"] == json.loads(r.stdout)
    r3 = run_pitstop("doctor", "--from", "-", "--json", input=r.stdout)
    assert r3.returncode == r2.returncode


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot read it"),
    ("not json {", "not JSON"),
    ('{"hello": 1}', "no schema_version"),
    ('{"schema_version": 99}', "schema version 99"),
    ('{"schema_version": 1}', "lacks the section"),
    ("[1, 2]", "no schema_version"),
])
def test_from_bad_file_is_a_one_line_usage_error(run_pitstop: Any, tmp_path: Path, content: str | None,
                                                 needle: str) -> None:
    path = tmp_path / "facts.json"
    if content is not None:
        path.write_text(content)
    r = run_pitstop("doctor", "--from", str(path))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert needle in r.stderr and str(path) in r.stderr


@pytest.mark.parametrize("args", [
    ["--from", "x.json", "--collect"],
    ["--from", "x.json", "--io"],
    ["--sysroot", "/nonexistent-dir"],
    ["--data", "/nonexistent/data"],
    ["-o", "out.json"],
])
def test_usage_errors(run_pitstop: Any, tmp_path: Path, args: list[str]) -> None:
    r = run_pitstop("doctor", *args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("pitstop: error:")
    assert list(tmp_path.iterdir()) == []


def test_explain_a_doctor_code(run_pitstop: Any) -> None:
    r = run_pitstop("explain", "DR050")
    assert r.returncode == 0
    assert "--shm-size" in r.stdout and "Fix safety" in r.stdout


@pytest.fixture
def run_pitstop(pitstop_cli: Any) -> Any:
    """The real CLI in a subprocess (tests/conftest.py's ``pitstop_cli``)."""
    return pitstop_cli


def test_python_option_inspects_another_interpreter(run_pitstop: Any, tmp_path: Path) -> None:
    import sys

    r = run_pitstop("doctor", "--json", "--python", sys.executable, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["facts"]["python"]["executable"] == sys.executable
    r = run_pitstop("doctor", "--python", str(tmp_path / "nope" / "python"), cwd=tmp_path)
    assert r.returncode == 2 and "--python" in r.stderr
