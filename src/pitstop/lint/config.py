"""``[tool.pitstop.lint]`` in pyproject.toml: select, ignore, per-file-ignores, exclude."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitstop.errors import UsageError


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = ("LT",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    root: Path = field(default_factory=Path.cwd)  # per-file-ignores/exclude are relative to it
    source: str = "defaults"

    def ignored_for(self, path: Path) -> tuple[str, ...]:
        """Codes ignored for ``path`` by per-file-ignores."""
        if not self.per_file_ignores:  # the common case: no path work at all
            return ()
        rel = _relative(path, self.root)
        out: list[str] = []
        for pattern, codes in self.per_file_ignores:
            if _glob_match(rel, pattern):
                out.extend(codes)
        return tuple(out)

    def excluded(self, path: Path) -> bool:
        if not self.exclude:
            return False
        rel = _relative(path, self.root)
        return any(_glob_match(rel, p) for p in self.exclude)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return path.as_posix()


def _glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel, pattern + "/*"):
        return True
    if "/" not in pattern:  # a bare name matches any component or the file name
        return any(fnmatch.fnmatchcase(part, pattern) for part in rel.split("/"))
    return False


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: [tool.pitstop.lint] {key} must be a list of strings")
    return tuple(value)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` (None if none can be read)."""
    try:
        cur = start.absolute()
        if not cur.is_dir():
            cur = cur.parent
        for d in (cur, *cur.parents):
            candidate = d / "pyproject.toml"
            if candidate.is_file():
                return candidate
    except (OSError, RuntimeError):
        return None
    return None


def load_config(pyproject: Path | None) -> LintConfig:
    """Read ``[tool.pitstop.lint]``; a malformed file is a usage error naming it."""
    if pyproject is None:
        return LintConfig()
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            return LintConfig(root=pyproject.parent, source=f"{pyproject} (not read: no TOML parser)")
    try:
        doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"{pyproject}: cannot read it as TOML ({err}); fix or remove it") from None
    section: Any = doc
    for depth, key in enumerate(("tool", "pitstop", "lint")):
        section = section.get(key)
        if section is None:
            break
        if not isinstance(section, dict):
            table = ".".join(("tool", "pitstop", "lint")[:depth + 1])
            raise UsageError(f"{pyproject}: [{table}] must be a table, not "
                             f"{_toml_kind(section)}; fix or remove it")
    if section is None:
        return LintConfig(root=pyproject.parent, source=f"{pyproject} (no [tool.pitstop.lint])")
    known = {"select", "ignore", "per-file-ignores", "exclude"}
    unknown = set(section) - known
    if unknown:
        raise UsageError(f"{pyproject}: unknown key(s) in [tool.pitstop.lint]: "
                         f"{', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise UsageError(f"{pyproject}: [tool.pitstop.lint] per-file-ignores must be a table "
                         "of glob = [codes]")
    where = f"{pyproject}: [tool.pitstop.lint]"
    select = _strings(section.get("select", ["LT"]), "select", str(pyproject))
    ignore = _strings(section.get("ignore", []), "ignore", str(pyproject))
    per_file = tuple((k, _strings(v, f"per-file-ignores.{k}", str(pyproject)))
                     for k, v in pfi.items())
    # The same check as --select/--ignore on the command line: a typo is an error.
    if not select:
        raise UsageError(f"{where} select = [] checks no code; remove it to check every code, "
                         "or name the codes to check")
    check_codes(select, f"{where} select")
    check_codes(ignore, f"{where} ignore")
    for glob, codes in per_file:
        check_codes(codes, f"{where} per-file-ignores.{glob!r}")
    return LintConfig(
        select=select,
        ignore=ignore,
        per_file_ignores=per_file,
        exclude=_strings(section.get("exclude", []), "exclude", str(pyproject)),
        root=pyproject.parent,
        source=str(pyproject),
    )


def check_codes(entries: tuple[str, ...], where: str) -> None:
    """Every entry must match a lint code (or prefix), rule name or category.

    ``where`` names the option or config key in the message (``--select``,
    ``pyproject.toml: [tool.pitstop.lint] ignore``).
    """
    from pitstop.findings import all_docs

    docs = [d for d in all_docs() if d.code.startswith("LT")]
    for e in entries:
        if not e.strip():  # "" is a prefix of every code: it would select or ignore all
            raise UsageError(f"{where} has an empty code; name a code, prefix, name or "
                             "category (`pitstop explain --list` shows them)")
        if not any(d.code.startswith(e.upper()) or e in (d.name, d.category) for d in docs):
            raise UsageError(f"{where} {e!r} matches no lint code, name or category; "
                             "`pitstop explain --list` shows them")


def _toml_kind(value: Any) -> str:
    kinds = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             list: "an array"}
    return next((k for t, k in kinds.items() if isinstance(value, t)), type(value).__name__)
