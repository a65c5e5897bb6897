"""LT004 loader-persistent-workers: a DataLoader with workers iterated for several epochs
without persistent_workers=True (here, or wherever in the program its batches are read)."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import callee_tail, dotted, kwarg, unwrap_iterable
from pitstop.lint.context import ANY, OR, USE_SEEN, ModuleContext
from pitstop.lint.loaders import ABSENT, whole_split_batch
from pitstop.lint.model import SAFE, UNSAFE, Edit, Fix
from pitstop.lint.rules._dataloader import (
    POSITIVE,
    ZERO,
    arg_values,
    call_position,
    dataloader_calls,
    epochs_condition,
    flag_state,
    iterated_for_epochs,
    iterates_its_own_way,
    loader_name,
    number_state,
    uses_by_name,
    wrapped_names,
)

CODE = "LT004"


def check(ctx: ModuleContext) -> None:
    risky_epoch_state = any(
        isinstance(c.func, ast.Attribute) and "sampler" not in (dotted(c.func.value) or "").lower()
        for c in ctx.index.calls_by_tail.get("set_epoch", ()))
    for call in dataloader_calls(ctx):
        if whole_split_batch(call):
            continue  # one batch per pass: the workers load it once whatever they do
        values = arg_values(ctx, call, "num_workers")
        scope = ctx.index.owner.get(call)
        judged = [number_state(ctx, v, scope) for v in values]
        if all(j.state == ZERO for j in judged) or not any(
                j.state == POSITIVE or (j.state != ZERO and not isinstance(v, str))
                for j, v in zip(judged, values, strict=True)):
            continue
        pw_values = arg_values(ctx, call, "persistent_workers")
        if {flag_state(ctx, v) for v in pw_values} != {"false"}:
            continue
        if taken_once(ctx, call) or iterates_its_own_way(ctx, call) \
                or built_per_pass(ctx, call) or spans_the_run(ctx, call):
            continue  # one iterator for the run (`iter(DataLoader(...))`, or a subclass
            # that re-uses its workers): nothing is re-spawned; or a new loader built for
            # each pass (`def validate(): for b in DataLoader(...)`), which
            # persistent_workers cannot keep
        # Proven: iterated for epochs here, or by a loop elsewhere in the program. Else,
        # when no loop of the program is seen to iterate it (its batches travel through
        # code the analysis cannot follow), a training program re-iterates its loaders.
        condition = "" if iterated_for_epochs(ctx, call) else \
            f"{epochs_condition(ctx, call)}{ANY}-{USE_SEEN}{ctx.loader_key(call)} +train_program{OR}train_run"
        line, col = call_position(ctx, call)
        nw = kwarg(call, "num_workers")
        nw_value = nw.value if nw is not None else next(
            (v for v in values if not isinstance(v, str)), None)
        pw = kwarg(call, "persistent_workers")
        fix = None
        if pw is not None:
            value = "True" if isinstance(nw_value, ast.Constant) or nw_value is None else \
                f"{ast.unparse(nw_value)} > 0"
            fix = Fix(UNSAFE, f"set persistent_workers={value}",
                      (Edit("kw_set", line, col, "DataLoader", name="persistent_workers",
                            value=value),))
        elif nw is not None and pw_values == [ABSENT] and not any(
                k.arg is None for k in call.keywords):
            if isinstance(nw.value, ast.Constant) and isinstance(nw.value.value, int) \
                    and nw.value.value > 0:
                fix = Fix(UNSAFE if risky_epoch_state else SAFE, "add persistent_workers=True",
                          (Edit("kw_add", line, col, "DataLoader", name="persistent_workers",
                                value="True"),))
            elif isinstance(nw.value, (ast.Name, ast.Attribute)):
                value = f"{ast.unparse(nw.value)} > 0"
                fix = Fix(UNSAFE if risky_epoch_state else SAFE,
                          f"add persistent_workers={value}",
                          (Edit("kw_add", line, col, "DataLoader", name="persistent_workers",
                                value=value),))
        shown = ctx.segment(nw_value) if nw_value is not None else "?"
        ctx.report(
            CODE, call,
            f"DataLoader with num_workers={shown} and no persistent_workers=True: each time "
            "it is iterated again (every epoch, every validation pass) its worker processes "
            "are killed and re-spawned (re-importing, re-opening files, re-building the "
            "dataset copy)" + ("; this program iterates it for several epochs." if not condition
                               else "."),
            fix=fix, condition=condition,
        )


def built_per_pass(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the loader built inside a function that iterates it once per call (no loop
    around that iteration in the function, the loader not kept or handed on), or inside a
    loop that builds a new one for each pass it makes?"""
    index = ctx.index
    owner = index.owner.get(call)
    if owner is None:
        return False
    around: ast.AST | None = None  # `for epoch ...: loader = DataLoader(...); for b in loader:`
    name = loader_name(ctx, call)
    if name is None or "." in name:
        return False
    if call in index.calls_in_loop:
        around = ctx.enclosing(call, (ast.For, ast.AsyncFor, ast.While))
        stmt = index.assign_of.get(call)
        parent = ctx.parents.get(stmt) if stmt is not None else None
        if isinstance(parent, ast.If) and ctx.parents.get(parent) is around and not any(
                dotted(n) == name for n in ast.walk(parent.test)):
            pass  # `if step % 500 == 0: test_loader = DataLoader(...)`: a new one per pass
        elif around is None or parent is not around:
            return False  # (`if loader is None: loader = DataLoader(...)` keeps it)
    if any(isinstance(r.value, ast.AST) and any(isinstance(n, ast.Name) and n.id == name
                                                 for n in ast.walk(r.value))
           for r in index.returns.get(owner, ())):
        return False  # handed back to the caller, who may keep it
    loops_by, passes_by = uses_by_name(ctx)
    names = wrapped_names(index.assigns_of.get(owner, ()), {name})  # `pbar = tqdm(loader)`
    loops = [lp for n in names for lp in loops_by.get((owner, n), [])]
    passes = [c for n in names for c in passes_by.get((owner, n), []) if c is not call]
    if around is not None and not loops:
        # (up to the next loader built under the same name)
        later = [a.lineno for a in index.scoped_assigns.get((owner, name), ())
                 if a.lineno > call.lineno]
        end = min(later) if later else float("inf")
        passes = [c for c in passes if call.lineno < c.lineno < end]
    if around is not None and not loops and len(passes) == 1 \
            and ctx.enclosing(passes[0], (ast.For, ast.AsyncFor, ast.While)) is around:
        # `for c in classes: loader = DataLoader(...); vectors = self._extract(loader)`,
        # the helper iterating what it is handed once: a new loader for each pass
        return _iterates_once(ctx, passes[0], name, owner)
    return bool(loops) and not passes and all(
        index.outer_loop.get(loop) is around and index.owner.get(loop) is owner for loop in loops)


