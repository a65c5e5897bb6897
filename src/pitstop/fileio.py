"""Writing files the way editors save them: a crash, a full disk or Ctrl-C halfway
leaves the old content or the new one, never a mixture, and the file keeps what makes
it the user's: its mode, owner and group, extended attributes (ACLs, SELinux labels),
the symlink that points at it and the other names (hard links) it has.

One helper does it, :func:`atomic_write_bytes` (with ``_text`` and ``_json`` flavours),
for every file pitstop writes or rewrites: ``lint --fix`` on source files, reports,
saved state. How:

* A symlink is followed: its target is rewritten, the link stays a link.
* A file the user may not write is refused (:class:`WriteRefused`) and left untouched,
  judged as an editor judges it rather than by what root could force: a file without
  any write bit is read-only for root too, as in vim.
* The usual case (one link, and this process can give a new file the same owner and
  group) writes a temp file beside the target, flushed and fsynced, with the target's
  mode, owner, group and extended attributes, then renames it over the target (atomic
  on POSIX filesystems) and syncs the folder.
* Otherwise (hard links, a file owned by another user that this user may write) the
  inode must stay, so the new content goes in place, as vim's ``backupcopy=yes`` does:
  a backup copy first, then one write with signals held back, then the backup goes. A
  failed write (a full disk) puts the old content back; a kill -9 halfway leaves the
  backup ``.NAME.pitstop-backup-*`` beside the file.
* Nothing creates folders: the parent of a new file must exist (a typo in a folder
  name fails instead of producing the folder).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError
from pitstop.signals import deferred

__all__ = ["WriteRefused", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "check_output_dir", "check_output_path", "write_refusal"]


class WriteRefused(PermissionError):
    """The user may not write this file; the message says why (and names it)."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(errno.EACCES, reason, os.fspath(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def write_refusal(path: str | os.PathLike[str], st: os.stat_result | None = None) -> str | None:
    """Why the user may not rewrite the existing file ``path``; ``None`` when they may.

    Not root's bypass: root, like an editor, treats a file without any write bit as
    read-only. Anyone else needs write permission by the effective ids.
    """
    try:
        st = st or os.stat(path)
    except OSError as err:
        return err.strerror or str(err)
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if os.geteuid() == 0:
        if mode & 0o222 == 0:
            return f"read-only (mode {mode:04o}); make it writable (chmod u+w) to let pitstop change it"
        return None
    if not _may(path, os.W_OK):
        if st.st_uid == os.geteuid():
            return (f"you may not write it (mode {mode:04o}, owned by you); make it writable "
                    "(chmod u+w) to let pitstop change it")
        return (f"you may not write it (mode {mode:04o}, owned by {_user(st.st_uid)}); run "
                "pitstop as a user who may, or ask the owner")
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _may(path: str | os.PathLike[str], mode: int) -> bool:
    """``os.access`` by the effective ids (as the kernel will judge the write)."""
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # no /proc: the classic read-and-restore
    os.umask(old)
    return old


def _write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    view = memoryview(data)
    done = 0
    while done < len(view):
        if offset is None:
            n = os.write(fd, view[done:])
        else:
            n = os.pwrite(fd, view[done:], offset + done)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        done += n


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _CannotKeep(Exception):
    """A new file could not be given the old one's owner, group or attributes."""


def _copy_metadata(target: Path, st: os.stat_result, fd: int) -> None:
    try:
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, st.st_uid if os.geteuid() == 0 else -1, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode))  # after chown, which clears setuid bits
    except PermissionError as err:
        raise _CannotKeep(str(err)) from None
    try:
        names = os.listxattr(target)
    except OSError:  # no extended attributes on this filesystem
        return
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(target, name))
        except OSError as err:
            raise _CannotKeep(f"extended attribute {name}: {err.strerror}") from None


