"""Requires-Dist parsing, PEP 508 markers and version specifiers, as torch's metadata
writes them (both spellings real torch wheels use: 2.5.1's ``name (==v) ; marker`` and
2.8.0's ``name==v; marker``)."""

from __future__ import annotations

import pytest

from pitstop.doctor.requirements import evaluate_marker, parse_requirement, satisfies

LINUX_X86 = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64",
             "python_version": "3.11", "python_full_version": "3.11.2",
             "implementation_name": "cpython", "extra": ""}


@pytest.mark.parametrize(("line", "name", "spec", "marker"), [
    ('nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == '
     '"x86_64"', "nvidia-cudnn-cu12", "==9.1.0.70",
     'platform_system == "Linux" and platform_machine == "x86_64"'),
    ('nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
     "nvidia-cudnn-cu12", "==9.10.2.21",
     'platform_system == "Linux" and platform_machine == "x86_64"'),
    ("typing-extensions>=4.10.0", "typing-extensions", ">=4.10.0", ""),
    ("filelock", "filelock", "", ""),
    ("Nvidia_NCCL.cu12 [extra] (>=2.21,<3)", "nvidia-nccl-cu12", ">=2.21,<3", ""),
    ("opt-einsum>=3.3; extra == \"opt-einsum\"", "opt-einsum", ">=3.3", 'extra == "opt-einsum"'),
])
def test_parse(line: str, name: str, spec: str, marker: str) -> None:
    req = parse_requirement(line)
    assert req is not None
    assert (req.name, req.specifier, req.marker) == (name, spec, marker)


@pytest.mark.parametrize(("marker", "env_change", "value"), [
    ('platform_system == "Linux" and platform_machine == "x86_64"', {}, True),
    ('platform_system == "Linux" and platform_machine == "x86_64"',
     {"platform_machine": "aarch64"}, False),
    ('platform_system == "Linux" and platform_machine == "x86_64"',
     {"platform_machine": None}, None),
    # False wins over unknown in "and", True over unknown in "or"
    ('platform_system == "Windows" and platform_machine == "x86_64"',
     {"platform_machine": None}, False),
    ('platform_system == "Linux" or platform_machine == "x86_64"',
     {"platform_machine": None}, True),
    ('python_version < "3.13"', {}, True),
    ('python_version < "3.13"', {"python_version": "3.13"}, False),
    ('python_version >= "3.9"', {"python_version": "3.10"}, True),  # numeric, not "3.10" < "3.9"
    ("extra == 'optree'", {}, False),
    ('(platform_machine == "aarch64" or platform_machine == "x86_64") and sys_platform == '
     '"linux"', {}, True),
    ('"linux" in sys_platform', {}, True),
    ('platform_machine not in "x86_64 aarch64"', {}, False),
    ("platform_machine ==", {}, None),  # unreadable: undecided, never a crash
])
def test_markers(marker: str, env_change: dict[str, str | None], value: bool | None) -> None:
    env = {**LINUX_X86, **env_change}
    assert evaluate_marker(marker, env) is value


@pytest.mark.parametrize(("version", "spec", "ok"), [
    ("9.1.0.70", "==9.1.0.70", True),
    ("9.1.0.7", "==9.1.0.70", False),
    ("2.21.5", "==2.21.5", True),
    ("12.4.127", "==12.4", False),
    ("12.4", "==12.4.0", True),
    ("2.5.1+cu124", "==2.5.1", True),
    ("4.12.2", ">=4.10.0", True),
    ("2.18.1", ">=2.21,<3", False),
    ("12.8.61", "==12.8.*", True),
    ("12.9.0", "~=12.8", True),
    ("13.0", "~=12.8", False),
    (None, "==1", None),
    ("1.0", "", True),
])
def test_specifiers(version: str | None, spec: str, ok: bool | None) -> None:
    assert satisfies(version, spec) is ok
