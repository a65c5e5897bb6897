"""Recordings: snapshots written as they come (``.jsonl`` or ``.csv``), read back for
``--replay`` and ``pitstop plot``.

- **JSON Lines** (``.jsonl``): a header line (``{"schema": "pitstop.monitor.recording",
  ...}``), then one whole snapshot per line, processes and verdicts included.
- **CSV** (``.csv``): one row per snapshot, one column per scalar (``cpu.busy_pct``,
  ``cpu.per_core_pct.3``, ``disks.nvme0n1.read_bps``, ``gpus.0.gpm.sm_active_pct``,
  ``verdicts.0.verdict``…), the columns fixed by the first snapshot; processes are
  left out (a table per row does not fit a column layout: use ``.jsonl`` for them).

Each sample is one ``write(2)`` of a whole line on an ``O_APPEND`` descriptor, so a
``kill -9`` can lose only the sample being taken, never cut one already written; the
reader still accepts a last line cut short (a full disk) and says so.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop import __version__
from pitstop.errors import UsageError
from pitstop.fileio import check_output_path
from pitstop.monitor.snapshot import SCHEMA_NAME, SCHEMA_VERSION, check_snapshot
from pitstop.schema import BadJSON, parse_json

__all__ = ["FORMATS", "RECORDING_SCHEMA", "Recorder", "Recording", "check_record_path",
           "flatten", "read_recording", "unflatten"]

RECORDING_SCHEMA = "pitstop.monitor.recording"
FORMATS = {".jsonl": "jsonl", ".csv": "csv"}
Snapshot = dict[str, Any]

# Snapshot keys a CSV row leaves out: tables and texts that do not fit one row.
_CSV_SKIP = ("processes", "other_processes", "unmatched_gpu_processes", "sources", "notes")


def _format_of(path: Path, option: str) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(f"{option} {path}: unknown extension {path.suffix or '(none)'!r}; "
                         "use .jsonl (everything) or .csv (one column per number)")
    return fmt


def check_record_path(path: Path, *, overwrite: bool = False, option: str = "--record") -> str:
    """Check ``--record PATH`` before anything starts; return its format."""
    fmt = _format_of(path, option)
    check_output_path(path, what="the recording", option=option)
    if path.exists() and not overwrite:
        raise UsageError(f"{option} {path}: the file exists; choose a new name or add "
                         "--overwrite to replace it")
    return fmt


# ---------------------------------------------------------------------------- CSV shape
def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def flatten(snap: Snapshot) -> dict[str, Any]:
    """One CSV row: dotted column names -> scalars (see the module docstring)."""
    row: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if _scalar(value):
            row[prefix] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(value, list):
            if prefix.endswith("clocks_event_names"):
                row[prefix] = "|".join(map(str, value))
            elif prefix == "disks":
                for d in value:
                    walk(f"disks.{d['name']}", {k: v for k, v in d.items() if k != "name"})
            elif prefix == "verdicts":
                for i, v in enumerate(value[:1]):
                    walk(f"verdicts.{i}", {k: v[k] for k in ("verdict", "line", "pid") if k in v})
            elif prefix == "gpus":
                for g in value:
                    walk(f"gpus.{g['index']}", g)
            elif all(_scalar(v) for v in value):
                for i, v in enumerate(value):
                    row[f"{prefix}.{i}"] = v

    walk("", {k: v for k, v in snap.items() if k not in _CSV_SKIP})
    return row


def _parse_cell(text: str) -> Any:
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _put(target: dict[str, Any], parts: list[str], value: Any) -> None:
    for p in parts[:-1]:
        target = target.setdefault(p, {})
    target[parts[-1]] = value


def unflatten(row: dict[str, str]) -> Snapshot:
    """A snapshot back from a CSV row (numbers parsed; processes are not in a CSV)."""
    snap: Snapshot = {"processes": [], "other_processes": [], "unmatched_gpu_processes": [],
                      "sources": {}, "gpus": [], "disks": [], "verdicts": [], "notes": [],
                      "cpu": {}}
    disks: dict[str, dict[str, Any]] = {}
    gpus: dict[int, dict[str, Any]] = {}
    lists: dict[tuple[int | None, tuple[str, ...]], dict[int, Any]] = {}
    for column, text in row.items():
        if column is None:
            continue
        value = _parse_cell(text or "")
        parts = column.split(".")
        gpu: int | None = None
        if parts[0] == "disks" and len(parts) == 3:
            disks.setdefault(parts[1], {"name": parts[1]})[parts[2]] = value
            continue
        if parts[0] == "verdicts" and len(parts) == 3 and parts[1].isdigit():
            while len(snap["verdicts"]) <= int(parts[1]):
                snap["verdicts"].append({"gpus": []})
            snap["verdicts"][int(parts[1])][parts[2]] = value
            continue
        if parts[0] == "gpus" and len(parts) >= 3 and parts[1].isdigit():
            gpu = int(parts[1])
            gpus.setdefault(gpu, {})
            parts = parts[2:]
        if len(parts) > 1 and parts[-1].isdigit():
            lists.setdefault((gpu, tuple(parts[:-1])), {})[int(parts[-1])] = value
            continue
        if parts[-1] == "clocks_event_names":
            value = [n for n in str(value or "").split("|") if n]
        _put(gpus[gpu] if gpu is not None else snap, parts, value)
    for (gpu, path), items in lists.items():
        _put(gpus[gpu] if gpu is not None else snap, list(path), [items[i] for i in sorted(items)])
    snap["disks"] = list(disks.values())
    snap["gpus"] = [gpus[i] for i in sorted(gpus)]
    for g in snap["gpus"]:
        g.setdefault("gpm", None)
    return snap


# ---------------------------------------------------------------------------- writing
class Recorder:
    """Appends each snapshot to ``path`` as one line, written whole (see the module docstring)."""

    def __init__(self, path: Path, *, interval_s: float, command: list[str] | None = None) -> None:
        self.path = path
        self.format = _format_of(path, "--record")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._columns: list[str] | None = None
        self.samples = 0
        self.bytes = 0
        if self.format == "jsonl":
            self._write_line(json.dumps({
                "schema": RECORDING_SCHEMA, "version": 1, "snapshot_schema": SCHEMA_NAME,
                "snapshot_version": SCHEMA_VERSION, "pitstop": __version__,
                "interval_s": interval_s, "command": command or []}))

    def _write_line(self, line: str) -> None:
        data = (line.rstrip("\n") + "\n").encode("utf-8")
        view = memoryview(data)
        while view:  # a regular file takes it in one call; the loop is for the rare short write
            n = os.write(self._fd, view)
            view = view[n:]
        self.bytes += len(data)

    def write(self, snap: Snapshot) -> None:
        if self.format == "jsonl":
            self._write_line(json.dumps(snap, separators=(",", ":")))
        else:
            row = flatten(snap)
            buf = io.StringIO()
            if self._columns is None:
                self._columns = list(row)
                csv.writer(buf, lineterminator="\n").writerow(self._columns)
            csv.writer(buf, lineterminator="\n").writerow(
                ["" if row.get(c) is None else row[c] for c in self._columns])
            self._write_line(buf.getvalue())
        self.samples += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# ---------------------------------------------------------------------------- reading
@dataclass
class Recording:
    path: Path
    format: str
    header: dict[str, Any]
    snapshots: list[Snapshot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return self.snapshots[-1]["t"] - self.snapshots[0]["t"] if self.snapshots else 0.0


# One snapshot is ~10 KB (a few hundred processes: ~200 KB); a longer line is not one.
MAX_LINE_CHARS = 16 << 20


def _lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, ends with a newline); a line is never read past
    :data:`MAX_LINE_CHARS` into memory."""
    with open(path, encoding="utf-8", errors="strict", newline="") as fh:
        for n in itertools.count(1):
            line = fh.readline(MAX_LINE_CHARS + 1)
            if not line:
                return
            if len(line) > MAX_LINE_CHARS:
                raise _bad(path, f"line {n} is longer than {MAX_LINE_CHARS >> 20} M characters")
            yield n, line.rstrip("\r\n"), line.endswith("\n")


