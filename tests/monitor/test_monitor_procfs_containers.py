"""/proc parsers on lines in proc(5)'s formats, container names from cgroup paths as the
runtimes write them, and the live readers on this very process."""

from __future__ import annotations

import os

from pitstop.telemetry.containers import parse_cgroup
from pitstop.telemetry.procfs import (
    parse_nspid,
    parse_schedstat,
    parse_stat,
    read_nspid,
    read_schedstat,
    read_stat,
)

HEX = "3f2a1b9c04de" + "a" * 52


def test_stat_line_with_spaces_and_parens_in_the_name() -> None:
    # proc(5): comm is in parentheses and may hold spaces and ')'.
    line = ("4242 (my (odd) name) S 4200 4242 4242 0 -1 4194304 1000 0 0 0 250 50 0 0 20 0 "
            "9 0 123456 1000000 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")
    st = parse_stat(line, ticks=100, page=4096)
    assert st is not None
    assert (st.pid, st.comm, st.state, st.ppid, st.threads) == (4242, "my (odd) name", "sleeping", 4200, 9)
    assert st.cpu_s == 3.0 and st.start_ticks == 123456 and st.rss_bytes == 2560 * 4096
    assert parse_stat("garbage") is None
    assert parse_stat("1 (x) R 0") is None


def test_nspid_and_schedstat() -> None:
    assert parse_nspid("Name:\tpython\nNSpid:\t31337\t1\n") == [31337, 1]
    assert parse_nspid("Name:\tpython\n") == []
    assert parse_schedstat("51445478 25764617 210\n") == (51445478, 25764617)
    assert parse_schedstat("") is None


def test_live_readers_on_this_process() -> None:
    st = read_stat(os.getpid())
    assert st is not None and st.pid == os.getpid() and st.rss_bytes > 0
    assert read_nspid(os.getpid())[0] == os.getpid()
    sched = read_schedstat(os.getpid())
    assert sched is not None and sched[0] > 0
    assert read_stat(2**22 + 12345) is None  # no such process: None, no exception


def test_container_from_cgroup_paths() -> None:
    cases = {
        f"12:memory:/docker/{HEX}\n0::/": ("docker", HEX),
        f"0::/system.slice/docker-{HEX}.scope": ("docker", HEX),
        f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{HEX}.scope/container":
            ("podman", HEX),
        (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_4e5f_6789_abcd_"
         f"ef0123456789.slice/cri-containerd-{HEX}.scope"): ("kubernetes", HEX),
        f"0::/kubepods/besteffort/pod0a1b2c3d-4e5f-6789-abcd-ef0123456789/{HEX}": ("kubernetes", HEX),
        f"0::/machine.slice/crio-{HEX}.scope": ("cri-o", HEX),
        "0::/lxc.payload.trainbox/init.scope": ("lxc", "trainbox"),
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0": ("slurm", "job_4242"),
    }
    for text, (runtime, ident) in cases.items():
        ref = parse_cgroup(text)
        assert ref is not None and (ref.runtime, ref.id) == (runtime, ident), text
    k8s = parse_cgroup(next(t for t in cases if "cri-containerd" in t))
    assert k8s is not None and k8s.name == "pod 0a1b2c3d-4e5f-6789-abcd-ef0123456789"
    assert parse_cgroup(f"0::/docker/{HEX}").short == "docker:3f2a1b9c04de"
    # A host process: a systemd session, a user slice, the root cgroup, a sandbox's own path.
    for host in ("0::/", "0::/user.slice/user-1000.slice/session-2.scope",
                 "4:memory:/process_api/9b955827152e917a68721dc9fe8f4f8d\n0::/"):
        assert parse_cgroup(host) is None, host


def test_pid_in_a_nested_pid_namespace_is_shown_as_the_process_sees_it() -> None:
    """A real process in its own PID namespace (unshare, as a container runtime does): the
    monitor lists it by this namespace's pid, with the pid it has inside (1)."""
    import shutil
    import subprocess
    import sys
    import time

    import pytest

    from pitstop.telemetry.processes import ProcessReader
    from pitstop.telemetry.procfs import read_children

    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c",
                              "import time; time.sleep(60)"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        inner: list[int] = []
        while not inner and outer.poll() is None and time.monotonic() < deadline:
            inner = read_children(outer.pid)
            time.sleep(0.05)
        if not inner:
            err = outer.stderr.read().decode() if outer.poll() is not None and outer.stderr else ""
            pytest.skip(f"cannot make a PID namespace here: {err.strip() or 'no child'}")
        pid = inner[0]
        assert read_nspid(pid) == [pid, 1]
        entry = next(p for p in ProcessReader(follow=[pid]).read()["processes"] if p["pid"] == pid)
        assert entry["nspid"] == 1 and entry["role"] == "training"
    finally:
        outer.kill()
        outer.wait()


def test_a_process_in_a_pod_counts_the_cpus_of_its_own_cgroup_quota(tmp_path) -> None:
    """The verdict's "N of M cores" is the training process's share: on a 64-core node a
    pod limited to 2.5 CPUs (cgroup-v2.rst: cpu.max; proc(5): Cpus_allowed_list) has 3,
    whatever the monitor's own limits are."""
    from pitstop.hostinfo.cpu import usable_cpus
    from pitstop.sysroot import Sysroot

    files = {"proc/4242/status": "Name:\tpython\nCpus_allowed_list:\t0-63\n",
             "proc/4242/cgroup": "0::/kubepods/pod1/ctr\n",
             "proc/self/status": "Cpus_allowed_list:\t0-63\n",
             "proc/self/cgroup": "0::/\n",
             "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "250000 100000\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cpus, why = usable_cpus(Sysroot(tmp_path), pid=4242)
    assert cpus == 3 and "pod1/ctr/cpu.max" in why
    assert usable_cpus(Sysroot(tmp_path))[0] == 64
