"""Platform layer: Python, glibc and kernel versions, and the versions of the stack."""

from __future__ import annotations

from pitstop.doctor.checks.base import CannotCheck, Facts, Outcome, check, ok, problem, warning
from pitstop.doctor.checks.gpuinfo import driver_version
from pitstop.doctor.data import parse_version
from pitstop.findings import Remedy


@check("DR080", "platform", 30)
def python_version(facts: Facts) -> Outcome:
    py = facts.get("python") or {}
    if "error" in py:
        raise CannotCheck(f"python probe failed: {py['error']}")
    v = py.get("version")
    if not v:
        raise CannotCheck("the Python version is unknown")
    t = facts.get("torch") or {}
    plat = facts.get("platform") or {}
    libs = t.get("cuda_libs") or {}
    rt = t.get("runtime") or {}

    def lib(part: str) -> str | None:
        return next((ver for k, ver in libs.items() if part in k), None)

    ev = {"python": v, "implementation": py.get("implementation"), "torch": t.get("version"),
          "torch_cuda": t.get("cuda"), "cuda_runtime_wheel": lib("cuda-runtime"),
          "cudnn": rt.get("cudnn_version") or lib("cudnn"),
          "nccl": rt.get("nccl_version") or lib("nccl"),
          "driver": driver_version(facts), "kernel": plat.get("kernel"),
          "os": plat.get("os_pretty_name")}
    if parse_version(v) < (3, 10):
        return warning(f"Python {v}: current torch releases need Python >= 3.10 (no newer "
                       "wheels, no fixes)",
                       Remedy.shell("sudo apt install python3 python3-venv   # Debian 12: 3.11, "
                                    "Ubuntu 24.04: 3.12\npython3 -m venv ~/venv && "
                                    "~/venv/bin/pip install torch"), **ev)
    return ok(f"Python {v}", **ev)


@check("DR081", "platform", 30)
def glibc_version(facts: Facts) -> Outcome:
    py = facts.get("python") or {}
    g = py.get("glibc")
    if not g:
        raise CannotCheck("glibc version unknown (musl, or not recorded)")
    ev = {"glibc": g, "kernel": (facts.get("platform") or {}).get("kernel")}
    if parse_version(g) < (2, 28):
        return problem(f"glibc {g}: torch wheels since 2.6 are manylinux_2_28 (need glibc >= "
                       "2.28); pip falls back to old releases or a source build",
                       Remedy.advice("Upgrade the OS (Debian 12 has glibc 2.36, Ubuntu 22.04 "
                                     "2.35) or run training in a container based on one."), **ev)
    return ok(f"glibc {g}", **ev)
