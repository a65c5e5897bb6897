"""Driver and CUDA layer: is the GPU driven by the NVIDIA driver, and can torch use it?"""

from __future__ import annotations

from typing import Any

from pitstop.doctor import remedies
from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    check,
    ok,
    problem,
    section,
    warning,
)
from pitstop.doctor.checks.gpuinfo import driver_version, nvml_ok, pci_gpus
from pitstop.doctor.data import (
    CUDA_MINOR_COMPAT_MIN_DRIVER,
    cuda_major_minor,
    driver_supports,
    parse_version,
    toolkit_driver,
)
from pitstop.findings import Remedy


def _require_pci_gpus(facts: Facts) -> list[dict[str, Any]]:
    gpus = pci_gpus(facts)
    if gpus is None:
        raise CannotCheck(f"PCI bus: {(facts.get('pci') or {}).get('error', 'not probed')}")
    if not gpus:
        raise NotApplicable("no NVIDIA GPU on the PCI bus")
    return gpus


@check("DR001", "driver", 100)
def gpu_without_driver(facts: Facts) -> Outcome:
    gpus = _require_pci_gpus(facts)
    mods = section(facts, "kernel_modules")
    nvml = facts.get("nvml") or {}
    bound = [g["pci_address"] for g in gpus if g.get("driver") == "nvidia"]
    ev: dict[str, Any] = {
        "nvidia_gpus_on_pci": len(gpus),
        "bound_to_nvidia": len(bound),
        "drivers": sorted({str(g.get("driver")) for g in gpus}),
        "nvidia_module_loaded": mods.get("nvidia_loaded"),
        "nvml": "available" if nvml.get("available") else nvml.get("reason"),
    }
    if mods.get("nvidia_loaded") and nvml.get("available"):
        return ok(f"NVIDIA driver {driver_version(facts)} loaded; NVML answers", **ev)
    reason = str(nvml.get("reason") or "")
    if mods.get("nvidia_loaded") and "mismatch" in reason.lower():
        # The packages were upgraded but the old kernel module still runs.
        return problem(f"NVML: {reason}: the driver was upgraded without a reboot",
                       Remedy.shell("sudo reboot   # loads the new kernel module\n# or, with no "
                                    "GPU process running: sudo rmmod nvidia_uvm nvidia_drm "
                                    "nvidia_modeset nvidia && sudo modprobe nvidia"), **ev)
    if mods.get("nvidia_loaded") and not nvml.get("available") and bound:
        # The module is loaded and bound, but NVML is not reachable from here (a
        # container without the driver's user-space libraries, for instance).
        return warning("nvidia module loaded but NVML unavailable: "
                       f"{nvml.get('reason')}",
                       Remedy.shell(
                           "# in a container: run it with the NVIDIA container toolkit\n"
                           "docker run --gpus all ...   # or --runtime=nvidia\n"
                           "# on the host: reinstall the user-space driver matching the module\n"
                           "sudo apt install --reinstall libnvidia-ml1 nvidia-smi"), **ev)
    return problem(f"{len(gpus)} NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver",
                   Remedy.shell(remedies.driver_install(facts),
                                "needs root and a reboot; the desktop session restarts"), **ev)


@check("DR002", "driver", 95)
def nouveau_loaded(facts: Facts) -> Outcome:
    gpus = _require_pci_gpus(facts)
    mods = section(facts, "kernel_modules")
    ev = {"nouveau_loaded": mods.get("nouveau_loaded"),
          "nouveau_blacklisted": mods.get("nouveau_blacklisted"),
          "gpus_driven_by_nouveau": sum(1 for g in gpus if g.get("driver") == "nouveau")}
    if not mods.get("nouveau_loaded"):
        return ok("nouveau is not loaded", **ev)
    return problem("the open-source nouveau driver is loaded: CUDA cannot use the GPU",
                   Remedy.shell(remedies.driver_install(facts),
                                "needs root and a reboot; the desktop session restarts"), **ev)


def _torch(facts: Facts) -> dict[str, Any]:
    t = section(facts, "torch")
    if not t.get("installed"):
        raise NotApplicable("torch is not installed in this Python")
    return t


def torch_install_command(facts: Facts) -> str:
    """The pip command that installs the torch build this machine wants: the CUDA build
    for its driver when an NVIDIA GPU is on the PCI bus, else the CPU build. Also what
    commands that need torch print when it is missing (:mod:`pitstop.deps`)."""
    if pci_gpus(facts):
        return remedies.torch_cuda_install(None, driver_version(facts))[0]
    return "pip install torch --index-url https://download.pytorch.org/whl/cpu"