def _new_file_beside(target: Path, data: bytes, st: os.stat_result | None) -> str:
    """A temp file in ``target``'s folder holding ``data``, synced, with ``st``'s
    metadata (or a new file's mode); returns its path. Removed again on any failure."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".pitstop-tmp",
                               dir=target.parent)
    try:
        try:
            _write_all(fd, data)
            if st is None:
                os.fchmod(fd, 0o666 & ~_umask())
            else:
                _copy_metadata(target, st, fd)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _replace(target: Path, data: bytes, st: os.stat_result | None) -> None:
    tmp = _new_file_beside(target, data, st)
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(target.parent)


def _overwrite_in_place(target: Path, data: bytes, old: bytes) -> None:
    """Keep the inode (hard links, a foreign owner): backup, one write, backup gone."""
    backup: str | None = None
    with contextlib.suppress(OSError):  # a folder we may not write: no backup, as vim
        backup = _new_file_beside(target, old, None)
    fd = os.open(target, os.O_WRONLY)
    try:
        try:
            with deferred():  # Ctrl-C or SIGTERM cannot split the write from the truncate
                _write_all(fd, data, 0)
                os.ftruncate(fd, len(data))
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError), deferred():  # a full disk: put the old back
                _write_all(fd, old, 0)
                os.ftruncate(fd, len(old))
            raise
    finally:
        os.close(fd)
    if backup is not None:
        with contextlib.suppress(OSError):
            os.unlink(backup)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *,
                       expected: bytes | None = None) -> None:
    """Write ``data`` to ``path`` the way an editor saves (see the module docstring).

    ``expected``: the content the caller read and changed; when the file holds something
    else now (edited meanwhile), nothing is written. Raises :class:`WriteRefused` for a
    file the user may not write or that changed, ``OSError`` for anything else; the file
    is then as it was.
    """
    target = Path(os.path.realpath(path))  # a symlink: rewrite its target, keep the link
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is None:
        _replace(target, data, None)
        return
    refusal = write_refusal(target, st)
    if refusal:
        raise WriteRefused(path, refusal)
    old = target.read_bytes()
    if expected is not None and old != expected:
        raise WriteRefused(path, "changed since pitstop read it; nothing written, run again")
    euid = os.geteuid()
    folder_writable = _may(target.parent, os.W_OK | os.X_OK)
    if st.st_nlink == 1 and folder_writable and euid in (0, st.st_uid):
        try:
            _replace(target, data, st)
            return
        except _CannotKeep:
            pass  # a new file cannot look like the old one: keep the old inode instead
    _overwrite_in_place(target, data, old)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """Text flavour of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON (with a trailing newline), as :func:`atomic_write_bytes`."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def check_output_path(path: str | os.PathLike[str], *, what: str, option: str | None = None) -> Path:
    """Check, before any work starts, that ``path`` can be written as an output file.

    The parent folder must already exist and be writable; nothing is created, so a typo
    in a folder name fails at once instead of producing a folder (or failing after a
    long run). ``what`` names the output in the message ("the JSON report"), ``option``
    the command-line option that gave it. Returns the path, unchanged, as a ``Path``.

    Raises :class:`~pitstop.errors.UsageError` with a one-line message naming the path.
    """
    target = Path(path)
    named = f"{option} {target}" if option else str(target)
    if str(path) == "" or target.name in ("", ".", ".."):
        raise UsageError(f"{named}: {what} needs a file name")
    if target.is_dir():
        raise UsageError(f"{named}: is a folder; give a file path for {what}")
    parent = target.parent
    if not parent.exists():
        raise UsageError(f"{named}: folder {parent} does not exist; create it first or choose another path for {what}")
    if not parent.is_dir():
        raise UsageError(f"{named}: {parent} is not a folder")
    # Try it for real: permission bits say nothing for root, nor on /proc or a
    # read-only mount. The probe is removed at once; an existing file is opened for
    # appending and closed, which leaves its contents and times as they were.
    if target.exists():
        refusal = write_refusal(target)
        if refusal:
            raise UsageError(f"{named}: {refusal}; or choose another path for {what}")
    try:
        if target.exists():
            os.close(os.open(target, os.O_WRONLY | os.O_APPEND))
        else:
            fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UsageError(f"{named}: cannot write there ({reason}); choose another path for {what}") from None
    return target


def check_output_dir(path: str | os.PathLike[str], *, what: str, option: str | None = None) -> Path:
    """Check, before any work starts, that ``path`` can be an output folder: an existing
    writable folder, or a new one whose parent exists (only ``path`` itself will be
    made, never its parents). Raises :class:`~pitstop.errors.UsageError` naming it."""
    target = Path(path)
    named = f"{option} {target}" if option else str(target)
    if str(path) == "":
        raise UsageError(f"{named}: {what} needs a folder name")
    if target.exists() and not target.is_dir():
        raise UsageError(f"{named}: exists and is not a folder; give a folder for {what}")
    probe_in = target if target.is_dir() else target.parent
    if not probe_in.is_dir():
        raise UsageError(f"{named}: folder {probe_in} does not exist; create it first or "
                         f"choose another path for {what}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".pitstop-", suffix=".probe", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UsageError(f"{named}: cannot write there ({reason}); choose another path for "
                         f"{what}") from None
    return target
