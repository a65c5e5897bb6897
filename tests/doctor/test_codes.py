"""The DR codes: one documented code per check, and one source for the version tables."""

from __future__ import annotations

import re
from pathlib import Path

from pitstop.doctor import data
from pitstop.doctor.checks import all_checks
from pitstop.doctor.codes import DOCTOR_DOCS
from pitstop.findings import get_doc
from pitstop.system.settings import SETTING_NAMES

SRC = Path(__file__).resolve().parents[2] / "src" / "pitstop" / "doctor"
# Setting names of `pitstop system apply --only NAME`, from pitstop system itself.
SYSTEM_SETTINGS = set(SETTING_NAMES)


def test_every_check_has_a_documented_code_and_back() -> None:
    codes = [c.code for c in all_checks()]
    assert len(codes) == len(set(codes)) >= 30
    assert set(codes) == set(DOCTOR_DOCS)
    for code in codes:
        doc = get_doc(code)
        assert doc.tool == "doctor"
        assert doc.category in {c.layer for c in all_checks() if c.code == code}
        for part in (doc.what, doc.why, doc.example, doc.fix, doc.fix_safety):
            assert len(part.strip()) > 10, (code, part)


def test_remedies_name_only_real_system_settings() -> None:
    used = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r'system_apply\("([a-z-]+)"\)', text))
        used |= set(re.findall(r"--only ([a-z-]+)", text))
        used |= set(re.findall(r'_SA\.format\("([a-z-]+)"\)', text))
    assert used, "no remedy points to pitstop system apply"
    assert used <= SYSTEM_SETTINGS, used - SYSTEM_SETTINGS
    assert {"governor", "energy-preference", "boost", "gpu-persistence", "gpu-power-limit",
            "swappiness", "thp", "shm"} <= used


def test_driver_numbers_in_the_docs_come_from_the_table() -> None:
    dr005 = DOCTOR_DOCS["DR005"].what
    assert data.CUDA_MINOR_COMPAT_MIN_DRIVER[11] in dr005
    assert data.CUDA_MINOR_COMPAT_MIN_DRIVER[12] in dr005
    assert ">= 580" in dr005 and data.CUDA_MINOR_COMPAT_MIN_DRIVER[13].startswith("580")
    assert data.CUDA_TOOLKIT_DRIVER["12.8"] in dr005


def test_driver_table() -> None:
    assert data.driver_supports("535.247.01", "12.8") == "minor-compat"
    assert data.driver_supports("570.26", "12.8") == "full"
    assert data.driver_supports("525.60.13", "12.0") == "full"
    assert data.driver_supports("525.60.12", "12.1") == "no"
    assert data.driver_supports("450.80.02", "11.8") == "minor-compat"
    assert data.driver_supports("580.65.06", "13.0") == "full"
    assert data.driver_supports("575.0", "13.0") == "no"
    assert data.driver_supports("999.0", "14.0") == "full" or \
        data.driver_supports("999.0", "14.0") == "unknown"
    assert data.best_variant_for_driver("2.7.0", "535.247.01") == ("11.8", "full", True)
    assert data.best_variant_for_driver("2.8.0", "535.247.01") == ("12.9", "minor-compat", True)
    assert data.best_variant_for_driver("2.9.1", "580.82.07") == ("13.0", "full", True)
    assert data.best_variant_for_driver("2.13.0", "580.82.07")[2] is False
    assert data.variant_tag("12.8") == "cu128"
    assert data.clock_event_names(0x1 | 0x20) == ["gpu_idle", "sw_thermal_slowdown"]


def test_report_schema_rejects_a_warning_without_remedy() -> None:
    import jsonschema
    import pytest

    from pitstop.doctor.schema import REPORT_SCHEMA

    check = {"code": "DR070", "title": "t", "layer": "environment", "status": "warning",
             "summary": "s", "evidence": {}, "remedy": None}
    doc = {"schema_version": 1, "facts": {"schema_version": 1, "meta": {}}, "checks": [check]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, REPORT_SCHEMA)
    check["remedy"] = {"kind": "shell", "text": "unset CUDA_LAUNCH_BLOCKING"}
    jsonschema.validate(doc, REPORT_SCHEMA)


def test_code_ranges_for_merged_rows() -> None:
    from pitstop.doctor.report import code_ranges

    assert code_ranges(["DR010", "DR011", "DR012", "DR014", "DR016", "DR017"]) == \
        "DR010-DR012\nDR014\nDR016\nDR017"
