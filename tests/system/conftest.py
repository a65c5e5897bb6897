"""Fixtures for `pitstop system` tests: copies of the fake machines and tree digests.

The trees under machines/ are hand-made (see machines/make_machines.py and each
ORIGIN.txt). Tests always work on a copy, so a test can never change the fixtures.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

MACHINES = Path(__file__).resolve().parent / "machines"


def copy_machine(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(MACHINES / name, root, symlinks=True)
    return root


def tree_digest(root: Path) -> dict[str, tuple[str, ...]]:
    """Every file and symlink under root: content hash and mode, or link target.

    Directories are not values, so an empty directory left behind does not count;
    symlinks are never followed (some point out of the tree on purpose).
    """
    out: dict[str, tuple[str, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames + dirnames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_file():
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(),
                            oct(st.st_mode & 0o7777))
    return out


@pytest.fixture
def machine(tmp_path: Path) -> Callable[[str], Path]:
    """``machine("workstation-4090")`` -> a fresh copy of that fake machine tree."""
    return lambda name: copy_machine(name, tmp_path)


@pytest.fixture
def digest() -> Callable[[Path], dict[str, tuple[str, ...]]]:
    return tree_digest
