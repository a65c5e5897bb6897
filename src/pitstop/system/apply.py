"""Apply and revert: the only code in pitstop that changes a machine's OS settings.

The order of events in :func:`apply_changes` is the safety argument:

1. the undo of every target is added to the saved state (targets saved by an earlier
   ``apply`` keep their original undo), and the state file is written atomically —
   if that fails, nothing is changed;
2. the changes run one by one, in the table's order;
3. at the first failure (or Ctrl-C), the changes already made *in this run* are undone (each to
   the value it had just before this run) and the state file is put back as it was
   before this run, keeping only entries whose undo failed (so ``revert`` can retry).

Who may change a machine: root (euid 0). A fake tree given with ``--sysroot`` may also
be changed by the user who owns its top directory — the tree is that user's "machine",
as ``/`` is root's. The live machine always needs euid 0.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from pitstop.errors import UsageError
from pitstop.sysroot import Sysroot
from pitstop.system.actions import ActionError, perform
from pitstop.system.machine import read_gpus
from pitstop.system.settings import SETTING_NAMES, Change
from pitstop.system.state import STATE_PATH, UNIT_PATH, WANTS_LINK, SavedEntry, State

__all__ = ["Outcome", "apply_changes", "exclusive", "may_change", "revert_state", "unit_text"]


def may_change(sr: Sysroot) -> str:
    """``""`` when this process may change the machine under ``sr``, else why not."""
    euid = os.geteuid()
    if euid == 0:
        return ""
    if sr.is_live:
        return f"changing OS settings needs root (you are uid {euid})"
    try:
        owner = sr.root.stat().st_uid
    except OSError as err:
        return f"cannot stat {sr.root}: {err.strerror}"
    if owner == euid:
        return ""
    return f"the tree {sr.root} belongs to uid {owner} and you are uid {euid} (not root)"


@dataclass
class Outcome:
    """What an apply or revert did; ``ok`` is False when anything failed."""

    done: list[str] = field(default_factory=list)  # descriptions of what was carried out
    skipped: list[str] = field(default_factory=list)  # blocked changes, with the reason
    failed: str = ""  # the change that failed, with the error
    rolled_back: list[str] = field(default_factory=list)
    rollback_failed: list[str] = field(default_factory=list)
    persisted: list[str] = field(default_factory=list)
    state_path: str = ""
    state_removed: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed and not self.rollback_failed

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "done": self.done, "skipped": self.skipped,
                "failed": self.failed, "rolled_back": self.rolled_back,
                "rollback_failed": self.rollback_failed, "persisted": self.persisted,
                "state_path": self.state_path, "state_removed": self.state_removed}


@contextlib.contextmanager
def exclusive(sr: Sysroot) -> Iterator[None]:
    """Hold an exclusive lock on the state directory while reading the plan, saving
    and changing, so that two applies (or an apply and a revert) cannot interleave.

    Raises ``OSError`` when the state directory cannot be created (then nothing may be
    changed) and :class:`UsageError` when another run holds the lock.
    """
    directory = sr.path(STATE_PATH).parent
    directory.mkdir(parents=True, exist_ok=True)  # OSError: state cannot be saved here
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError("another `pitstop system apply/revert` is running on this "
                             "machine; wait for it to finish") from None
        yield
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty: leave no trace when nothing was saved


def _order(setting: str) -> int:
    return SETTING_NAMES.index(setting) if setting in SETTING_NAMES else len(SETTING_NAMES)


def _verify(sr: Sysroot, change: Change) -> None:
    """Read a GPU value back after its command; raise ActionError if it did not change."""
    if change.expect is None:
        return
    index, attr, wanted = change.expect
    gpus, reason = read_gpus(sr)
    gpu = next((g for g in gpus if g.index == index), None)
    if gpu is None:
        raise ActionError(f"{change.action.describe()}: cannot read GPU {index} back ({reason})")
    got = getattr(gpu, attr)
    same = (abs(got - wanted) < 0.5 if isinstance(wanted, float) and isinstance(got, float)
            else got == wanted)
    if not same:
        raise ActionError(f"{change.action.describe()}: the command succeeded but GPU {index} "
                          f"{attr} is still {got} (wanted {wanted})")


def unit_text(argv: list[str]) -> str:
    """The systemd unit that re-applies the same ``pitstop system apply`` at boot."""
    exec_start = " ".join(shlex.quote(a) for a in argv)
    return (
        "# Written by `pitstop system apply --persist`; `pitstop system revert` removes it.\n"
        "[Unit]\n"
        "Description=pitstop: OS settings for training (pitstop system apply)\n"
        "After=local-fs.target nvidia-persistenced.service\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={exec_start}\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def boot_argv(sr: Sysroot, names: tuple[str, ...], data_path: str | None) -> list[str]:
    """The command the unit runs: the same settings, applied, without --persist."""
    argv = [sys.executable, "-m", "pitstop", "system", "apply", "--profile", "training",
            "--yes"]
    if set(names) != set(SETTING_NAMES):
        argv += ["--only", ",".join(names)]
    if data_path:
        argv += ["--data", data_path]
    if not sr.is_live:
        argv += ["--sysroot", str(sr.root)]
    return argv


def _write_unit(sr: Sysroot, text: str) -> list[str]:
    """Install the unit and enable it (the link `systemctl enable` makes); returns the
    machine paths created."""
    from pitstop.fileio import atomic_write_text

    created = []
    existed = sr.path(UNIT_PATH).exists()
    sr.path(UNIT_PATH).parent.mkdir(parents=True, exist_ok=True)  # a machine folder, not a user's
    atomic_write_text(sr.path(UNIT_PATH), text)
    if not existed:
        created.append(UNIT_PATH)
    link = sr.path(WANTS_LINK)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        os.symlink(UNIT_PATH, link)
        created.append(WANTS_LINK)
    return created


def _remove_paths(sr: Sysroot, paths: list[str]) -> list[str]:
    removed = []
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            sr.path(p).unlink()
            removed.append(p)
    return removed


def apply_changes(sr: Sysroot, changes: list[Change], *, persist_unit: str | None = None
                  ) -> Outcome:
    """Save the undo of every change, then make them; roll back at the first failure.

    Call it inside :func:`exclusive`, around reading the plan as well.
    ``persist_unit``: the unit file text to install as well (``--persist``).
    Raises ``OSError`` when the state file cannot be written (nothing was changed).
    """
    out = Outcome(state_path=STATE_PATH)
    runnable = [c for c in changes if not c.blocked]
    out.skipped = [f"{c.setting} {c.target}: {c.blocked}" for c in changes if c.blocked]
    if not runnable and persist_unit is None:
        return out
    before = State.load(sr)
    state = State.load(sr) or State()
    saved = state.keys()
    for c in runnable:
        if (c.setting, c.target) not in saved:
            state.entries.append(SavedEntry(c.setting, c.target, c.current, c.undo))
    state.entries.sort(key=lambda e: _order(e.setting))  # stable: table order, then target
    if persist_unit is not None:
        state.persist = sorted(set(state.persist) | {UNIT_PATH, WANTS_LINK})
    state.save(sr)  # before any change: if this raises, nothing has been touched

    done: list[Change] = []
    for c in runnable:
        try:
            perform(sr, c.action)
            _verify(sr, c)
        except ActionError as err:
            out.failed = f"{c.setting} {c.target}: {err}"
            break
        except KeyboardInterrupt:  # Ctrl-C half-way: undo this run like any failure
            out.failed = f"{c.setting} {c.target}: interrupted (Ctrl-C) during " \
                         f"{c.action.describe()}"
            break
        done.append(c)
        out.done.append(f"{c.setting} {c.target}: {c.action.describe()}")

    created: list[str] = []
    if not out.failed and persist_unit is not None:
        try:
            created = _write_unit(sr, persist_unit)
            out.persisted = created
        except OSError as err:
            out.failed = f"--persist: cannot write {UNIT_PATH}: {err.strerror or err}"

    if not out.failed:
        return out

    # Roll back this run, in table order (see settings.py for why not reversed).
    _remove_paths(sr, created)
    still_saved: list[SavedEntry] = []
    for c in done:
        try:
            perform(sr, c.undo)
            out.rolled_back.append(f"{c.setting} {c.target}: {c.undo.describe()}")
        except ActionError as err:
            out.rollback_failed.append(f"{c.setting} {c.target}: {err}")
            still_saved.append(SavedEntry(c.setting, c.target, c.current, c.undo))
    restored = before or State()
    known = restored.keys()
    restored.entries += [e for e in still_saved if e.key not in known]
    if restored.entries or restored.persist:
        try:
            restored.save(sr)
        except OSError as err:  # the state saved at the start still lists every value
            out.rollback_failed.append(f"cannot update {STATE_PATH}: {err.strerror or err}")
    else:
        State.remove(sr)
        out.state_removed = True
    return out


def revert_state(sr: Sysroot) -> Outcome | None:
    """Carry out every saved undo (table order); remove the state file when all worked.

    ``None`` when there is nothing saved.
    """
    if State.load(sr) is None:
        return None
    with exclusive(sr):
        state = State.load(sr)
        if state is None:  # another revert finished first
            return None
        return _revert_locked(sr, state)


def _revert_locked(sr: Sysroot, state: State) -> Outcome:
    out = Outcome(state_path=STATE_PATH)
    failed: list[SavedEntry] = []
    for e in sorted(state.entries, key=lambda e: _order(e.setting)):
        try:
            perform(sr, e.undo)
            out.done.append(f"{e.setting} {e.target}: {e.undo.describe()}")
        except ActionError as err:
            failed.append(e)
            out.rollback_failed.append(f"{e.setting} {e.target}: {err}")
    out.persisted = _remove_paths(sr, state.persist)
    if failed:
        with contextlib.suppress(OSError):  # else the old file, a superset, stays
            State(failed, [], state.created).save(sr)
        out.failed = f"{len(failed)} of {len(state.entries)} values could not be restored"
    else:
        State.remove(sr)
        out.state_removed = True
    return out
