"""Documentation of the container codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import INFO, P, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR060", "running-in-container", "Running inside a container", "container", INFO,
        "Detects Docker (`/.dockerenv`), Podman (`/run/.containerenv`), Kubernetes "
        "(`KUBERNETES_SERVICE_HOST`) and container cgroup paths; always reported as ok, with "
        "what it implies.",
        "In a container `/dev/shm` is the container's own (64 MB by default, see DR050), CPU "
        "quotas apply (DR043), and NVML cannot name processes of other PID namespaces (DR019).",
        "```\nin a docker: /dev/shm is the container's own (64 MB by default)\n```",
        "Nothing to fix by itself; see the related checks.",
        "not applicable: informational."),
    doc("DR061", "container-without-gpu-access", "Container cannot reach the host's GPUs", "container", P,
        "Inside a container: NVIDIA GPUs visible on the PCI bus and the host's `nvidia` module "
        "loaded, but no `/dev/nvidia*` device nodes or no NVML.",
        "The container was started without the NVIDIA runtime: torch sees no GPU and trains "
        "on the CPU.",
        "```\n$ docker run image nvidia-smi\nnvidia-smi: command not found\n```",
        "```sh\nsudo apt install nvidia-container-toolkit\nsudo nvidia-ctk runtime configure --runtime=docker\n"
        "sudo systemctl restart docker\ndocker run --gpus all ...\n```\nKubernetes: the NVIDIA "
        "device plugin and `resources.limits: nvidia.com/gpu: 1`.",
        "manual: needs root on the host (container toolkit) and a container restart."),
]
