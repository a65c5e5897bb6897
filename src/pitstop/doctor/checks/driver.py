"""Driver and CUDA layer: is the GPU driven by the NVIDIA driver, and can torch use it?"""

from __future__ import annotations

import re
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
from pitstop.doctor.checks.kernel_module import module_cause
from pitstop.doctor.data import (
    CUDA_MINOR_COMPAT_MIN_DRIVER,
    cuda_major_minor,
    driver_supports,
    parse_version,
    toolkit_driver,
)
from pitstop.doctor.requirements import (
    Requirement,
    evaluate_marker,
    parse_requirement,
    satisfies,
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
    cause = module_cause(facts)
    if cause is not None:
        # The driver is installed; its module is what is wrong (DR009 has the details).
        ev["cause"] = cause.kind
        return problem(f"{len(gpus)} NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver: "
                       f"{cause.clause} (DR009)",
                       Remedy.shell(cause.fix, "needs root; the module loads without a reboot "
                                    "unless noted"), **ev)
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
    cause = module_cause(facts)
    if cause is not None and cause.kind == "nouveau-holds-gpu":
        return problem("the open-source nouveau driver is loaded: CUDA cannot use the GPU "
                       "(the NVIDIA module is installed; DR009)",
                       Remedy.shell(cause.fix, "needs root and a reboot"), **ev)
    if cause is not None:
        # The driver is installed but its module cannot load (DR009): that fix first,
        # then nouveau out of the way if nothing blacklists it yet.
        fix = cause.fix
        if not mods.get("nouveau_blacklisted"):
            fix += "\n" + remedies.BLACKLIST_NOUVEAU
        return problem("the open-source nouveau driver is loaded: CUDA cannot use the GPU "
                       f"({cause.clause}: DR009)", Remedy.shell(fix, "needs root"), **ev)
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
    if not mm:
        raise CannotCheck(f"torch's CUDA version {cuda!r} is not a version number")
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
        untested = (f"not tested on the GPU: {t['runtime_missing']}" if t.get("runtime_missing")
                    else "run with --torch to test it on the GPU")
        return ok(f"cuDNN present ({found}); {untested}", **ev)
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
        if t.get("runtime_missing"):
            raise CannotCheck(str(t["runtime_missing"]))
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
    error = rt.get("cuda_error") or "is_available() is False"
    cause = module_cause(facts)
    if cause is not None:
        ev["cause"] = cause.kind
        return problem(f"torch cannot initialise CUDA: {error} ({cause.clause}: DR009)",
                       Remedy.shell(cause.fix, "needs root; the module loads without a reboot "
                                    "unless noted"), **ev)
    return problem(f"torch cannot initialise CUDA: {error}",
                   Remedy.shell(remedies.driver_install(facts)), **ev)


def cuda_requirements(t: dict[str, Any]) -> list[tuple[Requirement, bool | None]]:
    """torch's ``nvidia-*`` requirements and whether each applies here (``None``: its
    marker names something the facts do not know, e.g. the architecture)."""
    env = t.get("marker_environment") or {}
    lines = t.get("requires_dist")
    if lines is None:  # a facts document from before requires_dist: its exact pins
        return [(Requirement(k, f"=={v}", "", f"{k}=={v}"), True)
                for k, v in sorted((t.get("pins") or {}).items())]
    out = []
    for line in lines:
        req = parse_requirement(str(line))
        if req is not None and req.name.startswith("nvidia-"):
            out.append((req, evaluate_marker(req.marker, env)))
    return out


def _pip_arg(req: Requirement) -> str:
    arg = f"{req.name}{req.specifier}"
    return arg if re.fullmatch(r"[A-Za-z0-9._=-]+", arg) else f"'{arg}'"


@check("DR008", "driver", 40)
def cuda_libs_match_pins(facts: Facts) -> Outcome:
    t = _torch(facts)
    reqs = cuda_requirements(t)
    libs = t.get("cuda_libs") or {}
    if not reqs:
        raise NotApplicable("torch requires no nvidia-* CUDA library wheels (CPU, conda or "
                            "source build)")
    # A marker the facts cannot evaluate (the architecture unknown) held when pip
    # installed it if a requirement with the same marker is installed: then its
    # siblings apply too, and an absent one is missing.
    held = {r.marker for r, a in reqs if a is None and r.name in libs}
    reqs = [(r, True if a is None and r.marker in held else a) for r, a in reqs]
    applying = [(r, a) for r, a in reqs if a is not False]
    if not applying:
        raise NotApplicable(f"none of torch's {len(reqs)} nvidia-* requirements applies to "
                            "this platform (their markers exclude it)")
    wrong: dict[str, dict[str, Any]] = {}
    missing: list[Requirement] = []
    undecided: list[str] = []
    matching = 0
    for req, applies in applying:
        have = libs.get(req.name)
        fits = satisfies(have, req.specifier) if have is not None else None
        if have is None:
            (undecided.append(req.name) if applies is None else missing.append(req))
        elif fits is False:
            wrong[req.name] = {"torch_wants": req.specifier, "installed": have}
        elif fits is None:
            undecided.append(req.name)
        else:
            matching += 1
    env = t.get("marker_environment") or {}
    ev: dict[str, Any] = {"torch": t.get("version"), "required": len(applying),
                          "matching": matching, "mismatched": wrong,
                          "missing": [r.name for r in missing],
                          "not_for_this_platform": len(reqs) - len(applying),
                          "platform_machine": env.get("platform_machine")}
    if undecided:
        ev["undecided"] = sorted(undecided)
    if not wrong and not missing:
        extra = (f"; {len(undecided)} not decided ({', '.join(sorted(undecided))}: their "
                 "markers need values the facts lack)") if undecided else ""
        return ok(f"all {matching} nvidia-* CUDA library wheels torch {t.get('version')} "
                  f"requires are installed at the versions it pins{extra}", **ev)
    bad = [r for r, _ in applying if r.name in wrong] + missing
    fix = "pip install " + " ".join(_pip_arg(r) for r in sorted(bad, key=lambda r: r.name))
    parts = []
    if wrong:
        parts.append(f"{len(wrong)} differ from torch's pins (" + ", ".join(
            f"{k} {v['installed']}, torch wants {v['torch_wants']}" for k, v in wrong.items())
                     + ")")
    if missing:
        parts.append(f"{len(missing)} missing ({', '.join(r.name for r in missing)})")
    return warning(f"of the {len(applying)} nvidia-* CUDA library wheels torch "
                   f"{t.get('version')} requires, " + " and ".join(parts)
                   + ": pip installs them with torch, so another package's pin, an old "
                   "requirements file or --no-deps replaced or skipped them",
                   Remedy.shell(fix, "installs exactly what the torch wheel was built and "
                                "tested with"), **ev)
