"""Probes: each reads one part of the machine and returns a JSON-able dict of facts.

A probe never decides anything (that is the checks' job) and never writes. It may
raise: :func:`pitstop.doctor.facts.collect` isolates every probe, so one that fails
becomes ``{"error": "<reason>"}`` in the facts and the checks that need it report
"could not check: <reason>".

Everything file-based goes through :class:`~pitstop.sysroot.Sysroot`, so the same
probe reads the live machine or a fake tree (``--sysroot DIR``). Values that do not
live in files (NVML, statvfs, the Python that would run training) are read live, or,
under a sysroot, from recordings in ``DIR/pitstop-recorded/`` (see
``tests/doctor/machines/README.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pitstop.hostinfo.container import read_environ
from pitstop.hostinfo.recorded import RECORDED_DIR, read_recording
from pitstop.sysroot import Sysroot

__all__ = ["RECORDED_DIR", "Probe", "ProbeContext", "probes", "read_environ"]



@dataclass
class ProbeContext:
    """What every probe may look at: the root, the data path, the environment, options."""

    sysroot: Sysroot
    data_path: str
    environ: Mapping[str, str]
    measure_io: bool = False
    import_torch: bool = False
    io_seconds: float = 3.0
    # The interpreter that runs training, when it is not the one running pitstop.
    python: str | None = None
    _recorded: dict[str, Any] = field(default_factory=dict)
    # Values two probes need and that cost a subprocess (e.g. --python's sys.path).
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.sysroot.is_live

    def recorded(self, name: str) -> Any:
        """``DIR/pitstop-recorded/<name>.json`` of a fake tree, or ``None`` if absent.

        Raises ``ValueError`` for a recording that is not valid JSON (the probe fails
        with that reason rather than silently using nothing).
        """
        if name not in self._recorded:
            self._recorded[name] = read_recording(self.sysroot, name)
        return self._recorded[name]


Probe = Callable[[ProbeContext], dict[str, Any]]


def probes() -> dict[str, Probe]:
    """Every probe, in the order they run (imports are local: each module is small)."""
    from pitstop.doctor.probes import (
        container,
        cpu,
        environment,
        gpu,
        iotest,
        kmod,
        memory,
        platform,
        python,
        storage,
    )

    return {
        "platform": platform.probe,
        "pci": gpu.probe_pci,
        "kernel_modules": gpu.probe_kernel_modules,
        "nvidia_module": kmod.probe,
        "nvml": gpu.probe_nvml,
        "gpu_access": gpu.probe_gpu_access,
        "python": python.probe_python,
        "torch": python.probe_torch,
        "cpu": cpu.probe,
        "memory": memory.probe,
        "storage": storage.probe,
        "io": iotest.probe,
        "container": container.probe,
        "environment": environment.probe,
    }
