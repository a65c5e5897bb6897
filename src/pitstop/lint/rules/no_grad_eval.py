"""LT013 no-grad-eval: an evaluation loop that runs the model with autograd recording."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import callee_tail, dotted, param_default, param_names, unwrap_iterable
from pitstop.lint.context import ModuleContext
from pitstop.lint.loops_model_runs import MODEL_HOUSEKEEPING, named_like_model

CODE = "LT013"
EVAL_NAME_RE = re.compile(r"eval|valid|val_|_val|test|infer|predict|score|metric|bench",
                          re.IGNORECASE)
GRAD_OFF = frozenset({"no_grad", "inference_mode"})
# Methods of a model that run it on their arguments (with the model's own calls).
MODEL_COMPUTE_RE = re.compile(r"^(predict|forward|inference|infer)|extract|feature|embed|"
                              r"encode|decode|logit|score|sample", re.IGNORECASE)
# calls that train or need gradients: a loop holding one is no evaluation loop
GRAD_USERS = frozenset({"backward", "step", "train", "grad", "requires_grad_", "enable_grad",
                        "set_grad_enabled"})


def _grad_off_call(node: ast.AST) -> bool:
    """`torch.no_grad()`, `@torch.inference_mode()`, a project's own `@nograd` wrapper."""
    target = node.func if isinstance(node, ast.Call) else node
    tail = (dotted(target) or "").rsplit(".", 1)[-1]
    return tail in GRAD_OFF or tail.lower().replace("_", "") in {"nograd", "inferencemode"}


def _grad_off_in_helpers(ctx: ModuleContext, loop: ast.AST) -> bool:
    """Does the loop run its model only through functions of the program that turn
    autograd off themselves (`self.test()` runs the model under `with torch.no_grad():`,
    `model.predict` is decorated `@nograd`, the per-batch `val_loop` is
    `@torch.no_grad()`)? A model called in the loop itself, or through any helper that
    keeps autograd on, still records the graph."""
    from pitstop.lint.walk import State

    func = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    st = State(func=func)  # type: ignore[arg-type]
    values, loops = ctx.values, ctx.loops
    helpers_off = False
    unseen = False  # a model's method the program model cannot open (`diffusion.test()`)
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call):
            continue
        target = ctx.function_target(node, st)
        if target is None:
            if values.is_model_callee(node.func, st) and callee_tail(node) not in MODEL_HOUSEKEEPING:
                return False  # `logits = model(x)` right here, autograd on
            # (`self.model.finetune(x)` is a module's; `diffusion.feed_data(batch)` of an
            # object a factory makes, known as a model only by its maker, may be a
            # wrapper's, whose methods may turn autograd off inside)
            unseen = unseen or (loops.model_method(node, st) and not named_like_model(
                dotted(node.func.value) or ""))  # type: ignore[attr-defined]
            continue
        if not loops.helper_runs_model(node, st):
            continue
        fn = target[1]
        if any(_grad_off_call(d) for d in fn.decorator_list) or any(
                isinstance(n, (ast.With, ast.AsyncWith))
                and any(_grad_off_call(i.context_expr) for i in n.items)
                for stmt in fn.body for n in ast.walk(stmt)):
            helpers_off = True
        else:
            return False
    # (a method of a wrapper object may turn autograd off inside: unknown, not said)
    return helpers_off or unseen


def _under_no_grad(ctx: ModuleContext, node: ast.AST,
                   seen: frozenset[ast.AST] = frozenset()) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.With, ast.AsyncWith)) and any(
                _grad_off_call(i.context_expr) for i in cur.items):
            return True
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_grad_off_call(d) for d in cur.decorator_list):
                return True
            if cur in seen:  # recursion: no call site outside says anything
                return False
            # every call of this function in the module is made under no_grad (but those
            # under an opt-in flag: `if args.evaluate: validate(...)` is a mode the user picks)
            sites = ctx.index.calls_by_tail.get(cur.name, [])
            sites = [c for c in sites if not ctx.loops.under_opt_in(c)] or sites
            return bool(sites) and all(_under_no_grad(ctx, c, seen | {cur}) for c in sites)
        cur = ctx.parents.get(cur)
    return False


def _needs_grad(loop: ast.AST) -> bool:
    """Does the loop train, or take gradients itself (an adversarial attack, saliency)?"""
    return any((isinstance(n, ast.Call) and callee_tail(n) in GRAD_USERS)
               or (isinstance(n, ast.Attribute) and n.attr == "requires_grad")
               for n in ast.walk(loop))


