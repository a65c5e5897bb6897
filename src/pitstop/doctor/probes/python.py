"""The Python that runs training, and torch as installed in it — read without importing torch.

``import torch`` costs 1-2 s, more than the whole doctor may take, so by default the
torch facts come from files: the ``torch-*.dist-info`` metadata (version and the exact
``nvidia-*`` CUDA library pins), ``torch/version.py`` (CUDA / HIP the wheel was built
for) and the installed ``nvidia-cudnn-*`` / ``nvidia-nccl-*`` distributions.
``--torch`` adds a real import in a subprocess (CUDA init, cuDNN usable, threads); a
fake tree (``--sysroot``) may record that import's result in
``pitstop-recorded/torch_runtime.json``, which is then read instead.

Facts of the ``torch`` section that DR006/DR008 read:

* ``requires_dist``: torch's own ``Requires-Dist`` lines, as written;
* ``marker_environment``: the PEP 508 marker values of the inspected interpreter
  (``platform_machine`` and where it came from in ``machine_source``);
* ``pins``: ``{name: version}`` of the exact ``nvidia-*==X`` pins whose markers hold here;
* ``cuda_libs``: ``{name: version}`` of every installed ``nvidia-*`` distribution.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from pitstop.doctor.probes import ProbeContext
from pitstop.doctor.requirements import evaluate_marker, normalize, parse_requirement
from pitstop.hostinfo.kernel_text import kernel_release
from pitstop.signals import run_child

# Every installed distribution with this prefix is read: torch pins 11-15 of them
# (cuBLAS, cuDNN, NCCL, cuFFT, cuSPARSELt, cuFile, ...), and the set changes per release.
CUDA_LIB_PREFIX = "nvidia-"
# What `uname -m` says for the architectures torch ships wheels for, by wheel tag suffix.
WHEEL_ARCHES = ("x86_64", "aarch64", "ppc64le", "s390x")


# Printed by the interpreter under inspection (this one, or --python PATH).
_DESCRIBE = r"""
import json, os, sys
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
except (ValueError, OSError):
    libc = ""
print(json.dumps({
    "version": ".".join(str(v) for v in sys.version_info[:3]),
    "implementation": sys.implementation.name,
    "executable": sys.executable,
    "glibc": libc.split()[1] if libc.startswith("glibc ") else None,
    "sys_path": [p for p in sys.path if p],
    "cwd": os.getcwd(),
    "os_cpu_count": os.cpu_count(),
    "machine": os.uname().machine,
}))
"""


def describe_python(python: str | None) -> dict[str, Any]:
    """Version, glibc and ``sys.path`` of ``python`` (``None``: this interpreter)."""
    if python is None:
        # The very code --python runs in the other interpreter, run here: one definition.
        scope: dict[str, Any] = {}
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(_DESCRIBE, scope)
        return dict(json.loads(buf.getvalue()))
    try:
        proc = run_child([python, "-c", _DESCRIBE], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"cannot run --python {python}: {err}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"--python {python} exited {proc.returncode}: {tail}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def probe_python(ctx: ProbeContext) -> dict[str, Any]:
    if not ctx.live:
        rec = ctx.recorded("python")
        if rec is None:
            raise RuntimeError("no pitstop-recorded/python.json in this sysroot")
        return dict(rec)
    return _described(ctx)


def _described(ctx: ProbeContext) -> dict[str, Any]:
    if "python" not in ctx.cache:
        ctx.cache["python"] = describe_python(ctx.python)
    return dict(ctx.cache["python"])


def _site_dirs(ctx: ProbeContext) -> list[Path]:
    if ctx.live:
        paths = sys.path if ctx.python is None else _described(ctx)["sys_path"]
        return [Path(p) for p in paths if p and os.path.isdir(p)]
    rec = ctx.recorded("python") or {}
    return [ctx.sysroot.path(p) for p in rec.get("sys_path", []) if p.startswith("/")]


def find_dists(dirs: list[Path], wanted: set[str], prefix: str | None = None) -> dict[str, Path]:
    """``{normalised name: dist-info dir}`` for the wanted distributions (and those whose
    name starts with ``prefix``), first hit wins (the order the import system uses)."""
    found: dict[str, Path] = {}
    for d in dirs:
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            name = normalize(entry[: -len(".dist-info")].rsplit("-", 1)[0])
            if (name in wanted or (prefix and name.startswith(prefix))) and name not in found:
                found[name] = d / entry
    return found


def _dir_version(dist_info: Path) -> str | None:
    """The version in a ``name-1.2.3.dist-info`` directory name."""
    stem = dist_info.name[: -len(".dist-info")]
    return stem.rsplit("-", 1)[1] if "-" in stem else None


def read_metadata(dist_info: Path) -> tuple[str | None, list[str]]:
    """``(Version, [Requires-Dist, ...])`` from a METADATA file (headers only)."""
    version = None
    requires: list[str] = []
    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the body (long description) starts after the first blank line
                if line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                elif line.startswith("Requires-Dist:"):
                    requires.append(line.split(":", 1)[1].strip())
    except OSError:
        return None, []
    return version, requires


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """The assignments of ``torch/version.py`` (``__version__``, ``cuda``, ``hip``, ...)."""
    out: dict[str, str | None] = {}
    for key in ("__version__", "cuda", "hip", "git_version", "xpu"):
        m = re.search(rf"^{re.escape(key)}\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
        if not m:
            continue
        raw = m.group(1).strip()
        if raw == "None":
            out[key] = None
        else:
            q = re.match(r"""['"]([^'"]*)['"]""", raw)
            out[key] = q.group(1) if q else None
    return out


def _pins(requires: list[str], env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The exact ``nvidia-*==X`` pins whose markers hold (or may hold) in ``env``:
    ``nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"`` -> ``{name: version}``."""
    pins: dict[str, str] = {}
    for line in requires:
        req = parse_requirement(line)
        if req is None or not req.name.startswith(CUDA_LIB_PREFIX) or req.exact is None:
            continue
        if env is not None and evaluate_marker(req.marker, env) is False:
            continue
        pins[req.name] = req.exact
    return pins


