"""Which GPUs a process was given (DR022) and which of them CUDA uses (per-GPU checks),
on the facts of the container, Slurm and workstation machines."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_checks import one, result

from pitstop.doctor.checks.gpu_access import cuda_visible_items, gpus_given, in_use
from pitstop.hostinfo.cgroup import device_rules
from pitstop.sysroot import Sysroot


def env(facts: dict[str, Any]) -> dict[str, str]:
    variables: dict[str, str] = facts["environment"]["variables"]
    return variables


def test_pod_with_one_of_four_gpus_is_fine_and_says_why(facts_of) -> None:
    facts = facts_of("k8s-pod-1of4")
    r = one(facts, "DR022")
    assert r.status == "ok"
    assert r.evidence["gpus_on_pci"] == 4 and r.evidence["gpus_given"] == 1
    assert r.evidence["decided_by"].startswith("NVIDIA_VISIBLE_DEVICES=GPU-5a8d4c1e")
    assert "the container has /dev/nvidia1" in r.evidence["restrictions"]


def test_pod_given_two_gpus_that_sees_one_is_a_problem(facts_of) -> None:
    facts = facts_of("k8s-pod-1of4")
    env(facts)["NVIDIA_VISIBLE_DEVICES"] = "GPU-5a8d4c1e,GPU-9c0e1d2f"
    facts["gpu_access"]["dev_gpu_nodes"] = ["nvidia1", "nvidia2"]
    r = one(facts, "DR022")
    assert r.status == "problem"
    assert "1 of the 2 GPUs given to this container" in r.summary
    assert "NVIDIA_VISIBLE_DEVICES" in r.summary


def test_nvidia_visible_devices_all_falls_through_to_the_device_nodes(facts_of) -> None:
    # GKE's own device plugin: the CUDA image says "all", the pod has one node.
    facts = facts_of("k8s-pod-1of4")
    env(facts)["NVIDIA_VISIBLE_DEVICES"] = "all"
    r = one(facts, "DR022")
    assert r.status == "ok" and r.evidence["decided_by"] == "the container has /dev/nvidia1"


def test_device_plugin_volume_mounts_strategy(facts_of) -> None:
    facts = facts_of("k8s-pod-1of4")
    env(facts)["NVIDIA_VISIBLE_DEVICES"] = "/var/run/nvidia-container-devices"
    facts["gpu_access"]["container_devices"] = ["GPU-5a8d4c1e-7b36-2f90-8e41-0c9d3b6f2a17"]
    facts["gpu_access"]["dev_gpu_nodes"] = ["nvidia0", "nvidia1", "nvidia2", "nvidia3"]
    r = one(facts, "DR022")
    assert r.status == "ok" and "lists 1 device(s) there" in r.evidence["decided_by"]


def test_a_gpu_that_fell_off_the_bus_on_a_host(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    second = copy.deepcopy(facts["pci"]["nvidia_gpus"][0])
    second["pci_address"] = "0000:02:00.0"
    facts["pci"]["nvidia_gpus"].append(second)
    r = one(facts, "DR022")
    assert r.status == "problem" and "1 of the 2 GPUs on the PCI bus" in r.summary
    # on a host the /dev/nvidiaN nodes say nothing: the node of a lost GPU remains
    facts["gpu_access"]["dev_gpu_nodes"] = ["nvidia0"]
    assert one(facts, "DR022").status == "problem"


def test_an_nvml_error_is_a_problem_even_in_a_container(facts_of) -> None:
    facts = facts_of("k8s-pod-1of4")
    facts["nvml"]["gpus"][0] = {"index": 0, "error": "NVMLError_GpuIsLost: GPU is lost"}
    r = one(facts, "DR022")
    assert r.status == "problem" and "GPU is lost" in r.summary


def test_slurm_job_with_two_of_eight(facts_of) -> None:
    facts = facts_of("slurm-node-2of8")
    r = one(facts, "DR022")
    assert r.status == "ok" and r.evidence["gpus_given"] == 2
    assert r.evidence["decided_by"].startswith("Slurm gave this job 2 GPU(s)")
    # One of the job's two GPUs failed: NVML lists one.
    facts["nvml"]["gpus"].pop()
    assert one(facts, "DR022").status == "problem"


def test_cgroup_v1_device_rules(tmp_path) -> None:
    root = tmp_path / "m"
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("11:devices:/docker/abc\n10:cpu,cpuacct:/docker/abc\n")
    d = root / "sys/fs/cgroup/devices/docker/abc"
    d.mkdir(parents=True)
    # Docker's defaults include "c *:* m" (mknod anything), which opens nothing.
    (d / "devices.list").write_text("c *:* m\nb *:* m\nc 1:5 rwm\nc 195:2 rw\nc 195:255 rw\n"
                                    "c 195:254 rw\nc 508:* rw\n")
    rules = device_rules(Sysroot.of(root))
    assert rules["version"] == 1 and "c 195:2 rw" in rules["rules"]
    facts = {"gpu_access": {"cgroup_devices": rules}, "container": {"in_container": True}}
    given = gpus_given(facts)
    assert given.count == 1 and "allow /dev/nvidia2" in given.rule
    rules["rules"] = ["a *:* rwm"]  # a privileged container: no restriction
    assert gpus_given(facts).count is None


@pytest.mark.parametrize(("value", "items"), [
    ("0,1", ["0", "1"]), ("1,-1,2", ["1"]), ("", []), ("-1", []),
    ("GPU-5a8d,GPU-9c0e", ["GPU-5a8d", "GPU-9c0e"]), ("NoDevFiles", []),
])
def test_cuda_visible_devices_stops_at_the_first_invalid_entry(value: str,
                                                               items: list[str]) -> None:
    assert cuda_visible_items(value) == items


def test_per_gpu_checks_judge_only_the_gpus_cuda_uses(facts_of) -> None:
    facts = facts_of("slurm-node-2of8")
    # A shared node without device constraints: NVML sees all eight, another job uses
    # GPU 5 and it runs hot; this job's CUDA_VISIBLE_DEVICES=2,3 picks two others.
    gpus = facts["nvml"]["gpus"]
    template = gpus[0]
    facts["nvml"]["gpus"] = [dict(template, index=i, uuid=f"GPU-{i}") for i in range(8)]
    facts["nvml"]["gpus"][5].update(temperature_c=95, processes=[
        {"pid": 7, "type": "compute", "name": "python other.py", "used_memory_bytes": 1 << 34}])
    env(facts)["CUDA_VISIBLE_DEVICES"] = "2,3"
    assert [r.status for r in result(facts, "DR016")] == ["ok", "ok"]
    assert [r.status for r in result(facts, "DR019")] == ["ok", "ok"]
    assert [g["index"] for g in in_use(facts, facts["nvml"]["gpus"])] == [2, 3]
    env(facts)["CUDA_VISIBLE_DEVICES"] = "GPU-5"
    assert [r.status for r in result(facts, "DR019")] == ["warning"]
    del env(facts)["CUDA_VISIBLE_DEVICES"]
    assert len(result(facts, "DR016")) == 8


def test_numa_judges_only_the_gpus_in_use(facts_of) -> None:
    facts = facts_of("slurm-node-2of8")
    statuses = {r.subject: r.status for r in result(facts, "DR021")}
    assert statuses == {"GPU at 0000:47:00.0": "ok", "GPU at 0000:4e:00.0": "ok"}
    # If NVML gave this job a GPU on the other socket, that is a finding.
    facts["nvml"]["gpus"][0]["pci_bus_id"] = "00000000:87:00.0"
    statuses = {r.subject: r.status for r in result(facts, "DR021")}
    assert statuses == {"GPU at 0000:4e:00.0": "ok", "GPU at 0000:87:00.0": "warning"}


def test_the_desktop_on_the_gpu_is_not_a_competitor(facts_of) -> None:
    facts = facts_of("rtx4090-workstation")
    r = one(facts, "DR019")
    assert r.status == "ok" and len(r.evidence["display_processes"]) == 2
    procs = facts["nvml"]["gpus"][0]["processes"]
    procs.append({"pid": 4242, "type": "graphics", "name": "blender",
                  "used_memory_bytes": 9 << 30})
    r = one(facts, "DR019")
    assert r.status == "warning" and "blender" in r.summary and "Xorg" not in r.summary