@check("DR003", "driver", 60)
def torch_installed(facts: Facts) -> Outcome:
    t = section(facts, "torch")
    py = facts.get("python") or {}
    ev = {"python": py.get("executable"), "torch": t.get("version")}
    if t.get("installed"):
        return ok(f"torch {t.get('version')} installed at {t.get('location')}", **ev)
    cmd = torch_install_command(facts)
    return warning(f"torch is not installed for {py.get('executable') or 'this Python'} "
                   "(use --python PATH if training runs in another environment)",
                   Remedy.shell(cmd, "install into the environment that runs training"), **ev)


@check("DR004", "driver", 98)
def cpu_wheel_on_gpu_machine(facts: Facts) -> Outcome:
    t = _torch(facts)
    gpus = pci_gpus(facts)
    version = str(t.get("version"))
    ev = {"torch": version, "torch_cuda": t.get("cuda"), "torch_hip": t.get("hip"),
          "nvidia_gpus_on_pci": None if gpus is None else len(gpus)}
    if t.get("cuda"):
        return ok(f"torch {version} is a CUDA {t['cuda']} build", **ev)
    if gpus is None:
        raise CannotCheck("the PCI bus could not be read")
    if not gpus:
        raise NotApplicable(f"torch {version} is a CPU build and there is no NVIDIA GPU")
    cmd, why = remedies.torch_cuda_install(version, driver_version(facts))
    if t.get("hip"):
        return problem(f"torch {version} is a ROCm (AMD) build on a machine with {len(gpus)} "
                       "NVIDIA GPU(s): it cannot use them", Remedy.shell(cmd, why), **ev)
    return problem(f"torch {version} is a CPU-only build on a machine with {len(gpus)} NVIDIA "
                   "GPU(s): training runs on the CPU",
                   Remedy.shell(cmd, why), **ev)


@check("DR005", "driver", 97)
def driver_too_old(facts: Facts) -> Outcome:
    t = _torch(facts)
    cuda = t.get("cuda")
    if not cuda:
        raise NotApplicable("torch is not a CUDA build")
    driver = driver_version(facts)
    if not driver:
        if pci_gpus(facts) == []:
            raise NotApplicable("no NVIDIA GPU on the PCI bus")
        raise CannotCheck("the NVIDIA driver version is unknown (no NVML, no "
                          "/proc/driver/nvidia/version)")
    mm = cuda_major_minor(str(cuda))
    support = driver_supports(driver, mm)
    full = toolkit_driver(mm)
    floor = CUDA_MINOR_COMPAT_MIN_DRIVER.get(parse_version(mm)[0])
    ev = {"driver": driver, "torch_cuda": mm, "driver_for_full_support": full,
          "minimum_driver_minor_compat": floor,
          "driver_cuda": ((facts.get("nvml") or {}).get("system") or {}).get("cuda_driver_version")}
    if support == "full":
        return ok(f"driver {driver} fully supports the wheel's CUDA {mm}", **ev)
    if support == "unknown":
        raise CannotCheck(f"CUDA {mm} is not in pitstop's driver table")
    target = full or floor or ""
    lines = []
    if remedies.needs_cuda_repo(facts, target):
        lines.append(remedies.cuda_repo_driver(facts, target))
    else:
        lines.append(remedies.driver_install(facts))
    pip, why = remedies.torch_cuda_install(str(t.get("version")), driver)
    lines += ["# or keep the driver and install the torch build it runs:", pip]
    text = "\n".join(lines)
    if support == "minor-compat":
        return warning(f"driver {driver} is older than CUDA {mm} wants ({full}): it runs under "
                       "minor-version compatibility, without PTX JIT (torch.compile/Triton "
                       "kernels and some libraries can fail)",
                       Remedy.shell(text, why), **ev)
    return problem(f"driver {driver} is too old for the wheel's CUDA {mm} (needs >= {floor}): "
                   "CUDA initialisation fails", Remedy.shell(text, why), **ev)