def _wheel_arch(dist_info: Path) -> str | None:
    """The architecture of the wheel a distribution was installed from (its ``WHEEL``
    file's ``Tag: cp311-cp311-manylinux_2_28_x86_64``)."""
    try:
        text = (dist_info / "WHEEL").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for m in re.finditer(r"^Tag:\s*\S+-\S+-(\S+)$", text, re.MULTILINE):
        for arch in WHEEL_ARCHES:
            if m.group(1).endswith(arch):
                return arch
    return None


def _recorded_arch(ctx: ProbeContext) -> tuple[str | None, str]:
    """The architecture a recorded machine shows: ``/proc/sys/kernel/arch``, its
    ``/proc/cpuinfo`` (x86 lists ``flags`` with ``lm``, arm64 ``CPU architecture: 8``),
    or the kernel release (Debian ``-amd64``/``-arm64``, Red Hat ``.x86_64``)."""
    sr = ctx.sysroot
    arch = sr.read_text("/proc/sys/kernel/arch")
    if arch:
        return arch, "/proc/sys/kernel/arch"
    text = sr.read_text("/proc/cpuinfo") or ""
    if re.search(r"^flags\s*:.*\blm\b", text, re.MULTILINE):
        return "x86_64", "/proc/cpuinfo"
    if re.search(r"^CPU architecture\s*:\s*8", text, re.MULTILINE):
        return "aarch64", "/proc/cpuinfo"
    release = kernel_release(sr) or ""
    for word, arch in (("amd64", "x86_64"), ("x86_64", "x86_64"), ("arm64", "aarch64"),
                       ("aarch64", "aarch64")):
        if re.search(rf"[-.]{word}$", release):
            return arch, "the kernel release"
    return None, ""


def marker_environment(ctx: ProbeContext, py: dict[str, Any], torch_dist: Path | None,
                       other_dists: list[Path] | None = None) -> dict[str, str | None]:
    """PEP 508 marker values of the inspected interpreter (``None``: unknown). The
    architecture comes from the interpreter, else the WHEEL tag of torch or of an
    installed nvidia-* wheel, else (a recorded machine) its procfs."""
    machine, source = py.get("machine") or py.get("platform_machine"), "the interpreter"
    for dist in ([torch_dist] if torch_dist else []) + (other_dists or []):
        if machine:
            break
        machine, source = _wheel_arch(dist), f"the WHEEL tag of {dist.name}"
    if not machine and not ctx.live:
        machine, source = _recorded_arch(ctx)
    version = str(py.get("version") or "")
    impl = py.get("implementation")
    return {
        "python_version": ".".join(version.split(".")[:2]) or None,
        "python_full_version": version or None,
        "implementation_name": impl,
        "platform_python_implementation": {"cpython": "CPython", "pypy": "PyPy"}.get(str(impl)),
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": machine or None,
        "machine_source": source if machine else None,
        "platform_release": kernel_release(ctx.sysroot),
        "extra": "",  # the base install: optional extras are not requirements
    }


