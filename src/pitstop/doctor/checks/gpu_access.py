"""Which of the machine's GPUs this process was given, and which of those CUDA will use.

The PCI bus in sysfs always shows every GPU of the host, also inside a container or a
Slurm job; NVML shows only the GPUs whose device nodes the process may open. What this
process was *given* is read from the rules that decide it, each with its count:

* the cgroup v1 device rules (``devices.list``: ``c 195:N``, one per GPU; ``a *:*``
  means everything), which Docker, Kubernetes and Slurm's ``ConstrainDevices`` write;
* ``NVIDIA_VISIBLE_DEVICES``, which the NVIDIA container runtime reads (``all``,
  ``none``/``void``, a list of indices or UUIDs, or the device plugin's
  ``/var/run/nvidia-container-devices`` directory);
* in a container, its ``/dev/nvidiaN`` nodes (the runtime creates only those given);
* Slurm's ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` (enforced on the device nodes only
  with ``ConstrainDevices``, which cgroup v2 does not let us read);
* ``CUDA_VISIBLE_DEVICES``, which hides GPUs from CUDA but never from the driver:
  a scheduler that sets only it (and restricts the device nodes with an unreadable
  cgroup v2 filter) explains NVML seeing that many, nothing else does.

Each rule that acts on the device nodes leaves NVML exactly its count of GPUs; a rule
that is not enforced there leaves NVML every GPU. So NVML seeing a count no rule leaves
(more than the tightest, fewer than all) means GPUs are missing. MIG instances
(``MIG-...`` entries) are not GPUs: a variable that names them gives no GPU count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pitstop.doctor.checks.base import Facts, env_vars

NVIDIA_MAJOR = 195  # /dev/nvidiaN are char 195:N; 195:254 nvidia-modeset, 195:255 nvidiactl
FIRST_CONTROL_MINOR = 254


@dataclass(frozen=True)
class Rule:
    """One restriction of the GPUs: how many it leaves, what it is, and whether it acts
    on the device nodes (then NVML sees only its GPUs) or only on CUDA's view."""

    count: int
    text: str
    device_level: bool = True


@dataclass(frozen=True)
class Given:
    """The GPUs given to this process: ``count`` (``None``: nothing restricts it, every
    GPU on the bus), the ``rule`` that decided, and every restriction seen."""

    count: int | None
    rule: str
    restrictions: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def nvml_counts(self, on_bus: int) -> dict[int, str]:
        """``{count: rule}`` for every GPU count NVML may show without a GPU missing:
        all of them (no rule enforced on the device nodes), or what one rule leaves."""
        device = [r for r in self.rules if r.device_level]
        out: dict[int, str] = {}
        for r in device or self.rules:
            out.setdefault(min(r.count, on_bus), r.text)
        out.setdefault(on_bus, "every GPU on the PCI bus")
        return out


def cuda_visible_items(value: str) -> list[str]:
    """The entries of ``CUDA_VISIBLE_DEVICES`` CUDA uses: it stops at the first invalid
    one (a negative index, an empty entry)."""
    out = []
    for item in (x.strip() for x in value.split(",")):
        if not item or item.startswith("-") or item == "NoDevFiles":
            break
        out.append(item)
    return out


def _cgroup_count(facts: Facts) -> tuple[int, str] | None:
    rules = ((facts.get("gpu_access") or {}).get("cgroup_devices") or {}).get("rules")
    if rules is None:
        return None
    minors = set()
    for rule in rules:
        parts = rule.split()
        if not parts:
            continue
        access = parts[2] if len(parts) > 2 else "rwm"
        opens = "r" in access or "w" in access  # "m" alone (mknod) opens nothing
        if opens and (parts[0] == "a" or (len(parts) > 1 and parts[0] in ("c", "a") and
                                          parts[1] in ("*:*", f"{NVIDIA_MAJOR}:*"))):
            return None  # every device allowed: no restriction
        m = re.fullmatch(rf"{NVIDIA_MAJOR}:(\d+)", parts[1]) if len(parts) > 1 else None
        if parts[0] == "c" and m and int(m.group(1)) < FIRST_CONTROL_MINOR:
            minors.add(int(m.group(1)))
    nodes = ", ".join(f"/dev/nvidia{n}" for n in sorted(minors)) or "no /dev/nvidiaN"
    return len(minors), f"the cgroup v1 device rules allow {nodes}"


