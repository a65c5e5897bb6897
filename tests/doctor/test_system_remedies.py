"""Every doctor remedy that points to `pitstop system apply --only NAME` names a setting
that `pitstop system` really has, and every doctor finding about a setting that
`pitstop system` manages points to it.

The setting names come from pitstop.system itself (not a copy), so renaming a setting
there without updating the doctor fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from doctor_helpers import DATA

from pitstop.doctor.checks import run_checks
from pitstop.doctor.codes import DOCTOR_DOCS
from pitstop.system.settings import SETTING_NAMES

# The doctor code that reports each setting `pitstop system apply` manages.
MANAGED = {
    "DR017": "gpu-power-limit",
    "DR018": "gpu-persistence",
    "DR035": "readahead",
    "DR040": "governor",
    "DR041": "energy-preference",
    "DR042": "boost",
    "DR050": "shm",
    "DR052": "swappiness",
    "DR054": "thp",
}
APPLY = re.compile(r"pitstop system apply[^\n]*?--only[ =]([^\s`'\"]+)")


def named_settings(text: str) -> list[str]:
    """The setting names in every `pitstop system apply ... --only A,B` of a text."""
    return [n for m in APPLY.finditer(text) for n in m.group(1).split(",")]


def _gpu0(f: dict[str, Any]) -> dict[str, Any]:
    gpu: dict[str, Any] = f["nvml"]["gpus"][0]
    return gpu


def _set(f: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = f
    for key in parents:
        node = node[key]
    node[last] = value


# Facts that make each managed check fire, as changes to the healthy workstation.
TRIGGERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "DR017": lambda f: _gpu0(f).update(power_limit_w=200.0),
    "DR018": lambda f: _gpu0(f).update(persistence_mode=False),
    "DR035": lambda f: [d.update(rotational=1, read_ahead_kb=128)
                        for d in f["storage"]["disks"]],
    "DR040": lambda f: _set(f, "cpu.governor_counts", {"powersave": 16}),
    "DR041": lambda f: _set(f, "cpu.energy_preferences", {"balance_power": 16}),
    "DR042": lambda f: _set(f, "cpu.boost", {"intel_no_turbo": 1}),
    "DR050": lambda f: _set(f, "memory.shm", {"mounted": True, "fstype": "tmpfs",
                                              "size_bytes": 64 << 20, "source": "test"}),
    "DR052": lambda f: _set(f, "memory.swappiness", 60),
    "DR054": lambda f: _set(f, "memory.thp_enabled", "never"),
}


def test_every_managed_code_has_a_trigger() -> None:
    assert set(TRIGGERS) == set(MANAGED)
    assert set(MANAGED.values()) <= set(SETTING_NAMES)


@pytest.mark.parametrize("code", sorted(MANAGED))
def test_finding_names_system_apply_for_its_setting(facts_of, code: str) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["memory"]["swap_total_bytes"] = 8 << 30  # swappiness only matters with swap
    facts["memory"]["swap_free_bytes"] = 8 << 30
    TRIGGERS[code](facts)
    results = [r for r in run_checks(facts) if r.code == code]
    assert results and all(r.status in ("warning", "problem") for r in results), results
    for r in results:
        assert r.remedy is not None, code
        assert named_settings(r.remedy.text) == [MANAGED[code]], (code, r.remedy.text)
    # the explain text says the same
    assert MANAGED[code] in named_settings(DOCTOR_DOCS[code].fix), DOCTOR_DOCS[code].fix


def test_shm_in_a_container_does_not_point_to_system_apply(facts_of) -> None:
    # pitstop system cannot resize a container's /dev/shm: the runtime sets it.
    r = next(r for r in run_checks(facts_of("docker-shm64")) if r.code == "DR050")
    assert r.status == "problem" and r.remedy is not None
    assert named_settings(r.remedy.text) == [] and "--shm-size" in r.remedy.text


def test_thp_defrag_alone_does_not_point_to_system_apply(facts_of) -> None:
    # `system apply --only thp` sets `enabled`, not `defrag`: it would not fix this.
    facts = facts_of("rtx4090-workstation")
    facts["memory"].update(thp_enabled="madvise", thp_defrag="always")
    r = next(r for r in run_checks(facts) if r.code == "DR054")
    assert r.status == "warning" and r.remedy is not None
    assert named_settings(r.remedy.text) == [] and "defrag" in r.remedy.text


def test_no_remedy_or_doc_names_an_unknown_setting(facts_of) -> None:
    texts = [doc.fix for doc in DOCTOR_DOCS.values()]
    for name in DATA:
        texts += [r.remedy.text for r in run_checks(facts_of(name)) if r.remedy]
    for trigger in TRIGGERS.values():
        facts = facts_of("rtx4090-workstation")
        trigger(facts)
        texts += [r.remedy.text for r in run_checks(facts) if r.remedy]
    named = {n for t in texts for n in named_settings(t)}
    assert named >= set(MANAGED.values())
    assert named <= set(SETTING_NAMES), named - set(SETTING_NAMES)


def test_swappiness_with_unknown_swap_is_still_judged(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["memory"].update(swappiness=60, swap_total_bytes=None)
    r = next(r for r in run_checks(facts) if r.code == "DR052")
    assert r.status == "warning" and r.evidence["swap_total"] == "?"
    facts["memory"]["swap_total_bytes"] = 0
    assert next(r for r in run_checks(facts) if r.code == "DR052").status == "ok"


def test_terminal_report_gathers_the_system_settings_into_one_command(
        pitstop_cli, tmp_path) -> None:
    import shutil

    from doctor_helpers import MACHINES

    r = pitstop_cli("doctor", "--sysroot", str(MACHINES / "powersave"), "--data",
                    "/data/imagenet", env={"COLUMNS": "100"})
    assert r.returncode == 1, r.stderr
    line = next(x for x in r.stdout.splitlines() if "sudo pitstop system apply --only" in x)
    names = line.split("--only", 1)[1].split()[0]
    assert set(names.split(",")) == {"governor", "boost", "energy-preference", "swappiness"}
    # and `pitstop system` accepts exactly that command (a dry run on a copy of the tree)
    tree = tmp_path / "powersave"
    shutil.copytree(MACHINES / "powersave", tree, symlinks=True)
    r = pitstop_cli("system", "apply", "--only", names, "--sysroot", str(tree))
    assert r.returncode == 0 and "Dry run" in r.stdout, (r.stdout, r.stderr)
    planned = {x.split()[0] for x in r.stdout.splitlines() if " -> " in x}
    assert planned == set(names.split(",")), r.stdout  # each one would really change
