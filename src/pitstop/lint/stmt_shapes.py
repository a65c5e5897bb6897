"""Statement shapes that decide how often code runs: a branch that only reports, a cache
refilled when stale (`if self.grid[i].shape != x.shape: ...`), a cached value served
before the code that builds it, and names that are strings (`n.replace(".", "_")`).
Pure functions of the syntax."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail

REPORTERS = frozenset({"print", "warn", "warning", "info", "debug", "error", "log", "write"})


def only_reports(body: list[ast.stmt]) -> bool:
    """A branch that only prints, logs, warns, raises or leaves."""
    for stmt in body:
        if isinstance(stmt, (ast.Raise, ast.Continue, ast.Break, ast.Pass)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and callee_tail(stmt.value) in REPORTERS:
            continue
        return False
    return bool(body)


def refills_cache(stmt: ast.If) -> bool:
    """`if self.grid[i].shape[2:4] != x.shape[2:4]: self.grid[i] = make_grid(...)` or
    `if self.mask is None: self.mask = ...`: the body stores into an attribute or item the
    test looks at, so it runs when the cached value is stale, not on every iteration."""
    stored = {ast.unparse(t) for s in stmt.body if isinstance(s, (ast.Assign, ast.AnnAssign))
              for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
              if isinstance(t, (ast.Attribute, ast.Subscript))}
    test = stmt.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn):
        # `if key not in cache: cache[key] = ...` (the same key: a different one misses)
        return f"{ast.unparse(test.comparators[0])}[{ast.unparse(test.left)}]" in stored
    return bool(stored) and tests_staleness(test) and any(
        ast.unparse(n) in stored for n in ast.walk(test)
        if isinstance(n, (ast.Attribute, ast.Subscript)))


def serves_cached(stmt: ast.If, after: list[ast.stmt] | None = None) -> bool:
    """`if key in cache: return cache[key]`, then (in its `else:`, or in the statements
    ``after`` it) `... cache[key] = built`: that code runs on a cache miss only (once per
    key), not on every iteration."""
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.In) and stmt.body
            and isinstance(stmt.body[-1], ast.Return) and stmt.body[-1].value is not None):
        return False
    item = f"{ast.unparse(test.comparators[0])}[{ast.unparse(test.left)}]"
    miss = stmt.orelse if after is None else after
    return ast.unparse(stmt.body[-1].value) == item and any(
        isinstance(n, ast.Assign) and any(ast.unparse(t) == item for t in n.targets)
        for s in miss for n in ast.walk(s))


def tests_staleness(test: ast.expr) -> bool:
    """Does ``test`` ask whether a cached value is missing or stale (`is None`, `not x`,
    `!=`, `not hasattr(...)`, either of those), not whether it is there (`is not None`)?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(tests_staleness(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        return isinstance(op, ast.NotEq) or (
            isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value is None)
    return False


# iterators of (name, tensor) pairs
NAMED_ITEMS = frozenset({"items", "named_parameters", "named_buffers", "named_modules",
                         "named_children"})
_STR_METHODS = frozenset({"replace", "startswith", "endswith", "split", "rsplit", "lower",
                          "upper", "strip", "join", "partition", "rpartition"})


def used_as_string(target: ast.expr, body: list[ast.stmt]) -> bool:
    """`for n, p in gen_params(): n = n.replace(".", "__")`: the first item is a name."""
    if not isinstance(target, ast.Name):
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in _STR_METHODS and isinstance(n.func.value, ast.Name)
               and n.func.value.id == target.id for stmt in body for n in ast.walk(stmt))
