"""The real CLI (a subprocess) against every fake machine, through ``--sysroot``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from doctor_helpers import DATA, HEALTHY, MACHINES, load_generator

from pitstop.doctor.schema import REPORT_SCHEMA

# What each machine must show: code -> status (for per-GPU checks, GPU 0's status).
EXPECTED: dict[str, dict[str, str]] = {
    "rtx4090-workstation": {"DR001": "ok", "DR004": "ok", "DR005": "ok", "DR008": "ok",
                            "DR009": "ok", "DR010": "ok", "DR019": "ok", "DR030": "ok",
                            "DR040": "ok", "DR050": "ok"},
    "nouveau": {"DR001": "problem", "DR002": "problem", "DR008": "ok"},
    "cpu-wheel": {"DR004": "problem", "DR001": "ok"},
    "driver535-cu128": {"DR005": "warning", "DR004": "ok", "DR008": "ok", "DR009": "ok"},
    "powersave": {"DR040": "warning", "DR041": "warning", "DR042": "warning"},
    "lvm-hdd": {"DR030": "problem", "DR035": "warning"},
    "docker-shm64": {"DR050": "problem", "DR060": "ok", "DR043": "warning", "DR044": "problem",
                     "DR007": "ok", "DR008": "ok", "DR022": "ok"},
    "pcie-gen3-x4": {"DR011": "problem", "DR010": "ok"},
    "thermal-slowdown": {"DR013": "problem", "DR016": "problem", "DR018": "warning"},
    "kernel-upgrade-dkms": {"DR001": "problem", "DR009": "problem", "DR007": "problem",
                            "DR002": "ok"},
    "secure-boot-mok": {"DR001": "problem", "DR009": "problem"},
    "k8s-pod-1of4": {"DR022": "ok", "DR061": "ok", "DR043": "ok", "DR044": "ok", "DR050": "ok",
                     "DR007": "ok", "DR008": "ok", "DR009": "ok", "DR055": "unknown"},
    "cloud-vm-ebs": {"DR031": "warning", "DR035": "warning", "DR030": "ok", "DR011": "ok",
                     "DR040": "unknown", "DR008": "ok"},
    "slurm-node-2of8": {"DR022": "ok", "DR021": "ok", "DR043": "ok", "DR044": "ok",
                        "DR055": "ok", "DR074": "ok", "DR008": "ok"},
}
# The planted faults of each sick machine: exactly these are reported (code: status), so a
# fix that silences one, or a check that starts to fire on a healthy part, fails here.
PLANTED: dict[str, dict[str, str]] = {
    "nouveau": {"DR001": "problem", "DR002": "problem"},
    "cpu-wheel": {"DR004": "problem"},
    "driver535-cu128": {"DR005": "warning"},
    "lvm-hdd": {"DR030": "problem", "DR035": "warning"},
    "docker-shm64": {"DR043": "warning", "DR044": "problem", "DR050": "problem"},
    "kernel-upgrade-dkms": {"DR001": "problem", "DR007": "problem", "DR009": "problem"},
    "secure-boot-mok": {"DR001": "problem", "DR009": "problem"},
    "cloud-vm-ebs": {"DR031": "warning", "DR035": "warning"},
    **{name: {} for name in HEALTHY},
}


def doctor_json(run_pitstop: Any, machine: str, *extra: str, env: dict[str, str] | None = None
                ) -> tuple[int, dict[str, Any]]:
    r = run_pitstop("doctor", "--sysroot", str(MACHINES / machine), "--data", DATA[machine],
                    "--json", *extra, env=env, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_machine(pitstop_cli: Any, machine: str) -> None:
    rc, doc = doctor_json(pitstop_cli, machine)
    jsonschema.validate(doc, REPORT_SCHEMA)
    statuses = {}
    for c in doc["checks"]:
        statuses.setdefault(c["code"], c["status"])
        assert set(c) >= {"code", "title", "layer", "status", "evidence", "remedy"}
        if c["status"] in ("warning", "problem"):
            assert c["remedy"] and c["remedy"]["text"], c
    for code, status in EXPECTED[machine].items():
        assert statuses[code] == status, (code, statuses[code])
    wrong = any(c["status"] in ("warning", "problem") for c in doc["checks"])
    assert rc == (1 if wrong else 0)
    assert doc["facts"]["meta"]["sysroot"].endswith(machine)


def test_healthy_machine_exits_0_and_sick_ones_1(pitstop_cli: Any) -> None:
    assert doctor_json(pitstop_cli, "rtx4090-workstation")[0] == 0
    assert doctor_json(pitstop_cli, "nouveau")[0] == 1


@pytest.mark.parametrize("machine", sorted(PLANTED))
def test_only_the_planted_faults_are_reported(facts_of, machine: str) -> None:
    from pitstop.doctor.checks import run_checks

    reported = {r.code: r.status for r in run_checks(facts_of(machine))
                if r.status in ("warning", "problem")}
    assert reported == PLANTED[machine]


def test_environment_comes_from_the_sysroot_process(pitstop_cli: Any) -> None:
    # Under --sysroot the environment is the recorded /proc/self/environ, not ours.
    _, doc = doctor_json(pitstop_cli, "rtx4090-workstation", env={"CUDA_LAUNCH_BLOCKING": "1"})
    dr070 = next(c for c in doc["checks"] if c["code"] == "DR070")
    assert dr070["status"] == "ok"


def test_terminal_report_groups_by_layer_and_orders_fixes(pitstop_cli: Any) -> None:
    r = pitstop_cli("doctor", "--sysroot", str(MACHINES / "thermal-slowdown"), "--data",
                    "/data/imagenet", env={"COLUMNS": "160"})
    assert r.returncode == 1, r.stderr
    out = r.stdout
    for layer in ("Driver / CUDA", "GPU hardware", "Storage", "CPU", "Memory / OS",
                  "Environment", "Platform"):
        assert layer in out
    fixes = out.split("Fixes, in order of expected impact", 1)[1]
    # problems first (thermal slowdown), then warnings (persistence mode)
    assert fixes.index("DR013") < fixes.index("DR018")
    assert "nvidia-persistenced" in fixes


def test_collect_then_diagnose_elsewhere(pitstop_cli: Any, tmp_path: Path) -> None:
    run_pitstop = pitstop_cli
    facts_file = tmp_path / "node7.json"
    r = run_pitstop("doctor", "--collect", "--sysroot", str(MACHINES / "lvm-hdd"), "--data",
                    DATA["lvm-hdd"], "-o", str(facts_file))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    facts = json.loads(facts_file.read_text())
    assert facts["schema_version"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["node7.json"]  # no temp file left
    r = run_pitstop("doctor", "--from", str(facts_file), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert next(c for c in doc["checks"] if c["code"] == "DR030")["status"] == "problem"


def _tree(root: Path) -> dict[str, str]:
    """``{relative path: link target or file content}`` of a machine tree."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = "-> " + os.readlink(p) if p.is_symlink() else p.read_bytes().hex()
    return out