@check("DR006", "driver", 70)
def cudnn(facts: Facts) -> Outcome:
    t = _torch(facts)
    if not t.get("cuda"):
        raise NotApplicable("torch is not a CUDA build (cuDNN is used only on CUDA)")
    libs = t.get("cuda_libs") or {}
    cudnn_dists = {k: v for k, v in libs.items() if k.startswith("nvidia-cudnn")}
    pins = {k: v for k, v in (t.get("pins") or {}).items() if k.startswith("nvidia-cudnn")}
    rt = t.get("runtime") or {}
    ev: dict[str, Any] = {"cudnn_wheels": cudnn_dists, "torch_pins": pins,
                          "bundled_in_torch_lib": t.get("bundled_cudnn") or []}
    if rt and "error" not in rt and "import_error" not in rt:
        ev.update(cudnn_version=rt.get("cudnn_version"), cudnn_available=rt.get("cudnn_available"),
                  conv_on_gpu=rt.get("cudnn_conv_ok"))
        if rt.get("cudnn_available") and rt.get("cudnn_conv_ok") is not False:
            return ok(f"cuDNN {rt.get('cudnn_version')} is usable (checked by importing torch)",
                      **ev)
        reason = rt.get("cudnn_error") or "torch.backends.cudnn.is_available() is False"
        return problem(f"cuDNN is not usable: {reason}",
                       Remedy.shell(_cudnn_fix(pins, t)), **ev)
    if cudnn_dists or ev["bundled_in_torch_lib"]:
        mismatch = {k: (v, cudnn_dists.get(k)) for k, v in pins.items() if cudnn_dists.get(k) != v}
        if mismatch:
            return warning("installed cuDNN differs from the version torch was built against: "
                           + ", ".join(f"{k} {have} (torch wants {want})"
                                       for k, (want, have) in mismatch.items()),
                           Remedy.shell(_cudnn_fix(pins, t)), **ev)
        found = ", ".join(f"{k} {v}" for k, v in cudnn_dists.items()) or "bundled in torch/lib"
        return ok(f"cuDNN present ({found}); run with --torch to test it on the GPU", **ev)
    if not pins:
        # A conda or source build links cuDNN from elsewhere: only an import can tell.
        raise CannotCheck("torch does not pin a cuDNN wheel (conda or source build?); "
                          "run with --torch to test cuDNN")
    return problem("torch needs cuDNN but no cuDNN is installed: convolutions will fail",
                   Remedy.shell(_cudnn_fix(pins, t)), **ev)


def _cudnn_fix(pins: dict[str, str], t: dict[str, Any]) -> str:
    if pins:
        return "pip install " + " ".join(f"{k}=={v}" for k, v in sorted(pins.items()))
    return f"pip install --force-reinstall torch=={str(t.get('version')).split('+')[0]}"


@check("DR007", "driver", 96)
def cuda_init(facts: Facts) -> Outcome:
    t = _torch(facts)
    if not t.get("cuda"):
        raise NotApplicable("torch is not a CUDA build")
    rt = t.get("runtime")
    if not rt:
        if not nvml_ok(facts) and pci_gpus(facts) == []:
            raise NotApplicable("no NVIDIA GPU on the PCI bus")
        raise CannotCheck("not imported: run `pitstop doctor --torch` to initialise CUDA in a "
                          "subprocess")
    if "error" in rt or "import_error" in rt:
        return problem(f"import torch failed: {rt.get('error') or rt.get('import_error')}",
                       Remedy.shell(f"{(facts.get('python') or {}).get('executable', 'python')} "
                                    "-c 'import torch'   # read the full error"),
                       **{"error": rt.get("error") or rt.get("import_error")})
    ev = {"cuda_available": rt.get("cuda_available"), "device_count": rt.get("device_count"),
          "import_torch_s": rt.get("import_s"), "nccl": rt.get("nccl_version")}
    if rt.get("cuda_available"):
        return ok(f"torch.cuda.is_available() is True, {rt.get('device_count')} device(s)", **ev)
    if pci_gpus(facts) == [] and not nvml_ok(facts):
        raise NotApplicable("no NVIDIA GPU: CUDA cannot initialise, as expected")
    ev["cuda_error"] = rt.get("cuda_error")
    return problem(f"torch cannot initialise CUDA: {rt.get('cuda_error') or 'is_available() is False'}",
                   Remedy.shell(remedies.driver_install(facts)), **ev)


@check("DR008", "driver", 40)
def cuda_libs_match_pins(facts: Facts) -> Outcome:
    t = _torch(facts)
    pins = t.get("pins") or {}
    libs = t.get("cuda_libs") or {}
    if not pins:
        raise NotApplicable("torch pins no nvidia-* CUDA library wheels (CPU, conda or source "
                            "build)")
    checked = {k: v for k, v in pins.items() if k in libs}
    wrong = {k: {"torch_wants": v, "installed": libs[k]} for k, v in checked.items()
             if libs[k] != v}
    missing = sorted(k for k in pins if k not in libs)
    ev = {"pinned": len(pins), "matching": len(checked) - len(wrong), "mismatched": wrong,
          "missing": missing}
    if not wrong and not missing:
        return ok(f"all {len(pins)} nvidia-* CUDA library wheels match torch's pins", **ev)
    fix = "pip install " + " ".join(f"{k}=={pins[k]}" for k in sorted([*wrong, *missing]))
    return warning(f"{len(wrong)} CUDA library wheel(s) differ from torch's pins, "
                   f"{len(missing)} missing (another package replaced them)",
                   Remedy.shell(fix, "pins exactly what the torch wheel was tested with"), **ev)
