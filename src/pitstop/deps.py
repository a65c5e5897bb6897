"""What a command needs beyond ``pip install pitstop``, and the one line it says when
something is missing.

The core install carries what ``doctor``, ``lint``, ``system`` and ``explain`` need.
Extras carry the rest (``pitstop[bench]``: Pillow, numpy, matplotlib; ``pitstop[plot]``:
matplotlib; ``pitstop[monitor]``: Textual, prometheus-client). torch is never
a dependency: pip would pick PyPI's default build, which may not match the machine's
NVIDIA driver, and would replace a torch the user chose. A command that needs torch
checks for it first and names the build for this machine's driver, from the doctor's
own check (:func:`pitstop.doctor.checks.driver.torch_install_command`).
"""

from __future__ import annotations

import importlib
import importlib.util
import re

from pitstop.errors import UsageError

__all__ = ["MIN_TORCH", "require_modules", "require_torch", "torch_install_hint",
           "torch_problem"]

MIN_TORCH = (2, 4)  # torch.amp.autocast("cuda"), torch.compile on 3.11, GradScaler("cuda")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a broken __spec__
        return False


def _version_tuple(version: str) -> tuple[int, ...]:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def torch_install_hint() -> str:
    """The pip command for this machine's torch build (probing PCI and NVML, ~10 ms)."""
    try:
        from pitstop.doctor.checks.driver import torch_install_command
        from pitstop.doctor.facts import collect
        from pitstop.doctor.probes import ProbeContext
        from pitstop.sysroot import Sysroot

        ctx = ProbeContext(sysroot=Sysroot.of(None), data_path="/", environ={},
                           measure_io=False, import_torch=False, io_seconds=0.0, python=None)
        facts = collect(ctx, only=["platform", "pci", "kernel_modules", "nvml"])
        return torch_install_command(facts)
    except Exception:  # the hint must never be the thing that fails
        return "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def torch_problem(who: str) -> str | None:
    """Why ``who`` (``pitstop bench``, ``pitstop.train``) cannot use this Python's torch:
    missing, older than :data:`MIN_TORCH`, or failing to import; one line naming the
    build to install. ``None`` when torch is fine. An installed torch is never changed."""
    wanted = ".".join(map(str, MIN_TORCH))
    try:
        torch = importlib.import_module("torch")
    except ModuleNotFoundError as err:
        if err.name not in (None, "torch"):
            return _broken(who, err)
        return (f"{who} needs torch >= {wanted}, which is not installed in this Python; "
                f"install the build for this machine: {torch_install_hint()}")
    except Exception as err:  # a broken install: missing CUDA libraries, ABI mismatch
        return _broken(who, err)
    version = str(getattr(torch, "__version__", "0"))
    if _version_tuple(version) < MIN_TORCH:
        return (f"{who} needs torch >= {wanted}; this Python has torch {version} (pitstop "
                f"left it as it is); to upgrade it for this machine: {torch_install_hint()}")
    return None


def _broken(who: str, err: BaseException) -> str:
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return (f"{who} needs torch, but `import torch` fails ({first}); reinstall the build "
            f"for this machine: {torch_install_hint()}")


def require_torch(command: str) -> None:
    """:class:`UsageError` (one line, exit 2) with :func:`torch_problem`'s message."""
    problem = torch_problem(command)
    if problem:
        raise UsageError(problem)


def require_modules(command: str, modules: dict[str, str], extra: str) -> None:
    """Raise :class:`UsageError` when one of ``modules`` (import name -> distribution
    name) cannot be imported: ``pip install 'pitstop[EXTRA]'`` brings them."""
    missing = [dist for name, dist in modules.items() if not _importable(name)]
    if missing:
        them = "them" if len(missing) > 1 else "it"
        raise UsageError(f"{command} needs {', '.join(missing)}, not installed in this Python; "
                         f"install {them} with: pip install 'pitstop[{extra}]'")
