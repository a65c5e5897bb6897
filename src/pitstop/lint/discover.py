"""Finding the files to lint: walk folders (following symlinks, once), honour .gitignore,
the default excludes and the configured ``exclude``; report what cannot be read."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from pitstop.lint.config import LintConfig
from pitstop.lint.model import Diagnostic

DEFAULT_EXCLUDES = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox",
                              ".nox", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                              "node_modules", ".ipynb_checkpoints", ".eggs"})
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class SourceFile:
    path: Path
    size: int
    rel: str = ""  # the path below the folder named on the command line ("" if named itself)

    @property
    def is_test(self) -> bool:
        """Test code: `tests/` below the linted folder, `test_*.py`, `*_test.py`,
        `conftest.py` (the folders above the named path do not count)."""
        from pitstop.lint.context import is_test_path

        return is_test_path(self.rel or self.path.name)


@dataclass(frozen=True)
class _Rule:
    base: Path
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def _glob_to_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse_gitignore(text: str, base: Path) -> list[_Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if not line:
            continue
        try:
            regex = re.compile(_glob_to_regex(line) + r"\Z")
        except re.error:
            continue
        rules.append(_Rule(base, regex, negate, dir_only, anchored))
    return rules


def ignored(rules: list[_Rule], path: Path, is_dir: bool) -> bool:
    result = False
    for r in rules:
        if r.dir_only and not is_dir:
            continue
        try:
            rel = path.relative_to(r.base).as_posix()
        except ValueError:
            continue
        subject = rel if r.anchored else path.name
        if r.regex.match(subject):
            result = not r.negate
    return result


def _ancestor_rules(start: Path) -> list[_Rule]:
    """The .gitignore files above ``start`` up to the top of its git repository."""
    rules: list[_Rule] = []
    chain = []
    for d in start.parents:
        chain.append(d)
        if (d / ".git").exists():
            break
    else:
        return []
    for d in reversed(chain):
        gi = d / ".gitignore"
        with contextlib.suppress(OSError):
            rules.extend(parse_gitignore(gi.read_text(encoding="utf-8", errors="replace"), d))
    return rules


def discover(paths: list[Path], config: LintConfig, *, respect_gitignore: bool = True
             ) -> tuple[list[SourceFile], list[Diagnostic]]:
    """Files to lint under ``paths`` (explicit files are always linted)."""
    files: list[SourceFile] = []
    diags: list[Diagnostic] = []
    seen_files: set[Path] = set()
    for top in paths:
        try:
            exists = top.exists()
        except OSError as err:
            diags.append(Diagnostic(str(top), f"cannot access: {err.strerror or err}",
                                    kind="input"))
            continue
        if not exists:
            if top.is_symlink():
                diags.append(Diagnostic(str(top), "broken or looping symbolic link",
                                        kind="input"))
            else:
                diags.append(Diagnostic(str(top), "no such file or directory", kind="input"))
            continue
        if not top.is_dir():
            key = top.resolve()
            if key not in seen_files:
                seen_files.add(key)
                try:
                    st = top.stat()
                    if not stat.S_ISREG(st.st_mode):
                        diags.append(not_a_file(str(top), st.st_mode))
                        continue
                    files.append(SourceFile(top, st.st_size, top.name))
                except OSError as err:
                    diags.append(Diagnostic(str(top), f"cannot read: {err.strerror or err}",
                                            kind="input"))
            continue
        rules = _ancestor_rules(top.resolve()) if respect_gitignore else []
        first = len(diags)
        _walk(top, rules, config, files, diags, seen_files, respect_gitignore)
        # The named folder itself unreadable is an input error; a folder inside it is
        # one more file-level diagnostic.
        diags[first:] = [replace(d, kind="input") if d.path == str(top) and d.kind == "error"
                         else d for d in diags[first:]]
    return files, diags


def _walk(top: Path, base_rules: list[_Rule], config: LintConfig, files: list[SourceFile],
          diags: list[Diagnostic], seen_files: set[Path], respect_gitignore: bool) -> None:
    visited: set[tuple[int, int]] = set()
    stack: list[tuple[Path, Path, list[_Rule]]] = [(top, top.resolve(), base_rules)]
    while stack:
        d, real_d, rules = stack.pop()
        try:
            st = d.stat()
        except OSError as err:
            diags.append(Diagnostic(str(d), f"cannot read directory: {err.strerror or err}"))
            continue
        key = (st.st_dev, st.st_ino)
        if key in visited:
            diags.append(Diagnostic(str(d), "symbolic link loop: directory already visited, "
                                    "skipped", kind="note"))
            continue
        visited.add(key)
        if respect_gitignore:
            try:
                text = (d / ".gitignore").read_text(encoding="utf-8", errors="replace")
                rules = rules + parse_gitignore(text, real_d)
            except OSError:  # none, or unreadable: the listing below reports the latter
                pass
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            diags.append(Diagnostic(str(d), f"cannot list directory: {err.strerror or err}"))
            continue
        subdirs: list[tuple[Path, Path, list[_Rule]]] = []
        for e in entries:
            try:
                _entry(e, real_d, rules, config, files, diags, seen_files, subdirs, top)
            except (OSError, RuntimeError) as err:  # races, loops, permissions
                diags.append(Diagnostic(e.path, f"cannot read: {err}"))
        stack.extend(reversed(subdirs))


def _entry(e: os.DirEntry[str], real_d: Path, rules: list[_Rule], config: LintConfig,
           files: list[SourceFile], diags: list[Diagnostic], seen_files: set[Path],
           subdirs: list[tuple[Path, Path, list[_Rule]]], top: Path) -> None:
    """Classify one directory entry: a folder to walk, a file to lint, or a diagnostic."""
    p = Path(e.path)
    real_p = real_d / e.name
    try:
        is_dir = e.is_dir()  # follows symlinks
    except OSError:
        is_dir = False
    if is_dir:
        if e.name in DEFAULT_EXCLUDES or config.excluded(p):
            return
        if e.is_symlink():
            try:
                real_p = p.resolve()
            except (OSError, RuntimeError):
                diags.append(Diagnostic(str(p), "symbolic link loop, skipped", kind="note"))
                return
        if rules and ignored(rules, real_p, True):
            return
        subdirs.append((p, real_p, rules))
    elif e.name.endswith(SUFFIXES):
        if config.excluded(p) or (rules and ignored(rules, real_p, False)):
            return
        try:
            st = e.stat()
            size = st.st_size
            if not stat.S_ISREG(st.st_mode):
                diags.append(not_a_file(str(p), st.st_mode))
                return
        except OSError as err:
            if e.is_symlink():
                diags.append(Diagnostic(str(p), "broken or looping symbolic link"))
            else:
                diags.append(Diagnostic(str(p), f"cannot read: {err.strerror or err}"))
            return
        real = real_p
        if e.is_symlink():
            try:
                real = p.resolve()
            except (OSError, RuntimeError):
                real = _abs(p)
        if real in seen_files:
            return
        seen_files.add(real)
        files.append(SourceFile(p, size, _rel(p, top)))


def not_a_file(path: str, mode: int) -> Diagnostic:
    """A FIFO, device or socket with a source-file name: skipped, never opened."""
    if stat.S_ISFIFO(mode):
        what = "a FIFO (named pipe)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "a device file"
    elif stat.S_ISSOCK(mode):
        what = "a socket"
    else:
        what = "not a regular file"
    return Diagnostic(path, f"skipped: {what}, not a file to lint (it was not opened)",
                      kind="warning")


def _rel(p: Path, top: Path) -> str:
    try:
        return p.relative_to(top).as_posix()
    except ValueError:
        return p.name


def _abs(p: Path) -> Path:
    return Path(os.path.abspath(p))