def test_committed_machines_match_their_generator(tmp_path: Path) -> None:
    gen = load_generator()
    gen.build(tmp_path)
    assert sorted(gen.MACHINES) == sorted(p.name for p in MACHINES.iterdir() if p.is_dir()
                                          and p.name != "__pycache__")
    for name in gen.MACHINES:
        generated, committed = _tree(tmp_path / name), _tree(MACHINES / name)
        assert generated.keys() == committed.keys(), name
        differing = [k for k in generated if generated[k] != committed[k]]
        assert not differing, f"{name}: rerun make_machines.py ({differing[:3]})"
        assert (MACHINES / name / "ORIGIN.txt").read_text().strip()


def test_ignore_skips_checks(pitstop_cli: Any) -> None:
    rc, doc = doctor_json(pitstop_cli, "powersave", "--ignore", "DR040,dr041,DR042,DR052")
    assert rc == 0
    assert not {"DR040", "DR041", "DR042", "DR052"} & {c["code"] for c in doc["checks"]}
    r = pitstop_cli("doctor", "--ignore", "DR999")
    assert r.returncode == 2 and "DR999" in r.stderr


def test_torch_flag_reads_the_recorded_runtime(pitstop_cli: Any) -> None:
    _, doc = doctor_json(pitstop_cli, "docker-shm64", "--torch")
    assert doc["facts"]["torch"]["runtime_recorded"] is True
    statuses = {c["code"]: c["status"] for c in doc["checks"]}
    assert statuses["DR007"] == "ok" and statuses["DR044"] == "problem"
    _, doc = doctor_json(pitstop_cli, "cloud-vm-ebs", "--torch")
    dr007 = next(c for c in doc["checks"] if c["code"] == "DR007")
    assert dr007["status"] == "unknown" and "no pitstop-recorded/torch_runtime.json" in \
        dr007["summary"]
