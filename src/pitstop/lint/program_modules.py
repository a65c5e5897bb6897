"""Where the program's modules are: import names resolved to files of the program
(relative imports, packages and their ``__init__`` files, a script's sibling modules).

A mixin of :class:`~pitstop.lint.program.Program`.
"""

from __future__ import annotations

import os
from typing import Any

from pitstop.lint.summary import ModuleSummary


class ProgramModules:
    """Module resolution of a :class:`~pitstop.lint.program.Program`."""

    modules: dict[str, ModuleSummary]
    roots: list[str]
    _folders: dict[str, list[str]] | None
    _children: dict[str, list[str]] | None
    _names: set[str] | None
    _tops: dict[str, str]
    _candidates: dict[tuple[str, str, int], list[str]]
    _resolved: dict[tuple[str, str, int], str | None]
    _memo: dict[tuple[Any, ...], Any]

    def key(self, path: str) -> str:
        return norm_path(path)

    def summary(self, key: str) -> ModuleSummary | None:
        return self.modules.get(key)

    def module_candidates(self, key: str, module: str, level: int) -> list[str]:
        """Files that ``import module`` (``level`` dots) in module ``key`` may mean, best
        first (they need not exist). The list is shared: do not change it."""
        here = os.path.dirname(key)
        memo_key = (here, module, level)
        found = self._candidates.get(memo_key)
        if found is None:
            found = self._candidates[memo_key] = self._candidates_in(here, module, level)
        return found

    def _candidates_in(self, here: str, module: str, level: int) -> list[str]:
        # (asked for every import of every module, with the same few folders and names:
        # memoised per folder, the link pass of a big package does not rebuild the paths)
        rel = module.replace(".", os.sep) if module else ""
        bases: list[str] = []
        if level:
            base = here
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases.append(here)
            top = self._package_top(here)
            if top != here:
                bases.append(top)
            bases.extend(self.roots)
            up = here
            for _ in range(4):
                parent = os.path.dirname(up)
                if parent == up:
                    break
                up = parent
                bases.append(up)
        out = []
        for b in dict.fromkeys(bases):
            target = os.path.join(b, rel) if rel else b
            out.append(target + ".py")
            out.append(os.path.join(target, "__init__.py"))
        return out

    def _package_top(self, folder: str) -> str:
        """The folder above the package holding ``folder`` (``folder`` if none)."""
        memo = self._tops
        if folder in memo:
            return memo[folder]
        top = folder
        while os.path.join(top, "__init__.py") in self.modules or _has_init(top):
            parent = os.path.dirname(top)
            if parent == top:
                break
            top = parent
        memo[folder] = top
        return top

    def resolve_module(self, key: str, module: str, level: int) -> str | None:
        if len(self.modules) == 1:  # a module on its own: only a self-import resolves
            stem = os.path.splitext(os.path.basename(key))[0]
            if (module.rsplit(".", 1)[-1] if module else "") != stem and stem != "__init__":
                return None
        memo_key = (os.path.dirname(key), module, level)
        if memo_key in self._resolved:
            return self._resolved[memo_key]
        found = None
        for cand in self.module_candidates(key, module, level):
            if cand in self.modules:
                found = cand
                break
        if found is None and not level and module and not self._on_disk(key, module):
            found = self._on_added_path(os.path.dirname(key), module)
        self._resolved[memo_key] = found
        return found

    def _on_added_path(self, here: str, module: str) -> str | None:
        """``core.function`` found as ``../lib/core/function.py``: scripts that put a
        sibling folder on ``sys.path`` (``_init_paths.py``, ``sys.path.insert(0, "../lib")``)
        import its modules by their bare names. One match in a folder beside the script
        or one of its parents (up to four up) that is not a package itself (a package is
        imported by its own name); none when several folders could mean it."""
        if module.split(".", 1)[0] not in self._names_in_tree():
            return None
        if "." not in module and _installed(module) and not any(
                s.adds_to_path for s in self.modules.values()):
            # `import datasets` with Hugging Face's installed: that one, unless the program
            # itself puts its folders first on the path (a launch script's PYTHONPATH
            # cannot be seen: names nothing installed has count as the program's)
            return None
        rel = module.replace(".", os.sep)
        up = here
        for _ in range(5):
            hits = []
            for folder in self._child_folders().get(up, ()):
                if _has_init(folder):
                    continue
                for cand in (os.path.join(folder, rel + ".py"),
                             os.path.join(folder, rel, "__init__.py")):
                    if cand in self.modules:
                        hits.append(cand)
            if len(hits) == 1:
                return hits[0]
            if hits:
                return None
            parent = os.path.dirname(up)
            if parent == up:
                break
            up = parent
        return None

    def _names_in_tree(self) -> set[str]:
        """Every folder name and module stem on the paths of the program's modules."""
        if self._names is None:
            names: set[str] = set()
            for m in self.modules:
                names.update(m.removesuffix(".py").split(os.sep))
            self._names = names
        return self._names

    def _on_disk(self, key: str, module: str) -> bool:
        """Does the top name of ``module`` exist beside ``key`` (a module, or a package
        whose ``__init__.py`` is not linted)? Then Python imports that one. (A folder
        without ``__init__.py`` may be mere data, or a namespace package that the folders
        on the path come before.)"""
        head = module.split(".", 1)[0]
        base = os.path.join(os.path.dirname(key), head)
        return os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py"))

    def _child_folders(self) -> dict[str, list[str]]:
        """Each folder above a linted module -> its sub-folders that hold linted code."""
        if self._children is None:
            children: dict[str, set[str]] = {}
            for folder in self._by_folder():
                cur = folder
                while True:
                    parent = os.path.dirname(cur)
                    if parent == cur:
                        break
                    children.setdefault(parent, set()).add(cur)
                    cur = parent
            self._children = {k: sorted(v) for k, v in children.items()}
        return self._children

    def defined_in_package(self, key: str, module: str, level: int, name: str) -> str | None:
        """The module of the folder ``module`` that defines ``name`` at its top level,
        when the folder's ``__init__.py`` (which would re-export it) is not linted."""
        memo_key = ("defined_in_package", key, module, level, name)
        if memo_key in self._memo:
            return self._memo[memo_key]
        found = None
        folders = {os.path.dirname(c) for c in self.module_candidates(key, module, level)
                   if c.endswith("__init__.py")}
        for k in sorted(self._by_folder().keys() & folders):
            for m in self._by_folder()[k]:
                s = self.modules[m]
                if name in s.classes or name in s.globals or (
                        name in s.functions and not s.functions[name].is_method):
                    found = m
                    break
            if found:
                break
        self._memo[memo_key] = found
        return found

    def _by_folder(self) -> dict[str, list[str]]:
        if self._folders is None:
            folders: dict[str, list[str]] = {}
            for m in sorted(self.modules):
                folders.setdefault(os.path.dirname(m), []).append(m)
            self._folders = folders
        return self._folders


_INSTALLED: dict[str, bool] = {}


def _installed(name: str) -> bool:
    """Is ``name`` a module of the standard library or of an installed package here?"""
    found = _INSTALLED.get(name)
    if found is None:
        import importlib.util
        import sys

        try:
            found = name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        _INSTALLED[name] = found
    return found


_INITS: dict[str, bool] = {}


def _has_init(folder: str) -> bool:
    """Is there a package ``__init__.py`` in ``folder`` (asked once per folder)?"""
    found = _INITS.get(folder)
    if found is None:
        if len(_INITS) > 100_000:
            _INITS.clear()
        found = _INITS[folder] = os.path.exists(os.path.join(folder, "__init__.py"))
    return found


def norm_path(path: str) -> str:
    """A path as the program keys its modules: absolute and normalised."""
    return os.path.normpath(os.path.abspath(path))
