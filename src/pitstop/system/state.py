"""The saved previous state: what ``revert`` will restore.

One JSON file, ``/var/lib/pitstop/state.json`` on the machine (under the tree with
``--sysroot``), always written atomically (:func:`pitstop.fileio.atomic_write_json`).
It holds, for every target pitstop changed, the undo action captured *before* the first
write to it: the exact bytes the sysfs/procfs file held, or the command that restores
a GPU value. A later ``apply`` adds new targets but never overwrites a saved one, so
the file always describes the machine as it was before pitstop touched it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop import __version__
from pitstop.errors import UsageError
from pitstop.fileio import atomic_write_json
from pitstop.sysroot import Sysroot
from pitstop.system.actions import Action, FileWrite, action_from_dict
from pitstop.system.settings import BY_NAME, SETTING_NAMES

__all__ = ["STATE_PATH", "UNIT_PATH", "WANTS_LINK", "SavedEntry", "State"]

STATE_PATH = "/var/lib/pitstop/state.json"
MAX_STATE_BYTES = 1 << 20  # every CPU's settings of a 1024-core machine fit many times
UNIT_NAME = "pitstop-system.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
WANTS_LINK = f"/etc/systemd/system/multi-user.target.wants/{UNIT_NAME}"
FORMAT = 1


@dataclass(frozen=True)
class SavedEntry:
    """How to put one target back as it was."""

    setting: str
    target: str
    previous: str  # for people: the value it had
    undo: Action

    @property
    def key(self) -> tuple[str, str]:
        return (self.setting, self.target)

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "target": self.target, "previous": self.previous,
                "undo": self.undo.to_dict()}


@dataclass
class State:
    entries: list[SavedEntry] = field(default_factory=list)
    persist: list[str] = field(default_factory=list)  # machine paths of unit files we made
    created: str = ""

    def keys(self) -> set[tuple[str, str]]:
        return {e.key for e in self.entries}

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "written_by": f"pitstop {__version__}",
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(
                timespec="seconds"),
            "note": "pitstop system revert restores these values; do not edit",
            "entries": [e.to_dict() for e in self.entries],
            "persist": list(self.persist),
        }

    # ------------------------------------------------------------ files

    @staticmethod
    def load(sr: Sysroot) -> State | None:
        """The saved state, ``None`` if there is none.

        The file is a list of writes that root will carry out, so nothing in it is
        trusted: :class:`UsageError` (and the file left where it is) when it is not
        owned by root (in a fake tree: by root or the tree's owner), is group- or
        world-writable, is too large or too deep, has another format version, or holds
        an undo that the settings table does not manage or that resolves outside the
        tree.
        """
        from pitstop.schema import BadJSON, parse_json, read_bounded, validate

        path = sr.path(STATE_PATH)
        keep = "it was left as it is; inspect or remove it by hand"
        try:
            distrust = _distrust(sr, path)
            if distrust:
                raise UsageError(f"refusing the saved state {path}: {distrust}; {keep}")
            doc = parse_json(read_bounded(path, MAX_STATE_BYTES))
        except FileNotFoundError:
            return None
        except OSError as err:
            raise UsageError(f"cannot read the saved state {path}: {err.strerror or err}; "
                             f"{keep}") from None
        except BadJSON as err:
            raise UsageError(f"the saved state {path} is malformed ({err}); {keep}") from None
        if isinstance(doc, dict) and doc.get("format") != FORMAT:
            raise UsageError(f"the saved state {path} has format {doc.get('format')!r}; this "
                             f"pitstop reads format {FORMAT} only (a different pitstop wrote "
                             f"it?); {keep}")
        problem = validate(doc, STATE_SCHEMA)
        if problem:
            raise UsageError(f"the saved state {path} is malformed ({problem}); {keep}")
        try:
            entries = [SavedEntry(e["setting"], e["target"], e.get("previous", ""),
                                  action_from_dict(e["undo"])) for e in doc["entries"]]
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"the saved state {path} is malformed ({err}); {keep}") from None
        for e in entries:
            unmanaged = _unmanaged(sr, e)
            if unmanaged:
                raise UsageError(f"refusing the saved state {path}: {unmanaged}; nothing was "
                                 f"changed, {keep}")
        return State(entries, list(doc.get("persist", [])), str(doc.get("created", "")))

    def save(self, sr: Sysroot) -> None:
        """Write atomically; raises OSError when it cannot (then nothing may be changed)."""
        if not self.created:
            self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        atomic_write_json(sr.path(STATE_PATH), self.to_dict())

    @staticmethod
    def remove(sr: Sysroot) -> None:
        """Delete the state file (and its directory, when pitstop left nothing else there)."""
        path = sr.path(STATE_PATH)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()


# ---------------------------------------------------------------- trust

STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "entries"],
    "properties": {
        "format": {"const": FORMAT},
        "written_by": {"type": "string"},
        "created": {"type": "string"},
        "note": {"type": "string"},
        "entries": {"type": "array", "maxItems": 65536, "items": {
            "type": "object",
            "required": ["setting", "target", "undo"],
            "properties": {
                "setting": {"enum": list(SETTING_NAMES)},
                "target": {"type": "string", "maxLength": 4096},
                "previous": {"type": "string", "maxLength": 4096},
                "undo": {
                    "type": "object",
                    "required": ["kind"],
                    "properties": {
                        "kind": {"enum": ["write", "run"]},
                        "path": {"type": "string", "maxLength": 4096},
                        "text": {"type": "string"},
                        "data_b64": {"type": "string", "maxLength": 65536},
                        "argv": {"type": "array", "minItems": 1, "maxItems": 64,
                                 "items": {"type": "string", "maxLength": 4096}},
                    },
                },
            },
        }},
        "persist": {"type": "array", "items": {"enum": [UNIT_PATH, WANTS_LINK]}},
    },
}


def _trusted_owners(sr: Sysroot) -> set[int]:
    """Who may have written the state: root; in a fake tree also the tree's owner (the
    tree is that user's machine, as in :func:`pitstop.system.apply.may_change`)."""
    owners = {0}
    if not sr.is_live:
        with contextlib.suppress(OSError):
            owners.add(sr.root.stat().st_uid)
    return owners


def _distrust(sr: Sysroot, path: Path) -> str:
    """Why the state file (or its folder) cannot be trusted; "" when it can.
    ``FileNotFoundError`` when there is no state file."""
    owners = _trusted_owners(sr)
    for p, what in ((path.parent, "its folder"), (path, "it")):
        st = os.lstat(p)
        if p == path and not stat.S_ISREG(st.st_mode):
            return "it is not a regular file (a symlink?)"
        if st.st_uid not in owners:
            return f"{what} is owned by uid {st.st_uid}, not by root"
        if st.st_mode & 0o022:
            return (f"{what} is group- or world-writable (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}): anyone could have written it")
    return ""


def _unmanaged(sr: Sysroot, e: SavedEntry) -> str:
    """Why ``revert`` must not carry out ``e``'s undo ("" when it may)."""
    setting = BY_NAME[e.setting]
    undo = e.undo
    if not setting.manages(undo):
        return (f"the undo for {e.setting} ({undo.describe()}) is not a change pitstop makes "
                f"for that setting")
    if isinstance(undo, FileWrite):
        if len(undo.data) > 4096:
            return f"the undo for {e.setting} writes {len(undo.data)} bytes into {undo.path}"
        root = sr.root.resolve()
        try:
            resolved = sr.path(undo.path).resolve()
        except (OSError, RuntimeError) as err:
            return f"{undo.path} cannot be resolved ({err})"
        if resolved != root and root not in resolved.parents:
            return f"{undo.path} resolves to {resolved}, outside {root}"
    return ""
