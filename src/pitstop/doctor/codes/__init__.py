"""Documentation of every ``pitstop doctor`` finding code (DR###), registered at import.

``pitstop explain DR004`` prints one; ``docs/findings.md`` is generated from all of
them. Codes are stable: a code keeps its meaning forever, new checks get new codes.
"""

from __future__ import annotations

from pitstop.doctor.codes import container, cpu, driver, environment, gpu, memory, platform, storage
from pitstop.findings import CodeDoc, register

# One module per layer, as in pitstop.doctor.checks; the order is the report's.
DOCS: list[CodeDoc] = [
    *driver.DOCS,
    *gpu.DOCS,
    *storage.DOCS,
    *cpu.DOCS,
    *memory.DOCS,
    *container.DOCS,
    *environment.DOCS,
    *platform.DOCS,
]

DOCTOR_DOCS: dict[str, CodeDoc] = {d.code: d for d in DOCS}

register(*DOCS)
