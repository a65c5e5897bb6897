"""Collect the facts document: every probe run in isolation, stamped with a schema version.

The document is plain JSON::

    {"schema_version": 1,
     "meta": {"pitstop_version", "collected_at", "hostname", "sysroot", "data_path",
              "probe_ms": {...}},
     "platform": {...}, "pci": {...}, "nvml": {...}, ...   # one section per probe
    }

A probe that raised leaves ``{"error": "<reason>"}`` as its section. Bump
:data:`SCHEMA_VERSION` when a section changes meaning; ``--from`` refuses documents
with another version rather than misreading them.
"""

from __future__ import annotations

import socket
import time
from datetime import datetime, timezone
from typing import Any

from pitstop import __version__
from pitstop.doctor.probes import ProbeContext, probes
from pitstop.errors import UsageError

SCHEMA_VERSION = 1
REQUIRED_SECTIONS = ("platform", "pci", "nvml", "torch", "cpu", "memory", "storage")


def _error_text(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text if isinstance(err, (RuntimeError, OSError)) else f"{type(err).__name__}: {text}"


def collect(ctx: ProbeContext, only: list[str] | None = None) -> dict[str, Any]:
    """Run every probe (or those in ``only``) and return the facts document."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "meta": {
            "pitstop_version": __version__,
            "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hostname": socket.gethostname() if ctx.live else None,
            "sysroot": None if ctx.live else str(ctx.sysroot.root),
            "data_path": ctx.data_path,
            "measure_io": ctx.measure_io,
            "import_torch": ctx.import_torch,
            "probe_ms": {},
        },
    }
    for name, probe in probes().items():
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            section = probe(ctx)
        except Exception as err:  # isolation is the point: one probe never stops the rest
            section = {"error": _error_text(err)}
        doc[name] = section
        doc["meta"]["probe_ms"][name] = round((time.perf_counter() - t0) * 1000, 1)
    return doc


MAX_FACTS_BYTES = 16 << 20  # a real facts file is ~10 KiB; 1000 GPUs would fit


def load_facts(path: str) -> dict[str, Any]:
    """Read a facts document for ``--from`` (``-``: standard input), bounded in size and
    depth and checked against :data:`pitstop.doctor.schema.FACTS_SCHEMA`;
    :class:`UsageError` naming the file and the bad place for anything unusable."""
    from pitstop.doctor.schema import FACTS_SCHEMA
    from pitstop.schema import BadJSON, parse_json, read_bounded, validate

    hint = "pass a file written by `pitstop doctor --collect`"
    try:
        doc = parse_json(read_bounded(path, MAX_FACTS_BYTES))
    except OSError as err:
        raise UsageError(f"--from {path}: cannot read it ({err.strerror or err}); {hint}") from None
    except BadJSON as err:
        raise UsageError(f"--from {path}: {err}; {hint}") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise UsageError(f"--from {path}: not a pitstop facts document (no schema_version); {hint}")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise UsageError(f"--from {path}: facts schema version {doc['schema_version']!r}, this "
                         f"pitstop reads version {SCHEMA_VERSION}; collect again with this "
                         "version of pitstop")
    bad = [s for s in REQUIRED_SECTIONS if not isinstance(doc.get(s), dict)]
    if bad:
        raise UsageError(f"--from {path}: facts document lacks the section(s) {', '.join(bad)}; "
                         "collect again with `pitstop doctor --collect`")
    problem = validate(doc, FACTS_SCHEMA)
    if problem:
        raise UsageError(f"--from {path}: {problem}; {hint}")
    return doc
