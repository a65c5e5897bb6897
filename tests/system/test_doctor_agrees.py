"""The doctor and `pitstop system` read the same fake machines and agree.

When `pitstop doctor` tells the user to run `pitstop system apply --only NAME`, then
`pitstop system` must find NAME off its training value on that same machine, so the
command the doctor recommends really changes something. Both run as the real CLI.
"""

from __future__ import annotations

import json
import re

import pytest

APPLY = re.compile(r"pitstop system apply[^\n]*?--only[ =]([^\s`'\"]+)")


@pytest.mark.parametrize("name", ["workstation-4090", "docker-container", "cloud-vm-nfs"])
def test_doctor_remedies_point_to_settings_system_would_change(pitstop_cli, machine,
                                                               name: str) -> None:
    root = machine(name)
    r = pitstop_cli("doctor", "--sysroot", str(root), "--data", "/", "--json")
    assert r.returncode in (0, 1), r.stderr
    checks = json.loads(r.stdout)["checks"]
    r = pitstop_cli("system", "show", "--sysroot", str(root), "--json")
    assert r.returncode in (0, 1), r.stderr
    status = {s["name"]: s["status"] for s in json.loads(r.stdout)["settings"]}
    pointed = {}
    for c in checks:
        if c["status"] in ("warning", "problem") and c["remedy"]:
            for setting in APPLY.findall(c["remedy"]["text"]):
                pointed[setting] = c["code"]
    for setting, code in pointed.items():
        assert status[setting] == "differs", (name, code, setting, status[setting])
    if name == "workstation-4090":  # everything is off its training value there
        assert set(pointed) == {"governor", "energy-preference", "boost", "gpu-persistence",
                                "gpu-power-limit", "swappiness", "thp", "shm"}
