"""Reading JSON that came from outside this run: bounded, then checked against a schema.

Facts for ``doctor --from``, ``system``'s saved state, loader configs and recordings in
a fake machine tree are files anyone can hand pitstop. :func:`load_json` reads one with
a size bound (nothing past it is read into memory), a nesting bound (a 100 000-deep
array is refused, not a ``RecursionError``), no ``NaN``/``Infinity``, and then checks it
against a schema, so that the code behind it never meets ``"gpus": "x"`` where it
expects a list. Every refusal is a :class:`BadJSON` whose message names the place
(``nvml.gpus[0].name must be a string, got an integer``).

Schemas are plain JSON Schema (draft 2020-12) restricted to the keywords
:func:`validate` implements: ``type``, ``enum``, ``const``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``minItems``, ``maxItems``,
``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``pattern``, and
``description`` (used in messages). One difference: ``integer`` means an integer
literal (``3``, not ``3.0``), as the code behind expects a Python ``int``. The tests
check that the ``jsonschema`` library, told the same about integers, agrees with
:func:`validate`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "BadJSON", "load_json", "parse_json", "read_bounded",
           "validate"]

DEFAULT_MAX_DEPTH = 64

Schema = Mapping[str, Any]


class BadJSON(ValueError):
    """The input is not the JSON it should be; the message says where and why (one line)."""


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of ``path`` (``-``: standard input), refusing more than ``max_bytes``
    without reading past them. ``OSError`` for a file that cannot be read."""
    if os.fspath(path) == "-":
        import sys

        stream = sys.stdin.buffer if sys.stdin is not None and hasattr(sys.stdin, "buffer") \
            else None
        data = stream.read(max_bytes + 1) if stream is not None else b""
    else:
        if os.path.isdir(path):
            raise IsADirectoryError(21, os.strerror(21), os.fspath(path))
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadJSON(f"larger than {_size(max_bytes)}; this is not a file pitstop wrote")
    return data


def _refuse_constant(name: str) -> Any:
    raise BadJSON(f"{name} is not a JSON number")


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed document, without recursion; stops past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(data: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse ``data`` (UTF-8, a BOM allowed), refusing ``NaN``/``Infinity`` and nesting
    deeper than ``max_depth``. Raises :class:`BadJSON`."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise BadJSON(f"not UTF-8 text (byte {err.start}: {err.reason})") from None
    else:
        text = data.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise BadJSON(f"not JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    except RecursionError:
        raise BadJSON(f"nested deeper than {max_depth} levels") from None
    except ValueError as err:  # a number of more than 4300 digits, NaN (above)
        raise BadJSON(str(err).split("\n")[0]) from None
    if _depth(value, max_depth) > max_depth:
        raise BadJSON(f"nested deeper than {max_depth} levels")
    return value


def load_json(data: bytes | str, schema: Schema, *,
              max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """:func:`parse_json`, then :func:`validate`; raises :class:`BadJSON`."""
    value = parse_json(data, max_depth=max_depth)
    problem = validate(value, schema)
    if problem:
        raise BadJSON(problem)
    return value


# ---------------------------------------------------------------- validation

_KINDS = {"object": "an object", "array": "an array", "string": "a string",
          "integer": "an integer", "number": "a number", "boolean": "true or false",
          "null": "null"}


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "integer":  # stricter than JSON Schema: 1.0 is not an int to the code behind
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float)) and not (
            isinstance(value, float) and not math.isfinite(value))
    raise ValueError(f"unknown JSON type {kind!r} in a schema")


def _kind_of(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is(value, kind):
            return _KINDS[kind]
    return type(value).__name__


def _where(path: str) -> str:
    return path or "the document"


def _expected(schema: Schema, default: str) -> str:
    return str(schema.get("description") or default)


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) \
        else _kind_of(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(value: Any, schema: Schema, path: str = "") -> str | None:
    """The first place where ``value`` breaks ``schema``, as one line; ``None`` if it fits."""
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in allowed):
            want = " or ".join(_KINDS[k] for k in allowed)
            return f"{_where(path)} must be {_expected(schema, want)}, got {_kind_of(value)}"
    if "const" in schema and value != schema["const"]:
        return f"{_where(path)} must be {json.dumps(schema['const'])}, got {_show(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(c) for c in schema["enum"])
        return f"{_where(path)} must be {_expected(schema, 'one of ' + choices)}, got {_show(value)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = " and ".join(b for b in (f">= {low}" if low is not None else "",
                                              f"<= {high}" if high is not None else "") if b)
            return f"{_where(path)} must be {_expected(schema, bounds)}, got {_show(value)}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{_where(path)} must not be empty" if schema["minLength"] == 1 else \
                f"{_where(path)} must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{_where(path)} is longer than {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{_where(path)} must be {_expected(schema, 'like ' + schema['pattern'])}, got {_show(value)}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{_where(path)} must have at least {schema['minItems']} item(s)"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{_where(path)} has more than {schema['maxItems']} items"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                problem = validate(item, items, f"{path}[{i}]")
                if problem:
                    return problem
    if isinstance(value, dict):
        return _validate_object(value, schema, path)
    return None


def _validate_object(value: dict[str, Any], schema: Schema, path: str) -> str | None:
    for key in schema.get("required", ()):
        if key not in value:
            return f"{_where(path)} lacks {key!r}"
    props: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        sub = f"{path}.{key}" if path else str(key)
        if key in props:
            problem = validate(item, props[key], sub)
        elif extra is False:
            known = ", ".join(props) or "none"
            return f"{_where(path)} has an unknown key {key!r} (known: {known})"
        elif isinstance(extra, Mapping):
            problem = validate(item, extra, sub)
        else:
            continue
        if problem:
            return problem
    return None


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"
