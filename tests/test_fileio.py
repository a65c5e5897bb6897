"""The shared output-path check: typos fail at once and nothing is created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pitstop.errors import UsageError
from pitstop.fileio import check_output_path


def test_missing_folder_is_refused_and_not_created(tmp_path: Path) -> None:
    target = tmp_path / "typo" / "x.json"
    with pytest.raises(UsageError, match="does not exist"):
        check_output_path(target, what="the JSON report", option="--json")
    assert not (tmp_path / "typo").exists()


def test_folder_given_as_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder"):
        check_output_path(tmp_path, what="the JSON report")


def test_unwritable_place_is_refused_before_work() -> None:
    with pytest.raises(UsageError, match="cannot write there"):
        check_output_path("/proc/pitstop-x.json", what="the JSON report", option="--json")


def test_writable_path_passes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    assert check_output_path(target, what="the JSON report") == target
    assert os.listdir(tmp_path) == []


def test_existing_file_is_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    before = target.stat()
    check_output_path(target, what="the JSON report")
    assert target.read_text() == "old"
    assert target.stat().st_mtime_ns == before.st_mtime_ns
