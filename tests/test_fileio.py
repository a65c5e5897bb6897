"""The shared output-path check: typos fail at once and nothing is created."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pitstop.errors import UsageError
from pitstop.fileio import check_output_path


def test_missing_folder_is_refused_and_not_created(tmp_path: Path) -> None:
    target = tmp_path / "typo" / "x.json"
    with pytest.raises(UsageError, match="does not exist"):
        check_output_path(target, what="the JSON report", option="--json")
    assert not (tmp_path / "typo").exists()


def test_folder_given_as_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder"):
        check_output_path(tmp_path, what="the JSON report")


def test_unwritable_place_is_refused_before_work() -> None:
    with pytest.raises(UsageError, match="cannot write there"):
        check_output_path("/proc/pitstop-x.json", what="the JSON report", option="--json")


def test_writable_path_passes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    assert check_output_path(target, what="the JSON report") == target
    assert os.listdir(tmp_path) == []


def test_existing_file_is_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    before = target.stat()
    check_output_path(target, what="the JSON report")
    assert target.read_text() == "old"
    assert target.stat().st_mtime_ns == before.st_mtime_ns


# ---------------------------------------------------------------- saving like an editor

from pitstop_testing import fill, tiny_tmpfs  # noqa: E402

from pitstop.fileio import WriteRefused, atomic_write_bytes, check_output_dir  # noqa: E402

OLD, NEW = b"print('old')\n", b"print('new, and longer than the old one')\n"


def test_a_symlink_stays_a_link_and_its_target_is_rewritten(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(OLD)
    link = tmp_path / "link.py"
    link.symlink_to("real.py")
    atomic_write_bytes(link, NEW, expected=OLD)
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert real.read_bytes() == NEW
    assert sorted(os.listdir(tmp_path)) == ["link.py", "real.py"]


def test_hard_links_keep_sharing_one_inode(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_bytes(OLD)
    os.link(a, b)
    inode = a.stat().st_ino
    atomic_write_bytes(a, NEW)
    assert a.stat().st_ino == inode == b.stat().st_ino and a.stat().st_nlink == 2
    assert b.read_bytes() == NEW
    assert sorted(os.listdir(tmp_path)) == ["a.py", "b.py"]  # the backup copy is gone


def test_mode_and_extended_attributes_are_kept(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_bytes(OLD)
    f.chmod(0o2750)
    try:
        os.setxattr(f, "user.pitstop-test", b"kept")
    except OSError:
        xattr = False
    else:
        xattr = True
    atomic_write_bytes(f, NEW)
    assert (f.stat().st_mode & 0o7777) == 0o2750
    if xattr:
        assert os.getxattr(f, "user.pitstop-test") == b"kept"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another user")
def test_root_keeps_another_users_owner_and_group(tmp_path: Path) -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    f = tmp_path / "theirs.py"
    f.write_bytes(OLD)
    os.chown(f, nobody.pw_uid, nobody.pw_gid)
    atomic_write_bytes(f, NEW)
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    assert f.read_bytes() == NEW


def test_a_read_only_file_is_refused_even_for_root_and_left_alone(tmp_path: Path) -> None:
    f = tmp_path / "locked.py"
    f.write_bytes(OLD)
    f.chmod(0o444)
    before = f.stat()
    with pytest.raises(WriteRefused, match=r"locked.py: read-only \(mode 0444\)|may not write"):
        atomic_write_bytes(f, NEW)
    assert f.read_bytes() == OLD and f.stat().st_mtime_ns == before.st_mtime_ns
    assert os.listdir(tmp_path) == ["locked.py"]


def test_a_file_edited_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_bytes(b"edited by the user\n")
    with pytest.raises(WriteRefused, match="changed since pitstop read it"):
        atomic_write_bytes(f, NEW, expected=OLD)
    assert f.read_bytes() == b"edited by the user\n"


def test_a_new_file_follows_the_umask_and_needs_its_folder(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "new.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "typo" / "new.json", b"{}")
    assert not (tmp_path / "typo").exists()


@pytest.fixture
def tiny_filesystem(tmp_path: Path):
    """A real 64 KiB tmpfs (root only): writes beyond it fail with ENOSPC."""
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        yield mnt


@pytest.mark.parametrize("hard_linked", [False, True])
def test_a_full_disk_halfway_leaves_the_old_content(tiny_filesystem: Path,
                                                    hard_linked: bool) -> None:
    f = tiny_filesystem / "train.py"
    f.write_bytes(b"x" * 16384)
    if hard_linked:  # written in place: the first bytes fit, the rest does not
        os.link(f, tiny_filesystem / "other-name.py")
    fill(tiny_filesystem)
    with pytest.raises(OSError) as info:
        atomic_write_bytes(f, b"y" * 65536)
    assert info.value.errno == errno.ENOSPC
    assert f.read_bytes() == b"x" * 16384
    leftovers = {p.name for p in tiny_filesystem.iterdir()} - {"train.py", ".filler",
                                                                "other-name.py"}
    assert leftovers == set()


def test_killed_halfway_the_file_holds_the_old_or_the_new_content(tmp_path: Path) -> None:
    """SIGKILL (no cleanup at all) at random moments of a child that saves in a loop."""
    import signal
    import subprocess
    import sys
    import time

    f = tmp_path / "train.py"
    f.write_bytes(OLD)
    script = ("import sys\nfrom pitstop.fileio import atomic_write_bytes\n"
              "a, b = sys.argv[2].encode() * 2000, sys.argv[3].encode() * 3000\n"
              "print('ready', flush=True)\n"
              "while True:\n    atomic_write_bytes(sys.argv[1], a)\n"
              "    atomic_write_bytes(sys.argv[1], b)\n")
    from pitstop_testing import pitstop_env

    for i in range(8):
        child = subprocess.Popen([sys.executable, "-c", script, str(f), "A", "B"],
                                 stdout=subprocess.PIPE, env=pitstop_env())
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(0.01 * i)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert f.read_bytes() in (OLD, b"A" * 2000, b"B" * 3000)


def test_output_folder_may_be_new_but_its_parent_must_exist(tmp_path: Path) -> None:
    assert check_output_dir(tmp_path / "out", what="the profile") == tmp_path / "out"
    assert not (tmp_path / "out").exists()
    with pytest.raises(UsageError, match="does not exist"):
        check_output_dir(tmp_path / "typo" / "out", what="the profile", option="--out")
    assert not (tmp_path / "typo").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        check_output_dir(tmp_path / "file", what="the profile", option="--out")