def _names_mig(items: list[str]) -> bool:
    """MIG instances (``MIG-<uuid>``, or ``GPU:instance`` in NVIDIA_VISIBLE_DEVICES)."""
    return any(x.upper().startswith("MIG-") or re.fullmatch(r"\d+:\d+", x) for x in items)


def _nvidia_visible_count(facts: Facts, value: str) -> tuple[int, str] | None:
    v = value.strip()
    name = f"NVIDIA_VISIBLE_DEVICES={v or '(empty)'}"
    if v.lower() in ("all", "nvidia.com/gpu=all"):
        return None
    if v.lower() in ("", "none", "void"):
        return 0, f"{name} (no GPU)"
    if v.startswith("/"):
        listed = (facts.get("gpu_access") or {}).get("container_devices")
        if listed is None:
            return None
        return len(listed), f"{name} lists {len(listed)} device(s) there"
    items = list(dict.fromkeys(x for x in (i.strip() for i in v.split(",")) if x))
    if any(x.lower().endswith("=all") for x in items) or _names_mig(items):
        return None  # MIG instances: how many GPUs they sit on is the device nodes' to say
    return len(items), f"{name} ({len(items)} GPU(s))"


def gpus_given(facts: Facts) -> Given:
    """The GPUs this process was given (see the module's docstring)."""
    env = env_vars(facts)
    container = facts.get("container") or {}
    found: list[Rule] = []
    cg = _cgroup_count(facts)
    if cg is not None:
        found.append(Rule(*cg))
    if "NVIDIA_VISIBLE_DEVICES" in env:
        nv = _nvidia_visible_count(facts, env["NVIDIA_VISIBLE_DEVICES"])
        if nv is not None:
            found.append(Rule(*nv))
    if container.get("in_container"):
        # A runtime creates only the device nodes it gives; on a host they exist for every
        # GPU the driver probed, so they say nothing there.
        nodes = (facts.get("gpu_access") or {}).get("dev_gpu_nodes")
        if nodes is not None:
            found.append(Rule(len(nodes), "the container has " + (", ".join(
                f"/dev/{n}" for n in nodes) or "no /dev/nvidiaN")))
    for var in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        if env.get(var, "").strip():
            items = list(dict.fromkeys(x.strip() for x in env[var].split(",") if x.strip()))
            found.append(Rule(len(items), f"Slurm gave this job {len(items)} GPU(s) "
                                          f"({var}={env[var]})"))
            break
    if "CUDA_VISIBLE_DEVICES" in env:
        items = cuda_visible_items(env["CUDA_VISIBLE_DEVICES"])
        if not _names_mig(items):
            found.append(Rule(len(set(items)), f"CUDA_VISIBLE_DEVICES="
                              f"{env['CUDA_VISIBLE_DEVICES']} ({len(set(items))} GPU(s))",
                              device_level=False))
    restrictions = [r.text for r in found]
    if not found:
        return Given(None, "no cgroup device rule, container or variable restricts the GPUs",
                     restrictions, found)
    tight = min(found, key=lambda r: r.count)  # the first of equals: the most authoritative
    return Given(tight.count, tight.text, restrictions, found)


def in_use(facts: Facts, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The NVML GPUs CUDA will use under ``CUDA_VISIBLE_DEVICES`` (indices count in NVML's
    order, which is the PCI order CUDA uses for identical GPUs; ``GPU-`` UUID prefixes
    match). All of them when it is unset or names something else (MIG instances), and
    when indices cannot be mapped: CUDA numbers GPUs fastest first unless
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which is NVML's order only if the GPUs are alike."""
    env = env_vars(facts)
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return gpus
    alike = len({g.get("name") for g in gpus}) <= 1
    pci_order = env.get("CUDA_DEVICE_ORDER", "").strip().upper() == "PCI_BUS_ID"
    picked: list[dict[str, Any]] = []
    for item in cuda_visible_items(value):
        if item.isdigit():
            if not (alike or pci_order):
                return gpus
            if int(item) >= len(gpus):
                break  # CUDA stops at the first invalid index
            hit = gpus[int(item)]
        elif item.startswith("GPU-"):
            found = [g for g in gpus if str(g.get("uuid") or "").startswith(item)]
            if not found:
                break
            hit = found[0]
        else:
            return gpus
        if hit not in picked:
            picked.append(hit)
    return picked or gpus
