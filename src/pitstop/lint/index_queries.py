"""The questions asked of a module's index once it is built: enclosing nodes and
functions, a module's functions and methods by name, the assignments a scope sees."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitstop.lint.index import FuncDef


class IndexQueries:
    """The part of :class:`~pitstop.lint.index.ModuleIndex` that answers questions."""

    owner: dict[ast.AST, FuncDef | None]
    functions: dict[str, list[FuncDef]]
    class_of: dict[FuncDef, ast.ClassDef]
    scoped_assigns: dict[tuple[FuncDef | None, str], list[ast.Assign | ast.AnnAssign]]

    if TYPE_CHECKING:  # built by the index on first use
        @property
        def parents(self) -> dict[ast.AST, ast.AST]: ...

    def enclosing(self, node: ast.AST, types: tuple[type, ...]) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, types):
            cur = self.parents.get(cur)
        return cur

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def inside(self, node: ast.AST, ancestor: ast.AST) -> bool:
        return any(a is ancestor for a in self.ancestors(node))

    def module_function(self, name: str) -> FuncDef | None:
        """The module-level (or nested, not a method) function called ``name``."""
        for fn in self.functions.get(name, ()):
            if fn not in self.class_of:
                return fn
        return None

    def visible_assigns(self, scope: FuncDef | None, name: str
                        ) -> list[ast.Assign | ast.AnnAssign]:
        """The assignments of ``name`` that ``scope`` sees: its own, else those of the
        nearest enclosing function (a closure) or of the module."""
        while True:
            assigns = self.scoped_assigns.get((scope, name))
            if assigns or scope is None:
                return assigns or []
            scope = self.owner.get(scope)

    def value_above(self, scope: FuncDef | None, name: str, line: int) -> ast.expr | None:
        """The value of the last assignment of ``name`` in ``scope`` above ``line``
        (`conv = nn.Conv2d(...)` ... `Sequential(conv, bn)`)."""
        before = [a for a in self.scoped_assigns.get((scope, name), ())
                  if (a.end_lineno or a.lineno) < line and a.value is not None]
        return max(before, key=lambda a: a.lineno).value if before else None

    def method(self, cls: ast.ClassDef, name: str) -> FuncDef | None:
        for fn in self.functions.get(name, ()):
            if self.class_of.get(fn) is cls:
                return fn
        return None

    def qualname_of(self, fn: FuncDef) -> str:
        cls = self.class_of.get(fn)
        return f"{cls.name}.{fn.name}" if cls is not None else fn.name
