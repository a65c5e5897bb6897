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
``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``pattern``, ``anyOf``, and
``description`` (used in messages); others are ignored. One difference: ``integer`` means an integer
literal (``3``, not ``3.0``), as the code behind expects a Python ``int``. The tests
check that the ``jsonschema`` library, told the same about integers, agrees with
:func:`validate`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
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


_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "null": (type(None),), "integer": (int,), "number": (int, float)}
_JSON_TYPES = frozenset(t for ts in _EXACT_TYPES.values() for t in ts)


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
    """The first place where ``value`` breaks ``schema``, as one line; ``None`` if it fits.

    ``path`` names ``value`` in the message (``nvml.gpus[0]``; "" for the whole
    document). The schema is compiled once into checks that test only the keywords it
    has (a monitor recording is thousands of documents), and a message is only
    composed for a value that fails.
    """
    problem = _compiled(schema)(value)
    return problem(path) if problem is not None else None


# A check returns None for a value that fits, else a function that makes the message
# once told where the value is.
Problem = Callable[[str], str]
Check = Callable[[Any], "Problem | None"]

_CACHE: dict[int, tuple[Schema, Check]] = {}
_CACHE_MAX = 512  # schemas are module constants; a few are built per call


def _compiled(schema: Schema) -> Check:
    hit = _CACHE.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    check = _compile(schema)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[id(schema)] = (schema, check)  # the schema is kept, so its id is not reused
    return check


def _compile(schema: Schema) -> Check:
    steps: list[Check] = []
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        for kind in allowed:
            if kind not in _KINDS:
                raise ValueError(f"unknown JSON type {kind!r} in a schema")
        want = _expected(schema, " or ".join(_KINDS[k] for k in allowed))
        # What json.loads makes, by exact type (a float must be finite); anything else
        # (a subclass, a tuple) takes the full test.
        exact = {t for k in allowed for t in _EXACT_TYPES[k]}

        def type_step(value: Any) -> Problem | None:
            t = type(value)
            if (t in exact and (t is not float or math.isfinite(value))) or (
                    t not in _JSON_TYPES and any(_is(value, k) for k in allowed)):
                return None
            return lambda path: f"{_where(path)} must be {want}, got {_kind_of(value)}"
        steps.append(type_step)
    if "const" in schema:
        const = schema["const"]

        def const_step(value: Any) -> Problem | None:
            if value == const:
                return None
            return lambda path: f"{_where(path)} must be {json.dumps(const)}, got {_show(value)}"
        steps.append(const_step)
    if "enum" in schema:
        choices = list(schema["enum"])
        one_of = _expected(schema, "one of " + ", ".join(json.dumps(c) for c in choices))

        def enum_step(value: Any) -> Problem | None:
            if value in choices:
                return None
            return lambda path: f"{_where(path)} must be {one_of}, got {_show(value)}"
        steps.append(enum_step)
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        bounds = _expected(schema, " and ".join(b for b in (
            f">= {low}" if low is not None else "", f"<= {high}" if high is not None else "")
            if b))

        def range_step(value: Any) -> Problem | None:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not (
                    (low is not None and value < low) or (high is not None and value > high)):
                return None
            return lambda path: f"{_where(path)} must be {bounds}, got {_show(value)}"
        steps.append(range_step)
    if any(k in schema for k in ("minLength", "maxLength", "pattern")):
        steps.append(_string_step(schema))
    if any(k in schema for k in ("minItems", "maxItems", "items")):
        steps.append(_array_step(schema))
    if any(k in schema for k in ("required", "properties", "additionalProperties")):
        steps.append(_object_step(schema))
    if "anyOf" in schema:
        steps.append(_any_of_step(schema))

    if not steps:
        return _fits
    if len(steps) == 1:
        return steps[0]
    if len(steps) == 2:  # the usual case (a type, then properties or items): no loop
        first, second = steps
        return lambda value: first(value) or second(value)

    def check(value: Any) -> Problem | None:
        for step in steps:
            problem = step(value)
            if problem is not None:
                return problem
        return None
    return check


def _fits(value: Any) -> Problem | None:
    return None


def _string_step(schema: Schema) -> Check:
    shortest, longest = schema.get("minLength", 0), schema.get("maxLength")
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
    like = _expected(schema, "like " + schema["pattern"]) if pattern else ""

    def step(value: Any) -> Problem | None:
        if not isinstance(value, str):
            return None
        if len(value) < shortest:
            return (lambda path: f"{_where(path)} must not be empty") if shortest == 1 else \
                (lambda path: f"{_where(path)} must be at least {shortest} characters")
        if longest is not None and len(value) > longest:
            return lambda path: f"{_where(path)} is longer than {longest} characters"
        if pattern is not None and not pattern.search(value):
            return lambda path: f"{_where(path)} must be {like}, got {_show(value)}"
        return None
    return step


def _array_step(schema: Schema) -> Check:
    fewest, most = schema.get("minItems", 0), schema.get("maxItems")
    items = schema.get("items")
    item_check = _compiled(items) if isinstance(items, Mapping) else None

    def step(value: Any) -> Problem | None:
        if not isinstance(value, list):
            return None
        if len(value) < fewest:
            return lambda path: f"{_where(path)} must have at least {fewest} item(s)"
        if most is not None and len(value) > most:
            return lambda path: f"{_where(path)} has more than {most} items"
        if item_check is not None:
            for i, item in enumerate(value):
                problem = item_check(item)
                if problem is not None:
                    return _at_index(problem, i)
        return None
    return step


def _object_step(schema: Schema) -> Check:
    required = list(schema.get("required", ()))
    props: Mapping[str, Any] = schema.get("properties", {})
    prop_checks = {key: _compiled(sub) for key, sub in props.items()}
    extra = schema.get("additionalProperties", True)
    extra_check = _compiled(extra) if isinstance(extra, Mapping) else None
    known = ", ".join(props) or "none"

    def step(value: Any) -> Problem | None:
        if not isinstance(value, dict):
            return None
        for key in required:
            if key not in value:
                return lambda path: f"{_where(path)} lacks {key!r}"
        for key, item in value.items():
            check = prop_checks.get(key)
            if check is None:
                if extra is False:
                    return lambda path: (f"{_where(path)} has an unknown key {key!r} "
                                         f"(known: {known})")
                check = extra_check
                if check is None:
                    continue
            problem = check(item)
            if problem is not None:
                return _at_key(problem, key)
        return None
    return step


def _any_of_step(schema: Schema) -> Check:
    options = [_compiled(sub) for sub in schema["anyOf"]]

    def step(value: Any) -> Problem | None:
        problems = []
        for option in options:
            problem = option(value)
            if problem is None:
                return None
            problems.append(problem)
        return lambda path: (f"{_where(path)} fits none of its {len(problems)} forms "
                             f"({'; '.join(p(path) for p in problems)})")
    return step


def _at_index(problem: Problem, i: int) -> Problem:
    """Item ``i``'s problem, told where the item is once the list knows its own path."""
    return lambda path: problem(f"{path}[{i}]")


def _at_key(problem: Problem, key: str) -> Problem:
    """As :func:`_at_index`, for the value of ``key`` in an object."""
    return lambda path: problem(f"{path}.{key}" if path else str(key))


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"
