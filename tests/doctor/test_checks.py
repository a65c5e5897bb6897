"""Each check as a pure function of a facts document.

The base documents come from the real probes run against the fake machines; each test
changes the facts the check reads and asserts the status, evidence and remedy.
"""

from __future__ import annotations

from typing import Any

import pytest

from pitstop.doctor.checks import all_checks, run_check, run_checks
from pitstop.doctor.checks.base import CheckResult


def result(facts: dict[str, Any], code: str) -> list[CheckResult]:
    chk = next(c for c in all_checks() if c.code == code)
    return run_check(chk, facts)


def one(facts: dict[str, Any], code: str) -> CheckResult:
    res = result(facts, code)
    assert len(res) == 1, res
    return res[0]


def gpu0(facts: dict[str, Any]) -> dict[str, Any]:
    g: dict[str, Any] = facts["nvml"]["gpus"][0]
    return g


def test_healthy_workstation_has_nothing_wrong(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    bad = [r for r in run_checks(facts) if r.status in ("warning", "problem")]
    assert bad == []


def test_every_check_survives_an_empty_facts_document() -> None:
    facts = {"schema_version": 1}
    results = run_checks(facts)
    assert {r.code for r in results} == {c.code for c in all_checks()}
    for r in results:
        assert r.status in ("ok", "unknown"), (r.code, r.summary)
        assert "internal error" not in r.summary, (r.code, r.summary)


def test_every_check_survives_failed_probes(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    for name in list(facts):
        if name not in ("schema_version", "meta"):
            facts[name] = {"error": f"{name} exploded"}
    for r in run_checks(facts):
        assert "internal error" not in r.summary, (r.code, r.summary)
        if r.status == "unknown" and not r.not_applicable:
            assert r.summary.startswith("could not check: ")


# --- driver / CUDA -----------------------------------------------------------------

def test_no_driver_and_nouveau(facts_of) -> None:
    facts = facts_of("nouveau")
    r1, r2 = one(facts, "DR001"), one(facts, "DR002")
    assert r1.status == r2.status == "problem"
    assert r1.remedy is not None
    text = r1.remedy.text
    for needle in ("contrib non-free non-free-firmware", "nvidia-driver firmware-misc-nonfree",
                   "linux-headers-$(uname -r)", "nvidia-open-kernel-dkms", "blacklist nouveau",
                   "update-initramfs -u", "reboot", "535 (bookworm) / 550 (trixie)"):
        assert needle in text
    assert "bookworm" in text  # the facts say Debian 12


def test_ubuntu_gets_ubuntu_driver_command(facts_of) -> None:
    facts = facts_of("nouveau")
    facts["platform"].update(os_id="ubuntu", os_version_id="24.04")
    r = one(facts, "DR001")
    assert r.remedy is not None and "ubuntu-drivers install" in r.remedy.text
    assert "firmware-misc-nonfree" not in r.remedy.text


def test_cpu_wheel_with_gpu_names_the_cuda_index(facts_of) -> None:
    r = one(facts_of("cpu-wheel"), "DR004")
    assert r.status == "problem"
    assert r.remedy is not None
    # driver 535 (CUDA 12.2): torch 2.7's newest fully supported variant is cu118
    assert "torch==2.7.0 --index-url https://download.pytorch.org/whl/cu118" in r.remedy.text


def test_cpu_wheel_without_gpu_is_fine(facts_of) -> None:
    r = one(facts_of("powersave"), "DR004")
    assert r.not_applicable


@pytest.mark.parametrize(("driver", "cuda", "status"), [
    ("535.247.01", "12.8", "warning"),   # minor-version compatibility only
    ("520.61.05", "12.4", "problem"),    # below 525.60.13: CUDA 12 cannot start
    ("570.172.08", "12.8", "ok"),
    ("575.64.03", "13.0", "problem"),    # 13.x needs >= 580
    ("470.256.02", "11.8", "warning"),
])
def test_driver_vs_wheel_cuda(facts_of, driver: str, cuda: str, status: str) -> None:
    facts = facts_of("driver535-cu128")
    facts["nvml"]["system"]["driver_version"] = driver
    facts["torch"]["cuda"] = cuda
    r = one(facts, "DR005")
    assert r.status == status, r.summary
    assert r.evidence["driver"] == driver


def test_driver535_cu128_fixture_points_to_cuda_repo(facts_of) -> None:
    r = one(facts_of("driver535-cu128"), "DR005")
    assert r.status == "warning"
    assert r.remedy is not None
    assert "cuda-keyring" in r.remedy.text and "debian12" in r.remedy.text
    assert "torch==2.8.0 --index-url https://download.pytorch.org/whl/cu129" in r.remedy.text


def test_cudnn_mismatch_and_missing(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    assert one(facts, "DR006").status == "ok"
    facts["torch"]["cuda_libs"]["nvidia-cudnn-cu12"] = "8.9.2.26"
    r = one(facts, "DR006")
    assert r.status == "warning" and "8.9.2.26" in r.summary
    assert r.remedy is not None and "nvidia-cudnn-cu12==9.1.0.70" in r.remedy.text
    del facts["torch"]["cuda_libs"]["nvidia-cudnn-cu12"]
    assert one(facts, "DR006").status == "problem"


def test_cudnn_runtime_result_wins(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["torch"]["runtime"] = {"cuda_available": True, "cudnn_available": False,
                                 "cudnn_version": None, "cudnn_conv_ok": False,
                                 "cudnn_error": "RuntimeError: CUDNN_STATUS_NOT_INITIALIZED"}
    r = one(facts, "DR006")
    assert r.status == "problem" and "CUDNN_STATUS_NOT_INITIALIZED" in r.summary


def test_cuda_init_needs_torch_flag_then_reports(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    r = one(facts, "DR007")
    assert r.status == "unknown" and "--torch" in r.summary
    facts["torch"]["runtime"] = {"cuda_available": False, "device_count": 0,
                                 "cuda_error": "RuntimeError: Found no NVIDIA driver"}
    assert one(facts, "DR007").status == "problem"
    facts["torch"]["runtime"] = {"cuda_available": True, "device_count": 1}
    assert one(facts, "DR007").status == "ok"


def test_cuda_lib_pins(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    assert one(facts, "DR008").status == "ok"
    facts["torch"]["cuda_libs"]["nvidia-nccl-cu12"] = "2.18.1"
    r = one(facts, "DR008")
    assert r.status == "warning"
    assert r.remedy is not None and "nvidia-nccl-cu12==2.21.5" in r.remedy.text


def test_cuda_libs_every_pin_of_the_real_wheel_is_read(facts_of) -> None:
    # The bug of issue 15: 8-11 of torch's pins called "missing" although installed.
    for machine, release, pinned in (("rtx4090-workstation", "2.5.1", 12),
                                     ("docker-shm64", "2.8.0", 14)):
        r = one(facts_of(machine), "DR008")
        assert r.status == "ok", r.summary
        assert r.evidence["required"] == pinned == r.evidence["matching"], r.evidence
        assert r.evidence["torch"] == release and r.evidence["missing"] == []


def test_cuda_libs_missing_is_only_what_is_absent(facts_of) -> None:
    facts = facts_of("docker-shm64")
    del facts["torch"]["cuda_libs"]["nvidia-cufile-cu12"]
    facts["torch"]["cuda_libs"]["nvidia-nccl-cu12"] = "2.26.2"
    r = one(facts, "DR008")
    assert r.status == "warning"
    assert r.evidence["missing"] == ["nvidia-cufile-cu12"]
    assert r.evidence["mismatched"] == {"nvidia-nccl-cu12": {"torch_wants": "==2.27.3",
                                                             "installed": "2.26.2"}}
    assert "1 missing (nvidia-cufile-cu12)" in r.summary
    assert r.remedy is not None
    assert r.remedy.text == "pip install nvidia-cufile-cu12==1.13.1.3 nvidia-nccl-cu12==2.27.3"


def test_cuda_libs_markers_decide_what_applies(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    env = facts["torch"]["marker_environment"]
    assert env["platform_machine"] == "x86_64" and env["python_version"] == "3.13"
    facts["torch"]["cuda_libs"] = {}
    env["platform_machine"] = "aarch64"  # the x86_64-only pins do not apply on arm64
    assert one(facts, "DR008").not_applicable
    env["platform_machine"] = None  # unknown architecture: undecided, never "missing"
    r = one(facts, "DR008")
    assert r.status == "ok" and len(r.evidence["undecided"]) == 12 and r.evidence["missing"] == []
    # ... unless its siblings under the same marker are installed: then it held.
    facts = facts_of("rtx4090-workstation")
    facts["torch"]["marker_environment"]["platform_machine"] = None
    del facts["torch"]["cuda_libs"]["nvidia-nvtx-cu12"]
    r = one(facts, "DR008")
    assert r.status == "warning" and r.evidence["missing"] == ["nvidia-nvtx-cu12"]


def test_cuda_libs_from_facts_without_requires_dist(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    del facts["torch"]["requires_dist"]  # a facts file of the earlier format: its pins
    facts["torch"]["cuda_libs"]["nvidia-nccl-cu12"] = "2.18.1"
    assert one(facts, "DR008").status == "warning"


def test_torch_missing(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["torch"] = {"installed": False, "cuda_libs": {}}
    assert one(facts, "DR003").status == "warning"
    assert one(facts, "DR004").not_applicable


# --- GPU -------------------------------------------------------------------------------

def test_idle_gen1_link_is_not_a_problem(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    r = one(facts, "DR010")
    assert r.status == "ok" and "idle" in r.summary
    gpu0(facts)["utilization_gpu_pct"] = 95
    r = one(facts, "DR010")
    assert r.status == "problem" and "Gen1 x16" in r.summary


def test_width_degraded_is_reported_even_at_idle(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    gpu0(facts)["pcie_link_width"] = 8
    assert one(facts, "DR010").status == "warning"


def test_gen3_x4_slot(facts_of) -> None:
    facts = facts_of("pcie-gen3-x4")
    r = one(facts, "DR011")
    assert r.status == "problem"
    assert r.evidence["slot_max_link"] == "Gen3 x4" and r.evidence["gpu_max_link"] == "Gen4 x16"
    assert r.evidence["slot_max_gbps"] == 3.9


def test_replays(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    gpu0(facts)["pcie_replay_counter"] = 12
    assert one(facts, "DR012").status == "warning"
    gpu0(facts)["pcie_replay_counter"] = 5000
    assert one(facts, "DR012").status == "problem"


def test_throttle_reasons(facts_of) -> None:
    facts = facts_of("thermal-slowdown")
    assert one(facts, "DR013").status == "problem"
    assert one(facts, "DR016").status == "problem"
    assert one(facts, "DR014").status == "ok"
    gpu0(facts)["clocks_event_reasons"] = 0x80 | 0x1
    assert one(facts, "DR014").status == "problem"
    assert one(facts, "DR013").status == "ok"
    gpu0(facts)["clocks_event_reasons"] = 0x2
    assert one(facts, "DR015").status == "warning"
    gpu0(facts)["clocks_event_reasons"] = 0x1  # idle alone is never a finding
    assert all(one(facts, c).status == "ok" for c in ("DR013", "DR014", "DR015"))


def test_temperature_margin(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    gpu0(facts)["temperature_c"] = 86
    r = one(facts, "DR016")
    assert r.status == "warning" and r.evidence["margin_c"] == 4


def test_power_limit_below_default(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    gpu0(facts)["power_limit_w"] = 300.0
    gpu0(facts)["clocks_event_reasons"] = 0x4
    r = one(facts, "DR017")
    assert r.status == "warning" and r.evidence["power_capped_now"] is True
    assert r.remedy is not None
    assert "nvidia-smi -i 0 -pl 450" in r.remedy.text
    assert "pitstop system apply --only gpu-power-limit" in r.remedy.text


def test_persistence_off(facts_of) -> None:
    r = one(facts_of("thermal-slowdown"), "DR018")
    assert r.status == "warning"
    assert r.remedy is not None and "nvidia-persistenced" in r.remedy.text
    assert "pitstop system apply --only gpu-persistence" in r.remedy.text


def test_other_process_on_gpu(facts_of) -> None:
    facts = facts_of("pcie-gen3-x4")
    r = one(facts, "DR019")
    assert r.status == "warning" and "pid 5123" in r.summary and "19.9 GiB" in r.summary
    facts["nvml"]["self_pid"] = 5123  # the doctor itself does not count
    assert one(facts, "DR019").status == "ok"


def test_remapped_rows(facts_of) -> None:
    facts = facts_of("docker-shm64")
    assert one(facts, "DR020").status == "ok"
    gpu0(facts)["remapped_rows"] = [0, 1, 1, 0]
    assert one(facts, "DR020").status == "warning"
    gpu0(facts)["remapped_rows"] = [0, 1, 0, 1]
    assert one(facts, "DR020").status == "problem"
    assert one(facts_of("rtx4090-workstation"), "DR020").not_applicable


def test_numa_node_of_gpu(facts_of) -> None:
    facts = facts_of("docker-shm64")
    facts["cpu"]["numa_nodes"] = {"0": list(range(16)), "1": list(range(16, 32))}
    facts["pci"]["nvidia_gpus"][0]["numa_node"] = 1
    facts["cpu"]["affinity"] = list(range(16))
    r = one(facts, "DR021")
    assert r.status == "warning" and "numactl --cpunodebind=1" in (r.remedy.text if r.remedy else "")
    facts["cpu"]["affinity"] = list(range(32))
    assert one(facts, "DR021").status == "ok"


def test_gpu_missing_from_driver(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["pci"]["nvidia_gpus"].append(dict(facts["pci"]["nvidia_gpus"][0],
                                            pci_address="0000:02:00.0"))
    assert one(facts, "DR022").status == "problem"


def test_gpu_checks_without_gpu_are_not_applicable(facts_of) -> None:
    facts = facts_of("powersave")
    for code in ("DR001", "DR010", "DR013", "DR018", "DR019", "DR022"):
        assert all(r.not_applicable and r.status == "unknown" for r in result(facts, code)), code


# --- storage -------------------------------------------------------------------------

def test_lvm_on_rotational_disk(facts_of) -> None:
    facts = facts_of("lvm-hdd")
    r = one(facts, "DR030")
    assert r.status == "problem"
    assert r.evidence["chain"] == "dm dm-0 (vg0-datasets) -> partition sda2 -> sda"
    assert "sata HDD ST8000DM004-2U91" in r.summary


@pytest.mark.parametrize(("fstype", "source", "flagged"), [
    ("nfs4", "fileserver:/export/data", True),
    ("cifs", "//nas/data", True),
    ("fuse.sshfs", "user@host:/data", True),
    ("fuse.s3fs", "s3fs", True),
    ("ext4", "/dev/nvme0n1p2", False),
    ("xfs", "/dev/md0", False),
])
def test_network_filesystems(facts_of, fstype: str, source: str, flagged: bool) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["storage"].update(fstype=fstype, source=source)
    r = one(facts, "DR031")
    assert (r.status == "warning") is flagged


def test_usb_and_free_space(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["storage"]["disks"][0]["transport"] = "usb"
    assert one(facts, "DR032").status == "warning"
    facts["storage"]["free_bytes"] = 2 << 30
    r = one(facts, "DR033")
    assert r.status == "warning" and r.evidence["free"] == "2.0 GiB"


def test_io_judgement(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    assert one(facts, "DR034").status == "unknown"
    facts["io"] = {"measured": True, "files_sampled": 10, "results": [
        {"block_bytes": 4096, "iops": 150.0, "mb_per_s": 0.6, "o_direct": True},
        {"block_bytes": 131072, "iops": 120.0, "mb_per_s": 15.7, "o_direct": True}]}
    r = one(facts, "DR034")
    assert r.status == "problem" and r.evidence["read_128k_mb_s"] == 15.7
    facts["io"]["results"][1]["mb_per_s"] = 1800.0
    assert one(facts, "DR034").status == "ok"


# --- CPU -----------------------------------------------------------------------------

def test_powersave_machine(facts_of) -> None:
    facts = facts_of("powersave")
    r = one(facts, "DR040")
    assert r.status == "warning" and "powersave on 8 of 8 cores" in r.summary
    assert r.remedy is not None
    assert "cpupower frequency-set -g performance" in r.remedy.text
    assert "pitstop system apply --only governor" in r.remedy.text
    assert one(facts, "DR041").status == "warning"
    b = one(facts, "DR042")
    assert b.status == "warning" and b.remedy is not None and "no_turbo" in b.remedy.text


def test_vm_without_cpufreq_says_so(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["cpu"].update(cpufreq_present=False, governor_counts={}, energy_preferences={},
                        boost={})
    facts["platform"]["virtual_machine"] = True
    r = one(facts, "DR040")
    assert r.status == "unknown" and "virtual machine" in r.summary


def test_cgroup_quota_and_threads(facts_of) -> None:
    facts = facts_of("docker-shm64")
    q = one(facts, "DR043")
    assert q.status == "warning" and q.evidence["usable_cpus"] == 4.0
    facts["environment"]["variables"]["OMP_NUM_THREADS"] = "32"
    r = one(facts, "DR044")
    assert r.status == "problem" and "OMP_NUM_THREADS=32" in r.summary
    facts["environment"]["variables"]["OMP_NUM_THREADS"] = "4"
    assert one(facts, "DR044").status == "ok"


def test_recorded_torch_threads_oversubscribe_a_quota(facts_of) -> None:
    facts = facts_of("docker-shm64")
    assert facts["torch"]["runtime_recorded"] is True
    r = one(facts, "DR044")
    assert r.status == "problem" and "torch.get_num_threads()=16" in r.summary
    facts["environment"]["variables"]["OMP_NUM_THREADS"] = "4"
    assert one(facts, "DR044").status == "ok"
    assert one(facts, "DR043").status == "ok"  # the quota is what the threads are sized by


def test_a_schedulers_cpuset_is_not_oversubscription(facts_of) -> None:
    facts = facts_of("slurm-node-2of8")
    q = one(facts, "DR043")
    assert q.status == "ok" and q.evidence["assigned_by"] == "Slurm job 4242"
    assert "os.sched_getaffinity" in q.summary
    # Only OpenMP's default is known to follow the mask (torch's inter-op pool and, per
    # pytorch/pytorch#193859, some builds' intra-op default do not): no claim about torch.
    assert "torch follow" not in q.summary
    r = one(facts, "DR044")
    assert r.status == "ok" and "torch's own count is not known: run with --torch" in r.summary
    # With the import recorded, torch's own count decides.
    facts["torch"]["runtime"] = {"num_threads": 64, "cuda_available": True}
    assert one(facts, "DR044").status == "problem"
    facts["torch"]["runtime"]["num_threads"] = 16
    assert one(facts, "DR044").summary == "thread counts fit the usable CPUs"
    del facts["torch"]["runtime"]
    # The same mask on a plain host (taskset by hand) is worth a warning.
    del facts["environment"]["variables"]["SLURM_JOB_ID"]
    assert one(facts, "DR043").status == "warning"
    # OpenMP follows the affinity mask: without a quota, no "OMP_NUM_THREADS unset" warning.
    assert one(facts, "DR044").status == "ok"
    facts["environment"]["variables"]["OMP_NUM_THREADS"] = "64"
    assert one(facts, "DR044").status == "problem"


def test_pod_quota_that_omp_fits(facts_of) -> None:
    facts = facts_of("k8s-pod-1of4")
    q = one(facts, "DR043")
    assert q.status == "ok" and "OMP_NUM_THREADS=8 fits" in q.summary
    del facts["environment"]["variables"]["OMP_NUM_THREADS"]
    assert "torch.get_num_threads()=8 fits" in one(facts, "DR043").summary
    del facts["torch"]["runtime"]
    assert one(facts, "DR043").status == "warning"
    assert one(facts, "DR044").status == "warning"


# --- memory --------------------------------------------------------------------------

def test_docker_shm(facts_of) -> None:
    facts = facts_of("docker-shm64")
    r = one(facts, "DR050")
    assert r.status == "problem" and r.evidence["shm_bytes"] == 64 << 20
    assert r.remedy is not None and "--shm-size" in r.remedy.text and "--ipc=host" in r.remedy.text
    facts["container"]["kubernetes"] = True
    r = one(facts, "DR050")
    assert r.remedy is not None and "medium: Memory" in r.remedy.text


def test_swap_swappiness_memory_thp(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    m = facts["memory"]
    m["swap_free_bytes"] = m["swap_total_bytes"] - (3 << 30)
    assert one(facts, "DR051").status == "warning"
    m["swappiness"] = 60
    r = one(facts, "DR052")
    assert r.status == "warning" and r.remedy is not None
    assert "pitstop system apply --only swappiness" in r.remedy.text
    m["mem_available_bytes"] = 1 << 30
    assert one(facts, "DR053").status == "warning"
    m["thp_enabled"] = "never"
    assert one(facts, "DR054").status == "warning"


# --- container / environment / platform -----------------------------------------------

def test_container_without_gpu_access(facts_of) -> None:
    facts = facts_of("docker-shm64")
    assert one(facts, "DR060").status == "ok" and "docker" in one(facts, "DR060").summary
    assert one(facts, "DR061").status == "ok"
    facts["kernel_modules"]["dev_nodes"] = []
    facts["nvml"] = {"available": False, "reason": "libnvidia-ml.so.1 not found"}
    r = one(facts, "DR061")
    assert r.status == "problem" and r.remedy is not None and "--gpus all" in r.remedy.text


@pytest.mark.parametrize(("env", "code", "status"), [
    ({"CUDA_LAUNCH_BLOCKING": "1"}, "DR070", "problem"),
    ({"CUDA_LAUNCH_BLOCKING": "0"}, "DR070", "ok"),
    ({"NCCL_DEBUG": "INFO"}, "DR071", "warning"),
    ({"NCCL_DEBUG": "WARN"}, "DR071", "ok"),
    ({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "DR071", "warning"),
    ({"TORCH_SHOW_CPP_STACKTRACES": "1"}, "DR071", "warning"),
    ({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, "DR072", "problem"),
    ({"NCCL_P2P_DISABLE": "1"}, "DR073", "warning"),
    ({"NCCL_IB_DISABLE": "1"}, "DR073", "warning"),
    ({"CUDA_VISIBLE_DEVICES": ""}, "DR074", "problem"),
    ({"CUDA_VISIBLE_DEVICES": "-1"}, "DR074", "problem"),
    ({"CUDA_VISIBLE_DEVICES": "0,3"}, "DR074", "problem"),
    ({"CUDA_VISIBLE_DEVICES": "0"}, "DR074", "ok"),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "DR075", "ok"),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}, "DR075", "warning"),
    ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb"}, "DR075", "warning"),
])
def test_environment(facts_of, env: dict[str, str], code: str, status: str) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["environment"]["variables"].update(env)
    assert one(facts, code).status == status


def test_old_python_and_glibc(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["python"].update(version="3.8.10", glibc="2.17")
    assert one(facts, "DR080").status == "warning"
    assert one(facts, "DR081").status == "problem"
    facts["python"]["glibc"] = None
    assert one(facts, "DR081").status == "unknown"


def test_a_crashing_check_becomes_unknown(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["nvml"]["gpus"][0]["clocks_event_reasons"] = "not a number"
    r = one(facts, "DR013")
    assert r.status == "unknown" and "internal error" in r.summary


def test_readahead_only_judged_for_spinning_disks(facts_of) -> None:
    r = one(facts_of("lvm-hdd"), "DR035")
    assert r.status == "warning" and r.evidence == {"device": "dm-0", "read_ahead_kb": 128,
                                                    "wanted_kb": 4096, "under": "spinning disk"}
    assert "spinning disk" in r.summary
    assert r.remedy is not None and "pitstop system apply --only readahead" in r.remedy.text
    assert one(facts_of("rtx4090-workstation"), "DR035").not_applicable


def test_memlock_with_rdma(facts_of) -> None:
    facts = facts_of("docker-shm64")
    assert one(facts, "DR055").not_applicable
    facts["kernel_modules"]["infiniband_devices"] = ["mlx5_0", "mlx5_1"]
    # the host's RDMA devices show in sysfs, but the container has no verbs nodes
    r = one(facts, "DR055")
    assert r.not_applicable and "not passed into this container" in r.summary
    facts["kernel_modules"]["rdma_dev_nodes"] = ["rdma_cm", "uverbs0", "uverbs1"]
    r = one(facts, "DR055")
    assert r.status == "warning" and r.evidence["memlock_soft"] == "8 MiB"
    assert r.remedy is not None and "--ulimit memlock=-1:-1" in r.remedy.text
    facts["memory"]["memlock"] = {"soft_bytes": None, "hard_bytes": None, "unlimited": True}
    assert one(facts, "DR055").status == "ok"


def test_a_gpu_nvml_cannot_read(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["nvml"]["gpus"].append({"index": 1, "error": "NVMLError_GpuIsLost: GPU is lost"})
    facts["pci"]["nvidia_gpus"].append(dict(facts["pci"]["nvidia_gpus"][0],
                                            pci_address="0000:02:00.0"))
    r = one(facts, "DR022")
    assert r.status == "problem" and "GPU is lost" in r.evidence["nvml_errors"][0]
    temps = result(facts, "DR016")
    assert [t.status for t in temps] == ["ok", "unknown"]
    assert "GPU is lost" in temps[1].summary


def test_small_host_shm_at_its_default_is_fine(facts_of) -> None:
    facts = facts_of("powersave")  # 16 GiB RAM: the default /dev/shm is 8 GiB
    m = facts["memory"]
    m["mem_total_bytes"] = 4 << 30
    m["shm"]["size_bytes"] = 2 << 30
    assert one(facts, "DR050").status == "ok"
    m["shm"]["size_bytes"] = 512 << 20  # shrunk below the default: worth fixing
    r = one(facts, "DR050")
    assert r.status == "problem" and r.remedy is not None
    assert "size=50%" in r.remedy.text and "pitstop system apply --only shm" in r.remedy.text


def test_driver_library_mismatch_says_reboot(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["nvml"] = {"available": False,
                     "reason": "nvmlInit failed: Driver/library version mismatch"}
    r = one(facts, "DR001")
    assert r.status == "problem" and r.remedy is not None and "sudo reboot" in r.remedy.text


def test_container_memory_limit_is_what_counts(facts_of) -> None:
    facts = facts_of("docker-shm64")
    r = one(facts, "DR053")  # 256 GiB host, --memory=32g, 3 GiB used
    assert r.status == "ok" and r.evidence["mem_total"] == "32.0 GiB"
    assert r.evidence["mem_available"] == "29.0 GiB"
    facts["memory"]["cgroup"]["usage_bytes"] = 31 << 30
    r = one(facts, "DR053")
    assert r.status == "warning" and "cgroup v2 limit" in r.summary


def test_cloud_vm_data_on_ebs(facts_of) -> None:
    facts = facts_of("cloud-vm-ebs")
    r = one(facts, "DR031")
    assert r.status == "warning" and "network block volume: nvme1n1 (AWS EBS volume" in r.summary
    r = one(facts, "DR035")
    assert r.status == "warning" and "spinning" not in r.summary
    assert "AWS EBS volume" in r.summary and "round trip" in r.summary
    r = one(facts, "DR030")
    assert r.status == "ok" and "network volume" in r.summary and "spinning disk (" not in r.summary
    # The instance store is local flash, not a network volume.
    facts["storage"]["disks"][0].update(name="nvme2n1", model="Amazon EC2 NVMe Instance Storage")
    assert one(facts, "DR031").status == "ok"
    assert one(facts, "DR035").not_applicable


@pytest.mark.parametrize(("disk", "dr030", "dr035_word"), [
    # GCP Persistent Disk over virtio-scsi reports rotational=1
    ({"name": "sda", "transport": "virtio", "vendor": "Google", "model": "PersistentDisk",
      "rotational": 1}, "ok", "GCP Persistent Disk"),
    ({"name": "rbd0", "transport": "rbd", "model": None, "rotational": 0}, "ok",
     "Ceph RBD volume"),
    ({"name": "sdb", "transport": "iscsi", "vendor": "LIO-ORG", "model": "datastore",
      "rotational": 1}, "ok", "iSCSI LUN"),
    ({"name": "sda", "transport": "hyperv", "vendor": "Msft", "model": "Virtual Disk",
      "rotational": 1}, "ok", None),
    ({"name": "sda", "transport": "sata", "vendor": "ATA", "model": "ST8000DM004",
      "rotational": 1}, "problem", "spinning disk"),
])
def test_storage_wording_fits_the_device(facts_of, disk: dict[str, Any], dr030: str,
                                         dr035_word: str | None) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["storage"]["disks"][0].update(disk)
    r = one(facts, "DR030")
    assert r.status == dr030
    if dr030 == "ok":
        assert "data not on a spinning disk" in r.summary
    r = one(facts, "DR035")
    if dr035_word is None:
        assert r.not_applicable  # a virtual disk: what stores it is unknown
    else:
        assert r.status == "warning" and dr035_word in r.summary


def test_a_vms_emulated_port_is_not_the_slot(facts_of) -> None:
    facts = facts_of("pcie-gen3-x4")
    assert one(facts, "DR011").status == "problem"
    facts["platform"]["virtual_machine"] = True
    r = one(facts, "DR011")
    assert r.status == "ok" and "emulated port" in r.summary


def test_cloud_network_volume(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["storage"]["disks"][0].update(transport="network-block",
                                        model="Amazon Elastic Block Store")
    r = one(facts, "DR031")
    assert r.status == "warning" and "Amazon Elastic Block Store" in r.summary
    assert r.remedy is not None and "--io" in r.remedy.text


def test_disk_wording_names_the_medium_once(facts_of) -> None:
    r = one(facts_of("cloud-vm-ebs"), "DR030")
    assert r.status == "ok"
    assert "nvme1n1 (AWS EBS volume, model Amazon Elastic Block Store, 2048.0 GiB)" in r.summary
    r = one(facts_of("rtx4090-workstation"), "DR030")
    assert "nvme0n1 (nvme SSD Samsung SSD 990 PRO 2TB, 1863.0 GiB)" in r.summary


def test_cudnn_hint_under_torch_on_a_sysroot_without_the_recorded_import(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    facts["torch"]["runtime_missing"] = "no pitstop-recorded/torch_runtime.json in this sysroot"
    r = one(facts, "DR006")
    assert r.status == "ok" and "not tested on the GPU: no pitstop-recorded" in r.summary
    assert "run with --torch" not in r.summary