def _python_facts(ctx: ProbeContext) -> dict[str, Any]:
    if ctx.live:
        try:
            return _described(ctx)
        except (RuntimeError, ValueError):
            return {}
    try:
        return dict(ctx.recorded("python") or {})
    except ValueError:
        return {}


def probe_torch(ctx: ProbeContext) -> dict[str, Any]:
    dirs = _site_dirs(ctx)
    dists = find_dists(dirs, {"torch"}, prefix=CUDA_LIB_PREFIX)
    out: dict[str, Any] = {"installed": False}
    torch_dir: Path | None = None
    for d in dirs:
        if (d / "torch" / "version.py").is_file():
            torch_dir = d / "torch"
            break
    if "torch" in dists:
        version, requires = read_metadata(dists["torch"])
        env = marker_environment(ctx, _python_facts(ctx), dists["torch"],
                                 [p for n, p in sorted(dists.items()) if n != "torch"])
        out.update(installed=True, version=version, requires_dist=requires,
                   marker_environment=env, pins=_pins(requires, env))
    if torch_dir is not None:
        text = (torch_dir / "version.py").read_text(encoding="utf-8", errors="replace")
        v = parse_torch_version_py(text)
        out["installed"] = True
        out["version"] = out.get("version") or v.get("__version__")
        out["cuda"] = v.get("cuda")
        out["hip"] = v.get("hip")
        out["git_version"] = v.get("git_version")
        out["location"] = ctx.sysroot.unmap(torch_dir) if not ctx.live else str(torch_dir)
        lib = torch_dir / "lib"
        try:
            libs = sorted(os.listdir(lib))
        except OSError:
            libs = []
        out["bundled_cudnn"] = [n for n in libs if n.startswith("libcudnn")]
        out["bundled_nccl"] = [n for n in libs if n.startswith("libnccl")]
    elif out["installed"]:
        out["cuda"] = None
        out["version_py_missing"] = True
    out["cuda_libs"] = {
        name: read_metadata(path)[0] or _dir_version(path)
        for name, path in sorted(dists.items()) if name != "torch"
    }
    if not ctx.live:
        # Importing torch here would describe this machine, not the recorded one.
        recorded = ctx.recorded("torch_runtime")
        if recorded is not None and out["installed"]:
            out["runtime"] = dict(recorded)
            out["runtime_recorded"] = True
        elif ctx.import_torch:
            out["runtime_missing"] = ("no pitstop-recorded/torch_runtime.json in this sysroot "
                                      "(the result of --torch on that machine)")
    elif ctx.import_torch and out["installed"]:
        out["runtime"] = torch_runtime(ctx.python or sys.executable)
    return out


# Run in a fresh interpreter so a crashing CUDA init cannot take the doctor down.
_RUNTIME_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
out = {}
try:
    import torch
except Exception as err:
    print(json.dumps({"import_error": f"{type(err).__name__}: {err}"})); sys.exit(0)
out["import_s"] = round(time.perf_counter() - t0, 3)
out["version"] = torch.__version__
out["cuda"] = torch.version.cuda
out["num_threads"] = torch.get_num_threads()
out["num_interop_threads"] = torch.get_num_interop_threads()
try:
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count()
except Exception as err:
    out["cuda_available"] = False
    out["cuda_error"] = f"{type(err).__name__}: {err}"
if torch.version.cuda and not out.get("cuda_available"):
    try:
        torch.zeros(1, device="cuda")
    except Exception as err:
        out["cuda_error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
try:
    out["cudnn_available"] = bool(torch.backends.cudnn.is_available())
    out["cudnn_version"] = torch.backends.cudnn.version()
except Exception as err:
    out["cudnn_available"] = False
    out["cudnn_error"] = f"{type(err).__name__}: {err}"
if out.get("cuda_available"):
    try:
        out["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as err:
        out["nccl_error"] = f"{type(err).__name__}: {err}"
    try:
        x = torch.randn(2, 3, 16, 16, device="cuda")
        w = torch.randn(4, 3, 3, 3, device="cuda")
        torch.nn.functional.conv2d(x, w)
        torch.cuda.synchronize()
        out["cudnn_conv_ok"] = True
    except Exception as err:
        out["cudnn_conv_ok"] = False
        out["cudnn_error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
print(json.dumps(out))
"""


def torch_runtime(python: str, timeout: float = 120.0) -> dict[str, Any]:
    """Import torch in ``python`` (a subprocess) and report what CUDA/cuDNN really do."""
    try:
        proc = run_child([python, "-c", _RUNTIME_SCRIPT], timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"importing torch took more than {timeout:.0f} s"}
    except OSError as err:
        return {"error": f"cannot run {python}: {err}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"torch subprocess exited {proc.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result
