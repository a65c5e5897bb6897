"""Is this a container, which kind, and what follows from it."""

from __future__ import annotations

from typing import Any

from pitstop.doctor.probes import ProbeContext, read_environ
from pitstop.hostinfo.container import detect_container


def probe(ctx: ProbeContext) -> dict[str, Any]:
    env = read_environ(ctx.sysroot) if not ctx.live else ctx.environ
    found = detect_container(ctx.sysroot, env)
    return {
        "in_container": found.in_container,
        "runtime": found.runtime,
        "signals": found.signals,
        "kubernetes": found.kubernetes,
    }
