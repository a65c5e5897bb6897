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
import json
from dataclasses import dataclass, field
from typing import Any

from pitstop import __version__
from pitstop.errors import UsageError
from pitstop.fileio import atomic_write_json
from pitstop.sysroot import Sysroot
from pitstop.system.actions import Action, action_from_dict

__all__ = ["STATE_PATH", "UNIT_PATH", "WANTS_LINK", "SavedEntry", "State"]

STATE_PATH = "/var/lib/pitstop/state.json"
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
        """The saved state, ``None`` if there is none; UsageError if it is unreadable."""
        path = sr.path(STATE_PATH)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read the saved state {path}: {err}; "
                             "inspect or remove it by hand") from None
        try:
            entries = [SavedEntry(str(e["setting"]), str(e["target"]),
                                  str(e.get("previous", "")), action_from_dict(e["undo"]))
                       for e in doc["entries"]]
            persist = [str(p) for p in doc.get("persist", [])]
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"the saved state {path} is malformed ({err}); "
                             "inspect or remove it by hand") from None
        return State(entries, persist, str(doc.get("created", "")))

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