def _bad(path: Path, what: str) -> UsageError:
    return UsageError(f"{path}: {what}; is it a recording made by `pitstop monitor --record`?")


def _read_jsonl(path: Path) -> Recording:
    rec: Recording | None = None
    for n, text, complete in _lines(path):
        if not text.strip():
            continue
        try:
            obj = parse_json(text)  # bounded depth, no NaN: what the schema says a number is
        except BadJSON as err:
            if rec is not None and not complete:  # the very last line, cut short
                rec.notes.append(f"line {n} was cut short (the recorder stopped mid-line); "
                                 "it is left out")
                break
            raise _bad(path, f"line {n} is {err}" if str(err).startswith("not JSON") else
                       f"line {n}: {err}") from None
        if rec is None:
            if not isinstance(obj, dict) or obj.get("schema") != RECORDING_SCHEMA:
                raise _bad(path, "line 1 is not a pitstop recording header")
            if not isinstance(obj.get("version"), int) or obj["version"] > 1:
                raise _bad(path, f"recording version {obj.get('version')!r} is newer than this "
                                 "pitstop reads (1)")
            rec = Recording(path, "jsonl", obj)
            continue
        why = check_snapshot(obj)
        if why:
            raise _bad(path, f"line {n}: {why}")
        rec.snapshots.append(obj)
    if rec is None:
        raise _bad(path, "the file is empty")
    return rec


def _read_csv(path: Path) -> Recording:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        if not {"schema", "version", "t"} <= set(columns):
            raise _bad(path, "the CSV header has no schema, version and t columns")
        rec = Recording(path, "csv", {"schema": RECORDING_SCHEMA, "version": 1, "columns": len(columns)})
        rows = list(reader)
    for n, row in enumerate(rows, 2):
        if None in row or any(v is None for v in row.values()):
            if n == len(rows) + 1:
                rec.notes.append(f"row {n} was cut short (the recorder stopped mid-line); "
                                 "it is left out")
                break
            raise _bad(path, f"row {n} has {'more' if None in row else 'fewer'} cells than the header")
        snap = unflatten(row)
        why = check_snapshot(snap)
        if why:
            raise _bad(path, f"row {n}: {why}")
        rec.snapshots.append(snap)
    return rec


def read_recording(path: str | Path, *, option: str = "") -> Recording:
    """Read a whole recording; a missing, empty or corrupt file is a :class:`UsageError`."""
    p = Path(path)
    named = f"{option} {p}".strip()
    fmt = _format_of(p, option or "recording")
    if not p.is_file():
        raise UsageError(f"{named}: no such file" if not p.exists() else f"{named}: not a file")
    try:
        rec = _read_jsonl(p) if fmt == "jsonl" else _read_csv(p)
    except UnicodeDecodeError:
        raise _bad(p, "it is not UTF-8 text") from None
    except OSError as err:
        raise UsageError(f"{named}: cannot read it ({err.strerror or err})") from None
    except csv.Error as err:
        raise _bad(p, f"not valid CSV ({err})") from None
    if not rec.snapshots:
        raise _bad(p, "it holds no sample")
    return rec
