"""Helpers for the doctor tests: the fake machines and facts documents built from them."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from pitstop.doctor.facts import collect
from pitstop.doctor.probes import ProbeContext
from pitstop.sysroot import Sysroot

MACHINES = Path(__file__).resolve().parent / "machines"

# The data path each machine keeps its dataset under.
DATA = {
    "rtx4090-workstation": "/data/imagenet",
    "nouveau": "/data/imagenet",
    "cpu-wheel": "/data/imagenet",
    "driver535-cu128": "/data/imagenet",
    "powersave": "/data/imagenet",
    "lvm-hdd": "/srv/datasets/imagenet",
    "docker-shm64": "/workspace/data",
    "pcie-gen3-x4": "/data/imagenet",
    "thermal-slowdown": "/data/imagenet",
    "kernel-upgrade-dkms": "/data/imagenet",
    "secure-boot-mok": "/data/imagenet",
    "k8s-pod-1of4": "/data/imagenet",
    "cloud-vm-ebs": "/data/imagenet",
    "slurm-node-2of8": "/raid/datasets/imagenet",
}
# Healthy controls: nothing may be reported (no warning, no problem).
HEALTHY = ("rtx4090-workstation", "k8s-pod-1of4", "slurm-node-2of8")


def machine_facts(name: str) -> dict[str, Any]:
    """Run the real probes against a fake machine (in this process) and return the facts."""
    ctx = ProbeContext(sysroot=Sysroot.of(MACHINES / name), data_path=DATA[name],
                       environ=os.environ)
    return collect(ctx)




def load_generator() -> Any:
    """The ``make_machines`` module (it is a script beside the trees, not a package)."""
    spec = importlib.util.spec_from_file_location("make_machines", MACHINES / "make_machines.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
