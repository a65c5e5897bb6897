"""Container layer: is this a container, and can it reach the GPUs?"""

from __future__ import annotations

from pitstop.doctor.checks.base import Facts, NotApplicable, Outcome, check, ok, problem, section
from pitstop.doctor.checks.gpuinfo import nvml_ok, pci_gpus
from pitstop.findings import Remedy


@check("DR060", "container", 10)
def container(facts: Facts) -> Outcome:
    c = section(facts, "container")
    ev = {"runtime": c.get("runtime"), "signals": c.get("signals")}
    if not c.get("in_container"):
        return ok("not in a container", **ev)
    return ok(f"in a {c.get('runtime') or 'container'} (detected by: "
              f"{'; '.join(c.get('signals') or [])}): /dev/shm, CPU quota and GPU access are "
              "the container's (DR050, DR043, DR061); NVML may not name processes of other "
              "PID namespaces", **ev)


@check("DR061", "container", 92)
def container_gpu_access(facts: Facts) -> Outcome:
    c = section(facts, "container")
    if not c.get("in_container"):
        raise NotApplicable("not in a container")
    gpus = pci_gpus(facts)
    if not gpus:
        raise NotApplicable("no NVIDIA GPU visible on the PCI bus")
    mods = facts.get("kernel_modules") or {}
    nodes = mods.get("dev_nodes") or []
    ev = {"gpus_on_pci": len(gpus), "dev_nvidia_nodes": nodes, "nvml": nvml_ok(facts)}
    if nodes and nvml_ok(facts):
        return ok(f"GPUs passed into the container ({', '.join(nodes[:4])}...)", **ev)
    if not mods.get("nvidia_loaded"):
        raise NotApplicable("the host's nvidia module is not loaded (see DR001)")
    return problem("the host has NVIDIA GPUs but this container cannot use them (no "
                   "/dev/nvidia* or no NVML)",
                   Remedy.shell("# host: sudo apt install nvidia-container-toolkit && "
                                "sudo nvidia-ctk runtime configure --runtime=docker && "
                                "sudo systemctl restart docker\n"
                                "docker run --gpus all ...   # Kubernetes: resources.limits "
                                "nvidia.com/gpu: 1 with the NVIDIA device plugin"), **ev)
