"""`pitstop system` end to end: the real CLI in a subprocess against copies of fake trees.

How the root path is exercised: pitstop lets euid 0 change any machine, and lets a user
change a fake tree (--sysroot) whose top directory that user owns; the live machine
always needs euid 0. These tests run as root here and as a normal user elsewhere, and
both may change the tree copies they made. "Not root" is tested for real by a forked
child that drops to the `nobody` user with os.setuid (skipped when not started as root).

How a failure half-way is made *as root* (chmod does not stop root): a fake sysfs file
replaced by a symlink to /proc/sys/kernel/cap_last_cap, a 0444 sysctl that the kernel
refuses to write even for root (EACCES), read as "40"; and a fake nvidia-smi that, like
the real one on a locked board, "moves on" with exit 0 without changing the limit.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from pitstop_testing import run_cli_as_nobody, run_cli_in_process

WS = "workstation-4090"
DATA = "/data sets/imagenet"
THP = "sys/kernel/mm/transparent_hugepage/enabled"
STATE = "var/lib/pitstop/state.json"
UNIT = "etc/systemd/system/pitstop-system.service"
WANTS = "etc/systemd/system/multi-user.target.wants/pitstop-system.service"
GOV0 = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
CONTRACT_NAMES = ("governor", "energy-preference", "boost", "min-perf-pct", "cstate-latency",
                  "gpu-persistence", "gpu-power-limit", "swappiness", "thp", "readahead",
                  "shm")


def sys_cli(cli, root: Path, *args: str, env: dict[str, str] | None = None):
    return cli("system", *args, "--sysroot", str(root), env=env)


def one_line_error(r, code: int = 2) -> str:
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
    return r.stderr


# ---------------------------------------------------------------- show


def test_show_exit_codes_and_json(pitstop_cli, machine) -> None:
    root = machine(WS)
    r = sys_cli(pitstop_cli, root, "show", "--data", DATA, "--json")
    assert r.returncode == 1, r.stderr  # settings differ
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["settings"]][:2] == ["governor", "energy-preference"]
    assert all(s["status"] == "differs" and s["why"] for s in doc["settings"])
    codes = {f["code"] for f in doc["findings"]}
    assert codes == {f"SY{i:03d}" for i in range(1, 12)}
    assert "pitstop system apply --yes --only governor" in json.dumps(doc["findings"])

    r = sys_cli(pitstop_cli, machine("cloud-vm-nfs"), "show")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "unsupported" in r.stdout and "Why:" in r.stdout


def test_show_in_container_says_so_and_names_host_commands(pitstop_cli, machine) -> None:
    root = machine("docker-container")
    r = sys_cli(pitstop_cli, root, "show")
    assert r.returncode == 1
    assert "read-only" in r.stdout and "On the host" in r.stdout
    assert "cpupower frequency-set -g performance" in r.stdout
    doc = json.loads(sys_cli(pitstop_cli, root, "show", "--json").stdout)
    assert doc["environment"]["container"] == "docker"
    assert "SY012" in {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize("columns", [80, 200])
def test_show_is_readable_at_80_and_200_columns(pitstop_cli, machine, columns: int) -> None:
    root = machine(WS)
    r = sys_cli(pitstop_cli, root, "show", "--data", DATA, env={"COLUMNS": str(columns)})
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    table = [line for line in lines if line.startswith("│")]
    names = {line.split("│")[1].strip() for line in table} - {""}
    # every setting name whole on one line: no name broken over two rows
    assert names == set(CONTRACT_NAMES), names
    header = next(line for line in lines if "setting" in line and "status" in line)
    assert ("note" in header) == (columns >= 120)
    assert "Notes:" in r.stdout or columns >= 120
    assert "/dev/cpu_dma_latency" in r.stdout.replace("\n", "")  # the note, somewhere


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, needle", [
    (("apply", "--only", "governer"), "governer"),
    (("apply", "--only", "governor,nope"), "nope"),
    (("show", "--only", "bogus"), "bogus"),
    (("apply", "--profile", "gaming"), "gaming"),
    (("apply", "--data", "relative/path"), "--data"),
])
def test_bad_input_is_one_line_exit_2(pitstop_cli, machine, digest, args, needle) -> None:
    root = machine(WS)
    before = digest(root)
    err = one_line_error(sys_cli(pitstop_cli, root, *args, "--yes"
                                 if args[0] == "apply" else "--json"))
    assert needle in err
    assert digest(root) == before


def test_bad_sysroot_is_one_line_exit_2(pitstop_cli, tmp_path) -> None:
    err = one_line_error(pitstop_cli("system", "show", "--sysroot", str(tmp_path / "nope")))
    assert "--sysroot" in err


# ---------------------------------------------------------------- dry runs


def test_dry_runs_write_nothing(pitstop_cli, machine, digest) -> None:
    root = machine(WS)
    before = digest(root)
    r = sys_cli(pitstop_cli, root, "apply", "--data", DATA, "--persist")
    assert r.returncode == 0, r.stderr
    assert "Dry run" in r.stdout
    assert "echo performance > /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor" \
        in r.stdout
    assert "nvidia-smi -i 0 -pl 450" in r.stdout
    assert "mount -o remount,size=32768000k /dev/shm" in r.stdout
    assert "To apply: sudo pitstop system apply --yes --persist" in r.stdout
    r = sys_cli(pitstop_cli, root, "apply", "--only", "governor", "--json")
    assert json.loads(r.stdout)["dry_run"] is True
    r = sys_cli(pitstop_cli, root, "revert")
    assert r.returncode == 0 and "Nothing to revert" in r.stdout
    assert digest(root) == before


# ---------------------------------------------------------------- apply / revert


def test_apply_writes_values_after_saving_state(pitstop_cli, machine, tmp_path) -> None:
    root = machine(WS)
    log = tmp_path / "tools.log"
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--data", DATA,
                env={"FAKE_TOOLS_LOG": str(log)})
    assert r.returncode == 0, (r.stdout, r.stderr)
    for i in range(4):
        gov = root / f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor"
        assert gov.read_text() == "performance\n"
        assert (root / f"sys/devices/system/cpu/cpu{i}/cpuidle/state3/disable").read_text() \
            == "1\n"
        assert (root / f"sys/devices/system/cpu/cpu{i}/cpuidle/state2/disable").read_text() \
            == "0\n"
    assert (root / "sys/devices/system/cpu/intel_pstate/no_turbo").read_text() == "0\n"
    assert (root / "proc/sys/vm/swappiness").read_text() == "10\n"
    assert (root / THP).read_text() == "madvise\n"
    gpu = json.loads((root / "pitstop-recorded/nvml.json").read_text())["gpus"][0]
    assert gpu["persistence_mode"] is True and gpu["power_limit_w"] == 450.0
    assert "size=32768000k" in (root / "proc/self/mountinfo").read_text()

    state = json.loads((root / STATE).read_text())
    prev = {(e["setting"], e["target"]): e for e in state["entries"]}
    assert prev[("governor", "cpu0")]["undo"]["text"] == "powersave\n"
    assert prev[("swappiness", "vm.swappiness")]["undo"]["text"] == "60\n"
    assert prev[("gpu-power-limit", "GPU 0 (NVIDIA GeForce RTX 4090)")]["undo"]["argv"] == \
        ["nvidia-smi", "-i", "0", "-pl", "350"]
    # every tool call (they run after the sysfs writes) saw the state file already there
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["tool"] for c in calls] == ["nvidia-smi", "nvidia-smi", "mount"]
    assert all(c["state_saved"] for c in calls)

    # a second apply changes nothing and keeps the saved state as it was
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--data", DATA)
    assert r.returncode == 0 and "Nothing to change" in r.stdout
    assert json.loads((root / STATE).read_text())["entries"] == state["entries"]


def test_second_apply_keeps_the_original_values(pitstop_cli, machine, digest) -> None:
    root = machine(WS)
    before = digest(root)
    assert sys_cli(pitstop_cli, root, "apply", "--yes", "--only", "governor").returncode == 0
    # someone changes cpu0 behind pitstop's back; a second apply must still remember
    # "powersave" (the value before pitstop), not "schedutil"
    (root / GOV0).write_text("schedutil\n")
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--only", "governor,swappiness")
    assert r.returncode == 0, r.stdout
    assert (root / GOV0).read_text() == "performance\n"
    entries = json.loads((root / STATE).read_text())["entries"]
    assert [e["undo"]["text"] for e in entries if e["target"] == "cpu0"] == ["powersave\n"]
    assert {e["setting"] for e in entries} == {"governor", "swappiness"}
    r = sys_cli(pitstop_cli, root, "revert", "--yes")
    assert r.returncode == 0, r.stdout
    assert digest(root) == before
    assert not (root / STATE).exists()


def test_revert_restores_byte_for_byte_and_removes_the_unit(pitstop_cli, machine,
                                                           digest) -> None:
    root = machine(WS)
    before = digest(root)
    thp_before = (root / THP).read_text()
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--persist", "--data", DATA)
    assert r.returncode == 0, r.stdout
    unit = (root / UNIT).read_text()
    assert "ExecStart=" in unit and "system apply --profile training --yes" in unit
    assert "--data '/data sets/imagenet'" in unit and "WantedBy=multi-user.target" in unit
    assert os.readlink(root / WANTS) == "/etc/systemd/system/pitstop-system.service"

    r = sys_cli(pitstop_cli, root, "revert")  # dry run first: lists, changes nothing
    assert r.returncode == 0 and "echo powersave > " in r.stdout and (root / STATE).exists()
    r = sys_cli(pitstop_cli, root, "revert", "--yes")
    assert r.returncode == 0, r.stdout
    after = digest(root)
    # The THP file reads as a menu ("always madvise [never]") but, like the kernel's,
    # takes only the word: revert writes "never" back. A real kernel then shows the
    # same menu again; a plain file shows the word. Everything else is byte-for-byte.
    assert (root / THP).read_text() == "never\n" and "[never]" in thp_before
    before.pop(THP)
    after.pop(THP)
    assert after == before
    assert not (root / STATE).exists() and not (root / UNIT).exists()
    assert not os.path.lexists(root / WANTS)
    r = sys_cli(pitstop_cli, root, "revert", "--yes")
    assert r.returncode == 0 and "Nothing to revert" in r.stdout


# ---------------------------------------------------------------- failures


def test_failure_half_way_rolls_back_and_reports(pitstop_cli, machine, digest) -> None:
    root = machine(WS)
    swappiness = root / "proc/sys/vm/swappiness"
    swappiness.unlink()
    swappiness.symlink_to("/proc/sys/kernel/cap_last_cap")  # 0444 sysctl: EACCES even for root
    before = digest(root)
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--data", DATA)
    assert r.returncode == 1, (r.stdout, r.stderr)
    out = " ".join(r.stdout.split())
    assert "failed swappiness vm.swappiness: echo 10 > /proc/sys/vm/swappiness" in out
    assert "rolled back governor cpu0: echo powersave >" in out
    assert "rolled back gpu-power-limit" in out and "nvidia-smi -i 0 -pl 350" in out
    assert "machine is as before" in out
    # nothing after the failure ran, everything before it was undone, no state is left
    assert digest(root) == before
    assert not (root / STATE).exists()


def test_tool_that_silently_does_nothing_is_caught(pitstop_cli, machine, digest) -> None:
    root = machine(WS)
    nvml = root / "pitstop-recorded/nvml.json"
    doc = json.loads(nvml.read_text())
    doc["gpus"][0]["fake_power_limit_locked"] = True
    nvml.write_text(json.dumps(doc, indent=2) + "\n")
    before = digest(root)
    r = sys_cli(pitstop_cli, root, "apply", "--yes")
    assert r.returncode == 1
    out = " ".join(r.stdout.split())
    assert "the command succeeded but GPU 0 power_limit_w is still 350.0" in out
    assert "rolled back gpu-persistence" in out
    assert digest(root) == before


def test_state_that_cannot_be_saved_means_nothing_changes(pitstop_cli, machine,
                                                          digest) -> None:
    root = machine(WS)
    # /var/lib inside procfs: creating /var/lib/pitstop fails, also for root
    (root / "var").mkdir()
    (root / "var/lib").symlink_to("/proc/sys/kernel")
    before = digest(root)
    err = one_line_error(sys_cli(pitstop_cli, root, "apply", "--yes"))
    assert "cannot save the previous values" in err and "nothing was changed" in err
    assert digest(root) == before


def test_concurrent_runs_are_refused(pitstop_cli, machine, digest) -> None:
    import fcntl

    root = machine(WS)
    lockdir = root / "var/lib/pitstop"
    lockdir.mkdir(parents=True)
    before = digest(root)
    fd = os.open(lockdir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another `pitstop system apply` would
        err = one_line_error(sys_cli(pitstop_cli, root, "apply", "--yes"))
        assert "another `pitstop system apply/revert` is running" in err
    finally:
        os.close(fd)
    assert digest(root) == before


def test_revert_keeps_what_it_could_not_restore(pitstop_cli, machine) -> None:
    root = machine(WS)
    assert sys_cli(pitstop_cli, root, "apply", "--yes", "--only", "boost,swappiness"
                   ).returncode == 0
    # the saved target is now a directory: writing to it fails (EISDIR, also for root)
    no_turbo = root / "sys/devices/system/cpu/intel_pstate/no_turbo"
    no_turbo.unlink()
    no_turbo.mkdir()
    r = sys_cli(pitstop_cli, root, "revert", "--yes")
    assert r.returncode == 1
    assert "could not restore boost" in " ".join(r.stdout.split())
    assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"
    entries = json.loads((root / STATE).read_text())["entries"]
    assert [e["setting"] for e in entries] == ["boost"]


def test_container_apply_changes_nothing_and_says_what_the_host_must_do(
        pitstop_cli, machine, digest) -> None:
    root = machine("docker-container")
    before = digest(root)
    r = sys_cli(pitstop_cli, root, "apply", "--yes")
    assert r.returncode == 1
    out = " ".join(r.stdout.split())
    assert "skipped governor cpu0: /sys is mounted read-only inside a docker container" in out
    assert "docker run --shm-size=" in out
    assert "On the host (or by hand), run: cpupower frequency-set -g performance" in out
    assert digest(root) == before


def test_missing_nvidia_smi_is_reported_not_a_crash(pitstop_cli, machine) -> None:
    root = machine(WS)
    (root / "usr/bin/nvidia-smi").unlink()
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--only", "gpu-persistence,governor")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    out = " ".join(r.stdout.split())
    assert "skipped gpu-persistence" in out and "apt install nvidia-smi" in out
    assert (root / GOV0).read_text() == "performance\n"


# ---------------------------------------------------------------- not root


def _run_in_process(argv: list[str]) -> tuple[int, str]:
    """Run the CLI in this process; return (exit code, stdout and stderr together)."""
    code, out, err = run_cli_in_process(argv)
    return code, out + err


def _run_as_nobody(argv: list[str]) -> tuple[int, str]:
    """Run the CLI as `nobody` in a forked child (see pitstop_testing.run_cli_as_nobody)."""
    code, out, err = run_cli_as_nobody(argv)
    return code, out + err


def _writable_by_everyone(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o777)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o777 if os.access(p, os.X_OK) else 0o666)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to `nobody` needs to start as root")
def test_without_root_nothing_is_written_ever(machine, digest) -> None:
    import pwd

    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no `nobody` user on this machine")
    # A tree that `nobody` *could* write (every dir 0777, every file 0666) and that
    # belongs to root: only pitstop's own check stands between `--yes` and a write.
    base = Path(tempfile.mkdtemp(prefix="pitstop-noroot-"))
    try:
        os.chmod(base, 0o777)
        root = base / WS
        shutil.copytree(machine(WS), root, symlinks=True)
        _writable_by_everyone(root)
        runs = [(["system", "apply", "--yes"], 2, ("not root", "nothing was changed")),
                (["system", "apply"], 0, ("Dry run",)),
                (["system", "revert", "--yes"], 2, ("not root",)),
                (["system", "show"], 1, ("governor",))]
        # Warm-up as root on a throwaway copy: imports everything these commands use.
        warm = base / "warm-up"
        shutil.copytree(root, warm, symlinks=True)
        for args, _code, _needles in runs:
            _run_in_process([*args, "--sysroot", str(warm)])
        before = digest(root)
        for args, want, needles in runs:
            code, out = _run_as_nobody([*args, "--sysroot", str(root)])
            assert code == want, (args, out)
            for needle in needles:
                assert needle in out, (args, out)
        assert digest(root) == before
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_live_machine_needs_root(pitstop_cli) -> None:
    # the live check in-process: euid 0 may, anyone else may not (no write is attempted)
    from pitstop.sysroot import Sysroot
    from pitstop.system.apply import may_change

    reason = may_change(Sysroot.of(None))
    assert (reason == "") == (os.geteuid() == 0)


def test_live_machine_show_and_dry_run_never_crash(pitstop_cli, tmp_path) -> None:
    # Whatever this machine is (a VM, a container, a workstation), show and the dry run
    # read it and say what they could not check; nothing here is changed.
    r = pitstop_cli("system", "show", "--json", "--data", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["settings"]] == [
        "governor", "energy-preference", "boost", "min-perf-pct", "cstate-latency",
        "gpu-persistence", "gpu-power-limit", "swappiness", "thp", "readahead", "shm"]
    assert all(s["status"] != "unknown" or s["detail"] for s in doc["settings"])
    r = pitstop_cli("system", "apply")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    err = one_line_error(pitstop_cli("system", "show", "--data", str(tmp_path / "missing")))
    assert "--data" in err


def test_ctrl_c_half_way_rolls_back(pitstop_cli, machine, digest) -> None:
    # The fake mount (the last change) delivers SIGINT to pitstop, as a Ctrl-C would.
    root = machine(WS)
    before = digest(root)
    r = sys_cli(pitstop_cli, root, "apply", "--yes", "--data", DATA,
                env={"FAKE_TOOLS_CTRL_C": "1"})
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    out = " ".join(r.stdout.split())
    assert "failed shm /dev/shm: interrupted (Ctrl-C)" in out
    assert "rolled back governor cpu0" in out and "machine is as before" in out
    after = digest(root)
    assert (root / THP).read_text() == "never\n"  # the menu file takes the word back
    before.pop(THP)
    after.pop(THP)
    assert after == before and not (root / STATE).exists()