def _model_loops(ctx: ModuleContext) -> list[ast.For | ast.While]:
    """Loops after `model.eval()` in the same function that run that model and train
    nothing (`for u in users: model.predict(...)`, `for x, y in zip(xs, ys): model(x)`):
    evaluation loops over data that comes from no loader."""
    out: list[ast.For | ast.While] = []
    for call in ctx.index.calls_by_tail.get("eval", ()):
        if call.args or not isinstance(call.func, ast.Attribute):
            continue
        model = dotted(call.func.value)
        func = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        if model is None or func is None:
            continue
        for loop in ast.walk(func):
            if not isinstance(loop, (ast.For, ast.While)) or loop.lineno <= call.lineno:
                continue
            if _needs_grad(loop):
                continue
            calls = [n for n in ast.walk(loop) if isinstance(n, ast.Call)]
            if any((dotted(n.func) or "") == model or (
                    (dotted(n.func) or "").startswith(f"{model}.") and n.args
                    and MODEL_COMPUTE_RE.search(callee_tail(n)) is not None)
                   for n in calls):
                # (`model.predict(x)`, `self._network.extract_vector(x)`: the model's
                # own computations, in eval mode; not `model.named_modules()`)
                out.append(loop)
    # one finding per loop nest: the outermost loop of it
    inner = {id(n) for loop in out for n in ast.walk(loop) if n is not loop}
    return [loop for loop in out if id(loop) not in inner]


Loop = ast.For | ast.AsyncFor | ast.While


def check(ctx: ModuleContext) -> None:
    # (loop, line of its hot loop, seen after `model.eval()`: no further signal needed)
    todo: list[tuple[Loop, int, bool]] = [
        (hot.node, hot.line, False) for hot in ctx.hot_loops
        if hot.kind == "eval" and isinstance(hot.node, (ast.For, ast.AsyncFor, ast.While))]
    if ctx.has_train_loop or ctx.hot_loops:
        hot_nodes = {hot.node for hot in ctx.hot_loops}
        in_hot = {id(n) for hot in ctx.hot_loops for n in ast.walk(hot.node)}
        todo += [(loop, loop.lineno, True) for loop in _model_loops(ctx)
                 if loop not in hot_nodes and id(loop) not in in_hot]
    for hot in ctx.hot_loops:
        if hot.kind == "train" and isinstance(hot.node, (ast.For, ast.AsyncFor)) \
                and not _under_no_grad(ctx, hot.node):
            calls = _evaluating_calls(ctx, hot.node)
            if calls and not _grad_switched(ctx, hot.node):
                _report_switched(ctx, hot.node, calls[0])
    # (per function, once: a module of many evaluation loops must not unparse its
    # functions again for each)
    grad_off_text: dict[ast.AST | None, bool] = {}
    switches: dict[ast.AST | None, bool] = {}
    for loop, line, after_eval in todo:
        if _under_no_grad(ctx, loop) or _needs_grad(loop):
            continue
        func = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        scope = func.body if func is not None else ctx.tree.body  # type: ignore[attr-defined]
        if func not in grad_off_text:
            text = "\n".join(ast.unparse(s) for s in scope) if func is not None else ctx.text
            grad_off_text[func] = "set_grad_enabled(False)" in text \
                or "requires_grad_(False)" in text or "requires_grad = False" in text
        if grad_off_text[func]:
            continue
        # inner `with torch.no_grad():` around the model call
        if any(isinstance(n, (ast.With, ast.AsyncWith)) and any(
                _grad_off_call(i.context_expr) for i in n.items) for n in ast.walk(loop)):
            continue
        if _grad_off_in_helpers(ctx, loop):
            continue
        if not after_eval:
            iterated = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else loop.test
            loader = " ".join(dotted(i) or "" for i in unwrap_iterable(iterated))
            fname = getattr(func, "name", "")
            if func not in switches:
                switches[func] = _switches_to_eval(ctx, scope, func)
            if not (EVAL_NAME_RE.search(loader) or EVAL_NAME_RE.search(fname) or switches[func]):
                continue
        _report(ctx, loop, line)