def _iterates_once(ctx: ModuleContext, call: ast.Call, name: str, scope: object) -> bool:
    """Does ``call`` hand the loader ``name`` to a function of this module that iterates
    that parameter in one loop, outside any other loop of its own?"""
    from pitstop.lint.walk import State

    target = ctx.function_target(call, State(func=scope))  # type: ignore[arg-type]
    if target is None or target[0] is not ctx:
        return False
    fn = target[1]
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if params and params[0] in {"self", "cls"} and isinstance(call.func, ast.Attribute):
        params = params[1:]
    pos = next((i for i, a in enumerate(call.args) if dotted(a) == name), None)
    param = params[pos] if pos is not None and pos < len(params) else next(
        (k.arg for k in call.keywords if dotted(k.value) == name), None)
    if param is None:
        return False
    index = ctx.index
    loops = [lp for lp in ast.walk(fn) if isinstance(lp, (ast.For, ast.AsyncFor))
             and any(dotted(i) == param for i in unwrap_iterable(lp.iter))]
    return len(loops) == 1 and index.outer_loop.get(loops[0]) is None


# Samplers that hand out every iteration of the run in one pass of the loader.
RUN_SAMPLER_RE = re.compile(r"infinite|iterationbased|multiepoch|endless|forever")


def spans_the_run(ctx: ModuleContext, call: ast.Call) -> bool:
    """Does the loader's sampler cover the whole run in one pass (`batch_sampler=
    IterationBasedBatchSampler(..., num_iterations=max_iter)`, `sampler=
    MultiEpochSampler(ds, num_epochs)`, an `InfiniteSampler`), so that it is iterated once
    and its workers live for the run?"""
    scope = ctx.index.owner.get(call)
    for name in ("sampler", "batch_sampler"):
        kw = kwarg(call, name)
        if kw is None:
            continue
        values: list[ast.expr] = [kw.value]
        if isinstance(kw.value, ast.Name):
            values = [a.value for a in ctx.index.visible_assigns(scope, kw.value.id)
                      if a.value is not None]
        if any(isinstance(v, ast.Call) and RUN_SAMPLER_RE.search(
                callee_tail(v).lower().replace("_", "")) for v in values):
            return True
    return False


def taken_once(ctx: ModuleContext, call: ast.Call) -> bool:
    """Is the loader only ever turned into one iterator (`it = iter(DataLoader(...))`
    outside any loop), so that its workers live as long as that iterator?"""
    index = ctx.index
    for it in index.calls_by_tail.get("iter", ()):
        if it.args and it.args[0] is call and it not in index.calls_in_loop:
            return True
    # `loader = DataLoader(...)` ... `it = iter(loader)` once, outside any loop, and the
    # loader never iterated or handed anywhere else
    name = loader_name(ctx, call)
    if name is None:
        return False
    owner = index.owner.get(call)
    scope: object = owner if not name.startswith("self.") else "*"
    loops_by, passes_by = uses_by_name(ctx)
    if loops_by.get((scope, name)):
        return False
    if [c for c in passes_by.get((scope, name), []) if c is not call]:
        return False
    iters = [c for c in index.calls_by_tail.get("iter", ())
             if c.args and dotted(c.args[0]) == name
             and (scope == "*" or index.owner.get(c) is owner)]
    return bool(iters) and not any(c in index.calls_in_loop for c in iters)


