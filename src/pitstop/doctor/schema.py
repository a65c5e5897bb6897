"""JSON Schema of ``pitstop doctor --json`` output, for consumers and for the tests.

The facts sections are free-form per probe (each may be ``{"error": reason}``); the
``checks`` list is the stable contract.
"""

from __future__ import annotations

from typing import Any

from pitstop.doctor.facts import SCHEMA_VERSION

REMEDY: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["kind", "text"],
    "properties": {
        "kind": {"enum": ["shell", "code", "pitstop", "text"]},
        "text": {"type": "string", "minLength": 1},
        "note": {"type": "string"},
    },
}

CHECK: dict[str, Any] = {
    "type": "object",
    "required": ["code", "title", "layer", "status", "summary", "evidence", "remedy"],
    "properties": {
        "code": {"type": "string", "pattern": "^DR[0-9]{3}$"},
        "title": {"type": "string", "minLength": 1},
        "layer": {"enum": ["driver", "gpu", "storage", "cpu", "memory", "container",
                           "environment", "platform"]},
        "status": {"enum": ["ok", "warning", "problem", "unknown"]},
        "summary": {"type": "string", "minLength": 1},
        "evidence": {"type": "object"},
        "remedy": REMEDY,
        "subject": {"type": "string"},
        "not_applicable": {"type": "boolean"},
    },
    # a warning or problem always says what to do
    "if": {"properties": {"status": {"enum": ["warning", "problem"]}}},
    "then": {"properties": {"remedy": {"type": "object"}}},
}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pitstop doctor report",
    "type": "object",
    "required": ["schema_version", "facts", "checks"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "facts": {
            "type": "object",
            "required": ["schema_version", "meta"],
            "properties": {"schema_version": {"const": SCHEMA_VERSION},
                           "meta": {"type": "object"}},
            "additionalProperties": {"type": "object"},
        },
        "checks": {"type": "array", "items": CHECK, "minItems": 1},
        "summary": {"type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0}},
    },
}