def _switches_to_eval(ctx: ModuleContext, scope: list[ast.stmt], func: ast.AST | None) -> bool:
    """Does this code switch a model to eval mode: `model.eval()`, or a method of the
    program that does (`model.val_start()` calling `self.img_enc.eval()`)?"""
    from pitstop.lint.walk import State

    st = State(func=func if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
    calls = [n for n in ast.walk(ast.Module(body=list(scope), type_ignores=[]))
             if isinstance(n, ast.Call)]
    if any(callee_tail(n) == "eval" for n in calls):
        return True
    for call in calls:
        target = ctx.function_target(call, st)
        if target is not None and any(
                isinstance(n, ast.Call) and callee_tail(n) == "eval" and not n.args
                and isinstance(n.func, ast.Attribute) for n in ast.walk(target[1])):
            return True
    return False


_UNKNOWN = object()


def _test_value(test: ast.expr, param: str, value: object) -> object:
    """``test`` evaluated with ``param`` bound to the literal ``value`` (`partition ==
    "train"`, `not backprop`, `mode in ("train", "finetune")`), or _UNKNOWN."""
    if isinstance(test, ast.Name) and test.id == param:
        return bool(value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _test_value(test.operand, param, value)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.left, ast.Name) and test.left.id == param:
        try:
            other = ast.literal_eval(test.comparators[0])
        except ValueError:
            return _UNKNOWN
        op = test.ops[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            return value == other
        if isinstance(op, (ast.NotEq, ast.IsNot)):
            return value != other
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(other, (tuple, list, set)):
            return (value in other) == isinstance(op, ast.In)
    return _UNKNOWN


def _step_switch(ctx: ModuleContext, loop: Loop, func: ast.FunctionDef
                 ) -> tuple[str, ast.expr] | None:
    """(parameter, test) when every backward()/step() of the loop runs under one `if` on
    a parameter of its function (`if partition == "train":`, `if backprop:`)."""
    params = param_names(func)
    found: tuple[str, ast.expr] | None = None
    steps = [n for n in ast.walk(loop) if isinstance(n, ast.Call)
             and callee_tail(n) in {"backward", "step"}]
    if not steps:
        return None
    for call in steps:
        child: ast.AST = call
        cur, guard = ctx.parents.get(call), None
        while cur is not None and cur is not loop:
            if isinstance(cur, ast.If) and child in cur.body:
                names = [n.id for n in ast.walk(cur.test) if isinstance(n, ast.Name)]
                if len(names) == 1 and names[0] in params:
                    guard = (names[0], cur.test)
                    break
            child, cur = cur, ctx.parents.get(cur)
        if guard is None or (found is not None and ast.dump(found[1]) != ast.dump(guard[1])):
            return None
        found = guard
    return found


def _evaluating_calls(ctx: ModuleContext, loop: Loop) -> list[ast.Call]:
    """Calls, in this module, of the function holding a training loop that pass its mode
    switch a value under which the loop only evaluates (`train(epoch, loader,
    partition="valid")` with backward under `if partition == "train":`), made with
    autograd on."""
    func = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    if not isinstance(func, ast.FunctionDef) or func not in ctx.index.tree.body:
        return []
    switch = _step_switch(ctx, loop, func)
    if switch is None:
        return []
    param, test = switch
    positional = [a.arg for a in func.args.posonlyargs + func.args.args]
    out = []
    for use in ctx.name_uses(func.name):
        call = ctx.parents.get(use)
        if not isinstance(call, ast.Call) or call.func is not use:
            continue
        arg = next((k.value for k in call.keywords if k.arg == param), None)
        if arg is None and param in positional and positional.index(param) < len(call.args):
            arg = call.args[positional.index(param)]
        if arg is None:  # (left out: the default, when it is a literal)
            value = param_default(func, param)
        elif isinstance(arg, ast.Constant):
            value = arg.value
        else:
            continue
        if value != "?" and _test_value(test, param, value) is False \
                and not _under_no_grad(ctx, call):
            out.append(call)
    return out


def _grad_switched(ctx: ModuleContext, loop: Loop) -> bool:
    """Does the function turn autograd off itself (`torch.set_grad_enabled(train)`, a
    `with torch.no_grad():` inside the loop)?"""
    func = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    scope = func if func is not None else loop
    # (any use: `ctx = nullcontext() if train else torch.no_grad()` ... `with ctx:`)
    return any(isinstance(n, ast.Call) and (
        callee_tail(n) in {"set_grad_enabled", "requires_grad_"} or _grad_off_call(n))
        for n in ast.walk(scope))


def _report_switched(ctx: ModuleContext, loop: ast.For | ast.AsyncFor, call: ast.Call) -> None:
    ctx.report(
        CODE, loop,
        f"`{ctx.segment(call)}` (line {call.lineno}) runs this training loop as an "
        "evaluation pass, its backward() switched off, with autograd on: every activation "
        "is kept for a backward pass that never comes (more memory, smaller batches, "
        "slower). Wrap the evaluating call in `torch.no_grad()`, or use "
        "`with torch.set_grad_enabled(<training>):` in the loop.",
        evidence=(("loop_line", loop.lineno), ("call_line", call.lineno)),
    )


def _report(ctx: ModuleContext, loop: Loop, line: int) -> None:
    what = f"over `{ctx.segment(loop.iter)}`" if isinstance(loop, (ast.For, ast.AsyncFor)) \
        else "(`while`)"
    ctx.report(
        CODE, loop,
        f"evaluation loop {what} runs the model with autograd on: every activation is kept "
        "for a backward pass that never comes (more memory, smaller batches, slower). Wrap "
        "it in `torch.inference_mode()` or decorate the function with `@torch.no_grad()`.",
        evidence=(("loop_line", line),),
    )
