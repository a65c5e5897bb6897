"""Is this process in a container, which runtime, and how do we know.

Every signal found is listed, so that a report can say *why* pitstop thinks so. The
runtime is the most specific one: Kubernetes over the engine that runs its pods,
Podman/Docker marker files over generic ``container=`` hints and cgroup paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pitstop.sysroot import Sysroot

__all__ = ["Container", "detect_container", "read_environ"]

# Words in a cgroup path that name the runtime that made it.
CGROUP_MARKERS = (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                  ("containerd", "containerd"), ("lxc", "lxc"), ("crio", "cri-o"))
K8S_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Container:
    """What :func:`detect_container` found; ``runtime`` is ``None`` on a host."""

    runtime: str | None
    signals: list[str] = field(default_factory=list)

    @property
    def in_container(self) -> bool:
        return bool(self.signals)

    @property
    def kubernetes(self) -> bool:
        return self.runtime == "kubernetes"


def read_environ(sr: Sysroot) -> dict[str, str]:
    """The environment of the process being looked at.

    Live: ``os.environ``. Under a sysroot: ``DIR/proc/self/environ`` (NUL-separated, as
    the kernel writes it), or an empty environment if the tree has none.
    """
    if sr.is_live:
        return dict(os.environ)
    raw = sr.read_bytes("/proc/self/environ")
    if raw is None:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            key, _, value = item.decode("utf-8", "replace").partition("=")
            env[key] = value
    return env


def detect_container(sr: Sysroot, environ: Mapping[str, str]) -> Container:
    """Look for every container signal under ``sr`` and in ``environ``."""
    signals: list[str] = []
    specific: str | None = None  # from a marker only one runtime leaves
    generic: str | None = None  # from a hint any runtime may leave
    if sr.exists("/.dockerenv"):
        signals.append("/.dockerenv exists")
        specific = "docker"
    if sr.exists("/run/.containerenv"):
        signals.append("/run/.containerenv exists")
        specific = "podman"
    if sr.exists(K8S_SERVICE_ACCOUNT):
        signals.append(f"{K8S_SERVICE_ACCOUNT} exists")
        specific = "kubernetes"
    if environ.get("KUBERNETES_SERVICE_HOST"):
        signals.append("KUBERNETES_SERVICE_HOST is set")
        specific = "kubernetes"
    if environ.get("container"):
        signals.append(f"container={environ['container']} in the environment")
        generic = environ["container"]
    marker = sr.read_text("/run/systemd/container")  # systemd-nspawn, lxc, podman
    if marker:
        signals.append(f"/run/systemd/container says {marker}")
        generic = generic or marker
    pid1_env = sr.read_text("/proc/1/environ") or ""  # readable by root only
    match = re.search(r"(?:^|\x00)container=([^\x00]+)", pid1_env)
    if match:
        signals.append(f"container={match.group(1)} in the environment of PID 1")
        generic = generic or match.group(1)
    for source in ("/proc/1/cgroup", "/proc/self/cgroup"):
        text = sr.read_text(source) or ""
        for word, name in CGROUP_MARKERS:
            if re.search(rf"[/:.-]{word}", text):
                signals.append(f"{source} mentions {word}")
                generic = generic or name
                break
    return Container(specific or generic, signals)
