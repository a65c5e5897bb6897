"""The saved state is a list of writes root will carry out: nothing in it is trusted.

`revert` obeys only undos the settings table manages, resolved inside the tree; it
refuses another format, a state file root does not own or others may write, and keeps
every refused file where it was.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest
from conftest import MACHINES

from pitstop.sysroot import Sysroot
from pitstop.system.settings import SETTINGS, Machine, inspect_all
from pitstop.system.state import STATE_PATH

DOCTOR_MACHINES = MACHINES.parents[1] / "doctor" / "machines"


def _applied(pitstop_cli, machine) -> tuple[Path, Path]:
    root = machine("workstation-4090")
    done = pitstop_cli("system", "apply", "--only", "swappiness", "--yes", "--sysroot", str(root))
    assert done.returncode == 0, done.stderr
    return root, root / STATE_PATH.lstrip("/")


def _edit(state: Path, change) -> None:
    doc = json.loads(state.read_text())
    change(doc)
    state.write_text(json.dumps(doc))


def _refused(pitstop_cli, root: Path, state: Path, needle: str, digest) -> None:
    before = digest(root)
    kept = state.read_bytes()
    proc = pitstop_cli("system", "revert", "--yes", "--sysroot", str(root))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert state.read_bytes() == kept  # a refused file is kept
    assert digest(root) == before  # and nothing was written


def test_an_undo_outside_the_tree_is_refused(pitstop_cli, machine, digest, tmp_path) -> None:
    root, state = _applied(pitstop_cli, machine)

    def escape(doc):
        doc["entries"][0]["undo"]["path"] = "/../victim.txt"
    _edit(state, escape)
    _refused(pitstop_cli, root, state, "not a change pitstop makes for that setting", digest)
    assert not (root.parent / "victim.txt").exists()


def test_a_managed_path_that_links_out_of_the_tree_is_refused(pitstop_cli, machine, digest,
                                                             tmp_path) -> None:
    root, state = _applied(pitstop_cli, machine)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    swappiness = root / "proc/sys/vm/swappiness"
    swappiness.unlink()
    swappiness.symlink_to(victim)
    _refused(pitstop_cli, root, state, "outside", digest)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("undo, needle", [
    ({"kind": "write", "path": "/etc/shadow", "data_b64": "eAo="}, "not a change pitstop makes"),
    ({"kind": "write", "path": "/proc/sys/vm/../../../etc/passwd", "data_b64": "eAo="},
     "not a change pitstop makes"),
    ({"kind": "run", "argv": ["sh", "-c", "rm -rf /"]}, "not a change pitstop makes"),
    ({"kind": "run", "argv": ["nvidia-smi", "-i", "0", "-pm", "0; reboot"]},
     "not a change pitstop makes"),
])
def test_undos_the_table_does_not_manage_are_refused(pitstop_cli, machine, digest, undo,
                                                     needle) -> None:
    root, state = _applied(pitstop_cli, machine)

    def replace(doc):
        doc["entries"][0]["undo"] = undo
    _edit(state, replace)
    _refused(pitstop_cli, root, state, needle, digest)


def test_an_unknown_format_is_refused_and_kept(pitstop_cli, machine, digest) -> None:
    root, state = _applied(pitstop_cli, machine)

    def future(doc):
        doc["format"] = 99
    _edit(state, future)
    _refused(pitstop_cli, root, state, "has format 99", digest)


def test_a_100k_deep_state_file_is_refused_and_kept(pitstop_cli, machine, digest) -> None:
    root, state = _applied(pitstop_cli, machine)
    state.write_text("[" * 100_000 + "]" * 100_000)
    _refused(pitstop_cli, root, state, "nested deeper than", digest)


@pytest.mark.parametrize("what", ["group-writable", "world-writable", "foreign owner",
                                  "folder world-writable"])
def test_a_state_file_others_could_have_written_is_refused(pitstop_cli, machine, digest,
                                                           what) -> None:
    root, state = _applied(pitstop_cli, machine)
    if what == "group-writable":
        state.chmod(0o664)
    elif what == "world-writable":
        state.chmod(0o646)
    elif what == "folder world-writable":
        state.parent.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        os.chown(state, pwd.getpwnam("nobody").pw_uid, -1)
    needle = "not by root" if what == "foreign owner" else "writable"
    _refused(pitstop_cli, root, state, needle, digest)


def test_the_untouched_state_still_reverts(pitstop_cli, machine) -> None:
    root, state = _applied(pitstop_cli, machine)
    proc = pitstop_cli("system", "revert", "--yes", "--sysroot", str(root))
    assert proc.returncode == 0, proc.stderr
    assert not state.exists()


@pytest.mark.parametrize("tree", sorted(
    [p for p in (MACHINES).iterdir() if p.is_dir()]
    + [p for p in DOCTOR_MACHINES.iterdir() if p.is_dir()]), ids=lambda p: p.name)
def test_every_change_and_undo_on_every_machine_is_managed_by_its_setting(tree: Path) -> None:
    """The allow-list cannot drift from what the inspectors produce."""
    sr = Sysroot.of(tree)
    m = Machine.probe(sr, "/data" if sr.path("/data").exists() else None)
    by_name = {s.name: s for s in SETTINGS}
    for setting, reading in inspect_all(m):
        for change in reading.changes:
            for action in (change.action, change.undo):
                assert by_name[setting.name].manages(action), action.describe()
