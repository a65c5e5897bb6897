"""Is this a container, which kind, and what follows from it."""

from __future__ import annotations

import re
from typing import Any

from pitstop.doctor.probes import ProbeContext, read_environ

CGROUP_MARKERS = (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                  ("containerd", "containerd"), ("lxc", "lxc"), ("crio", "cri-o"))


def probe(ctx: ProbeContext) -> dict[str, Any]:
    sr = ctx.sysroot
    env = read_environ(sr) if not ctx.live else ctx.environ
    signals: list[str] = []
    runtime = None
    if sr.exists("/.dockerenv"):
        signals.append("/.dockerenv exists")
        runtime = "docker"
    if sr.exists("/run/.containerenv"):
        signals.append("/run/.containerenv exists")
        runtime = "podman"
    if env.get("KUBERNETES_SERVICE_HOST"):
        signals.append("KUBERNETES_SERVICE_HOST is set")
        runtime = "kubernetes"
    if env.get("container"):
        signals.append(f"container={env['container']} in the environment")
        runtime = runtime or env["container"]
    for source in ("/proc/1/cgroup", "/proc/self/cgroup"):
        text = sr.read_text(source) or ""
        for marker, name in CGROUP_MARKERS:
            if re.search(rf"[/:.-]{marker}", text):
                signals.append(f"{source} mentions {marker}")
                runtime = runtime or name
                break
    return {
        "in_container": bool(signals),
        "runtime": runtime,
        "signals": signals,
        "kubernetes": bool(env.get("KUBERNETES_SERVICE_HOST")),
    }
