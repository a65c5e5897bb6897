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


def _eight_gpu_host(facts: dict[str, Any], seen: int) -> dict[str, Any]:
    """The DGX of slurm-node-2of8 outside any job, with NVML listing ``seen`` of its 8."""
    for var in ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
                "CUDA_VISIBLE_DEVICES"):
        env(facts).pop(var, None)
    template = facts["nvml"]["gpus"][0]
    buses = [g["pci_address"] for g in facts["pci"]["nvidia_gpus"]]
    facts["nvml"]["gpus"] = [dict(template, index=i, uuid=f"GPU-{i}", pci_bus_id=f"0000{bus}")
                             for i, bus in enumerate(buses[:seen])]
    return facts


def test_cuda_visible_devices_does_not_hide_a_lost_gpu_from_the_driver(facts_of) -> None:
    # CUDA_VISIBLE_DEVICES picks GPUs for CUDA; NVML still lists all of them. A GPU that
    # fell off the bus on a host where it is set is still a lost GPU.
    facts = _eight_gpu_host(facts_of("slurm-node-2of8"), seen=7)
    env(facts)["CUDA_VISIBLE_DEVICES"] = "0,1"
    r = one(facts, "DR022")
    assert r.status == "problem", r.summary
    assert r.summary.startswith("1 of the 8 GPUs on the PCI bus are not usable")
    assert "CUDA_VISIBLE_DEVICES=0,1" in r.summary
    assert r.evidence["missing_from_nvml"] == [facts["pci"]["nvidia_gpus"][7]["pci_address"]]
    # All eight seen: fine, whatever CUDA_VISIBLE_DEVICES picks.
    assert one(_eight_gpu_host(facts_of("slurm-node-2of8"), seen=8), "DR022").status == "ok"
    # A scheduler that sets only CUDA_VISIBLE_DEVICES and filters the device nodes with
    # cgroup v2 (unreadable): NVML sees exactly the two, which that variable explains.
    facts = _eight_gpu_host(facts_of("slurm-node-2of8"), seen=2)
    env(facts)["CUDA_VISIBLE_DEVICES"] = "0,1"
    r = one(facts, "DR022")
    assert r.status == "ok" and r.evidence["decided_by"].startswith("CUDA_VISIBLE_DEVICES")


def test_a_slurm_job_without_constrain_devices_still_sees_a_lost_gpu(facts_of) -> None:
    # Without ConstrainDevices NVML sees all eight; seven means one fell off the bus,
    # although seven is more than the job's two.
    facts = _eight_gpu_host(facts_of("slurm-node-2of8"), seen=7)
    env(facts).update(SLURM_JOB_ID="4242", SLURM_JOB_GPUS="2,3", CUDA_VISIBLE_DEVICES="2,3")
    r = one(facts, "DR022")
    assert r.status == "problem" and "1 of the 8 GPUs on the PCI bus" in r.summary


def test_mig_instances_are_not_gpus(facts_of) -> None:
    # A pod given two MIG slices of one A100 (the device plugin's mixed strategy): one GPU
    # node, NVML lists the one parent GPU. Two entries are not two GPUs.
    facts = facts_of("k8s-pod-1of4")
    env(facts)["NVIDIA_VISIBLE_DEVICES"] = ("MIG-3f1a2b4c-5d6e-7f80-9a1b-2c3d4e5f6a7b,"
                                           "MIG-8b7c6d5e-4f3a-2b1c-0d9e-8f7a6b5c4d3e")
    env(facts)["CUDA_VISIBLE_DEVICES"] = env(facts)["NVIDIA_VISIBLE_DEVICES"]
    r = one(facts, "DR022")
    assert r.status == "ok", r.summary
    assert r.evidence["decided_by"] == "the container has /dev/nvidia1"
    # On a host, a MIG instance in CUDA_VISIBLE_DEVICES leaves NVML all the GPUs.
    facts = _eight_gpu_host(facts_of("slurm-node-2of8"), seen=8)
    env(facts)["CUDA_VISIBLE_DEVICES"] = "MIG-3f1a2b4c-5d6e-7f80-9a1b-2c3d4e5f6a7b"
    assert one(facts, "DR022").status == "ok"
    assert len(in_use(facts, facts["nvml"]["gpus"])) == 8


def test_gpus_passed_through_to_a_vm_are_not_missing(facts_of) -> None:
    # A workstation that hands its second GPU to a VM (vfio-pci): NVML cannot see it, and
    # must not.
    facts = facts_of("rtx4090-workstation")
    second = copy.deepcopy(facts["pci"]["nvidia_gpus"][0])
    second.update(pci_address="0000:02:00.0", driver="vfio-pci")
    facts["pci"]["nvidia_gpus"].append(second)
    r = one(facts, "DR022")
    assert r.status == "ok" and "1 more bound to vfio-pci" in r.summary
    assert r.evidence["passed_through"] == ["0000:02:00.0"]
    facts["pci"]["nvidia_gpus"][0]["driver"] = "vfio-pci"
    assert one(facts, "DR022").not_applicable


def test_cuda_indices_on_unlike_gpus_are_not_nvml_indices(facts_of) -> None:
    # CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: on a box with
    # an RTX 4090 and a smaller card, CUDA_VISIBLE_DEVICES=0 need not be NVML's GPU 0, so
    # the per-GPU checks judge both.
    facts = facts_of("rtx4090-workstation")
    small = dict(gpu0_of(facts), index=1, name="NVIDIA GeForce RTX 3060", uuid="GPU-b")
    facts["nvml"]["gpus"].append(small)
    env(facts)["CUDA_VISIBLE_DEVICES"] = "0"
    assert len(in_use(facts, facts["nvml"]["gpus"])) == 2
    env(facts)["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    assert [g["index"] for g in in_use(facts, facts["nvml"]["gpus"])] == [0]
    env(facts)["CUDA_VISIBLE_DEVICES"] = "GPU-b"  # a UUID is unambiguous in either order
    del env(facts)["CUDA_DEVICE_ORDER"]
    assert [g["index"] for g in in_use(facts, facts["nvml"]["gpus"])] == [1]


def gpu0_of(facts: dict[str, Any]) -> dict[str, Any]:
    g: dict[str, Any] = facts["nvml"]["gpus"][0]
    return g


def test_cdi_pod_with_nvidia_visible_devices_void(facts_of) -> None:
    # With CDI the device plugin injects the nodes itself and sets NVIDIA_VISIBLE_DEVICES
    # to "void" so that the legacy hook does nothing: the variable's "no GPU" is not what
    # the pod got, its device node is.
    facts = facts_of("k8s-pod-1of4")
    env(facts)["NVIDIA_VISIBLE_DEVICES"] = "void"
    r = one(facts, "DR022")
    assert r.status == "ok" and r.evidence["decided_by"] == "the container has /dev/nvidia1"
    assert "the 1 given to this container" in r.summary
