"""Which container (or batch job) a process runs in, from its ``/proc/PID/cgroup``.

Every container runtime puts a process in a cgroup whose path carries the container's
id: Docker ``/docker/ID`` (cgroupfs) or ``docker-ID.scope`` (systemd), Podman
``libpod-ID.scope``, containerd and CRI-O under Kubernetes ``cri-containerd-ID.scope``,
``crio-ID.scope`` or ``/kubepods/…/pod<UID>/ID``, LXC ``/lxc/NAME`` or
``lxc.payload.NAME``, and Slurm ``…/job_N/step_M``. The parser is pure; names beyond
the id are looked up only where the runtime leaves them readable (Docker's
``config.v2.json``, root only), and a miss is not an error.

:mod:`pitstop.hostinfo.container` answers a different question (is *this* process in a
container, and how do we know); this module names the container of *any* process.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pitstop.hostinfo.cgroup import parse_proc_cgroup
from pitstop.telemetry.procfs import read_text

__all__ = ["ContainerRef", "container_of", "parse_cgroup"]

_HEX = r"[0-9a-f]{64}"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kubernetes", re.compile(rf"kubepods.*?(?:cri-containerd-|crio-|docker-|/)(?P<id>{_HEX})")),
    ("docker", re.compile(rf"(?:/docker/|docker-)(?P<id>{_HEX})")),
    ("podman", re.compile(rf"libpod-(?:conmon-)?(?P<id>{_HEX})")),
    ("cri-o", re.compile(rf"crio-(?P<id>{_HEX})")),
    ("containerd", re.compile(rf"cri-containerd-(?P<id>{_HEX})")),
    ("lxc", re.compile(r"/lxc(?:\.payload)?[./](?P<id>[^/]+)")),
    ("slurm", re.compile(r"/(?P<id>job_\d+)(?:/|$)")),
)
_POD = re.compile(r"pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class ContainerRef:
    """A container (or Slurm job): the runtime, its id, and a name where one is known."""

    runtime: str
    id: str
    name: str | None = None

    @property
    def short(self) -> str:
        """What a table shows: ``docker:3f2a1b9c04de`` or the name when known."""
        ident = self.id[:12] if re.fullmatch(_HEX, self.id) else self.id
        return f"{self.runtime}:{self.name or ident}"

    def to_dict(self) -> dict[str, str | None]:
        return {"runtime": self.runtime, "id": self.id, "name": self.name}


def parse_cgroup(text: str) -> ContainerRef | None:
    """The container named by a ``/proc/PID/cgroup`` text, or ``None`` (a host process)."""
    v1, v2 = parse_proc_cgroup(text)
    # The unified (v2) path first: it is the one a runtime always sets.
    paths = ([v2] if v2 is not None else []) + list(dict.fromkeys(v1.values()))
    for path in paths:
        for runtime, pattern in _PATTERNS:
            m = pattern.search(path)
            if m:
                name = None
                if runtime == "kubernetes":
                    pod = _POD.search(path)
                    name = f"pod {pod.group('uid').replace('_', '-')}" if pod else None
                return ContainerRef(runtime, m.group("id"), name)
    return None


def _docker_name(container_id: str, root: str = "/var/lib/docker") -> str | None:
    text = read_text(f"{root}/containers/{container_id}/config.v2.json")
    if not text:
        return None
    try:
        name = json.loads(text).get("Name")
    except (ValueError, AttributeError):
        return None
    return name.lstrip("/") if isinstance(name, str) and name else None


def container_of(pid: int, proc: str = "/proc") -> ContainerRef | None:
    """The container of process ``pid`` (``None`` on the host or when unreadable)."""
    text = read_text(f"{proc}/{pid}/cgroup")
    ref = parse_cgroup(text) if text else None
    if ref is not None and ref.runtime == "docker":
        name = _docker_name(ref.id)
        if name:
            ref = ContainerRef(ref.runtime, ref.id, name)
    return ref
