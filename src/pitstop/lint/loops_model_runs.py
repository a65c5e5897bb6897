"""Whether code runs a model: a loop body that evaluates (runs a model, trains nothing),
a model's method handed data, a helper of the program that calls a model.

:class:`ModelRuns` is the part of :class:`~pitstop.lint.loops.LoopModel` that answers
these questions.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import MODEL_RE, callee_tail, dotted, iter_shallow
from pitstop.lint.index import FuncDef
from pitstop.lint.steps import is_step_call

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

# A step of evaluation, not of training (`self._eval_step(batch)`, Lightning's
# `validation_step`): a loop calling one evaluates.
EVAL_STEP_RE = re.compile(r"^_*(eval(uate|uation)?|valid(ate|ation)?|val|test|predict|"
                          r"infer(ence)?)_step$", re.IGNORECASE)
# methods of a model that do not run it
MODEL_HOUSEKEEPING = frozenset({"parameters", "train", "eval", "state_dict", "to", "cuda",
                                "zero_grad", "named_parameters", "apply",
                                "register_forward_hook", "load_state_dict", "modules", "cpu"})


# methods of a module that change or store it, not run it (with arguments)
MODEL_UPKEEP = frozenset({"register_buffer", "register_parameter", "add_module", "requires_grad_",
                          "half", "float", "double", "bfloat16", "type", "save", "load",
                          "get_submodule", "get_parameter", "share_memory", "named_modules",
                          "register_full_backward_hook", "register_forward_pre_hook"})
# methods of what a model hands back (a dict of outputs, a tensor): calling one runs no
# model (`model_out.get("loss")`, `model_out.argmax(-1)`)
NOT_MODEL_METHODS = frozenset({"get", "items", "keys", "values", "pop", "setdefault", "update",
                               "copy", "append", "extend", "argmax", "argmin", "max", "min",
                               "sum", "mean", "softmax", "log_softmax", "view", "reshape",
                               "permute", "transpose", "detach", "numpy", "item", "tolist",
                               "squeeze", "unsqueeze", "gather", "index_select", "masked_fill",
                               "topk", "sort", "chunk", "split", "norm", "eq", "ne", "gt", "lt"})
# names of what a model returns, which MODEL_RE's `model_*` would take for a model
OUTPUT_NAME_RE = re.compile(r"out|logit|pred|loss|feat|emb|hidden|score|prob|attn|mask|state",
                            re.IGNORECASE)


class ModelRuns:
    """The part of :class:`~pitstop.lint.loops.LoopModel` that tells whether code runs a
    model."""

    ctx: ModuleContext
    # (set by LoopModel.__init__)
    _runs_model_memo: dict[tuple[ast.AST, int], bool]
    _trains_after_memo: dict[ast.AST, bool]
    _steps_memo: dict[ast.stmt, bool]

    if TYPE_CHECKING:  # the rest of the loop model, which this part asks
        def call_steps(self, call: ast.Call, st: State) -> bool: ...

    def runs_model_eval(self, body: list[ast.stmt], st: State) -> bool:
        """Does ``body`` run a model (itself, a model's method or a helper of the program
        that calls one) and train nothing?"""
        ctx = self.ctx
        calls_model = False
        for node in iter_shallow(body, into_loops=True):
            if isinstance(node, ast.Call):
                tail = callee_tail(node)
                if "backward" in tail or tail == "train":
                    return False
                if self.call_steps(node, st):
                    return False
                # a step of some kind, unless the program shows it trains nothing (a
                # shared `self._step(model, x)` that computes the loss)
                if "step" in tail and not EVAL_STEP_RE.search(tail) \
                        and ctx.function_target(node, st) is None:
                    return False
                if not calls_model and ctx.values.is_model_callee(node.func, st) \
                        and tail not in MODEL_HOUSEKEEPING:
                    calls_model = True
                if not calls_model and self.model_method(node, st):
                    calls_model = True
        if not calls_model and st.func is not None:  # a module's loop over its own methods
            cls = ctx.index.class_of.get(st.func)
            if cls is not None and ctx.values.is_model_callee(ast.Name(id="self"), st):
                calls_model = any(
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                    and node.func.attr not in MODEL_HOUSEKEEPING
                    and ctx.index.method(cls, node.func.attr) is not None
                    for node in iter_shallow(body, into_loops=False))
        if not calls_model:  # `pred, true = self._process_one_batch(...)` runs `self.model`
            calls_model = any(isinstance(node, ast.Call) and self.helper_runs_model(node, st)
                              for node in iter_shallow(body, into_loops=False))
        return calls_model

    def model_method(self, call: ast.Call, st: State) -> bool:
        """`self.model.finetune(input_ids)`, `model.generate(x)`: a method of a model
        handed data, which runs the model (not `model.load_state_dict(sd)`, nor a
        tensor's `model_out.argmax(-1)`)."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr.startswith("_") \
                or func.attr in MODEL_HOUSEKEEPING or func.attr in MODEL_UPKEEP \
                or func.attr in NOT_MODEL_METHODS or all(_literal(a) for a in call.args):
            return False  # (data handed in: not `model.load("ckpt")`)
        owner = dotted(func.value)
        if owner is None or not (owner in self.ctx.index.model_names or named_like_model(owner)):
            return False  # (named or known as a model: not `self.logger.log_summary(x)`)
        loop = self.ctx.enclosing(call, (ast.For, ast.AsyncFor, ast.While))
        return loop is None or not self._trains_after(loop)

    def _trains_after(self, loop: ast.AST) -> bool:
        """Does code after ``loop`` train (`for i in range(accum): self.GAN.D_cl(next(
        loader))`, then `backward` on the loss it built)? Not the other branch of an `if
        train: ... else:` around it. (Once per loop; each statement's answer is kept.)"""
        memo = self._trains_after_memo
        if loop in memo:
            return memo[loop]
        parents = self.ctx.parents
        child: ast.AST | None = loop
        found = False
        while not found and child is not None and not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            parent = parents.get(child)
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, field, None)
                if isinstance(stmts, list) and child in stmts:
                    found = any(self._steps_in(s) for s in stmts[stmts.index(child) + 1:])
                    break
            child = parent
        memo[loop] = found
        return found

    def _steps_in(self, stmt: ast.stmt) -> bool:
        memo = self._steps_memo
        if stmt not in memo:
            memo[stmt] = any(isinstance(n, ast.Call) and is_step_call(n) for n in ast.walk(stmt))
        return memo[stmt]

    def helper_runs_model(self, call: ast.Call, st: State, depth: int = 0) -> bool:
        """Is ``call`` a function of the program whose body calls a model (itself, or
        through helpers of its own, three calls deep: `self.correct(x)` ->
        `self.set_forward(x)` -> `self.feature(x)`)?"""
        target = self.ctx.function_target(call, st)
        if target is None:
            return False
        # `self.calculate_metrics(batch)`: an abstract method of a base trainer runs the
        # subclass's override
        return any(self._runs_model(tctx, fn, depth) for tctx, fn in
                   [target, *self.ctx.walker.overrides(call, st, target[1])])

    def _runs_model(self, tctx: ModuleContext, fn: FuncDef, depth: int) -> bool:
        from pitstop.lint.walk import State

        memo = self._runs_model_memo
        if (fn, depth) in memo:  # (the depth left decides what can be found)
            return memo[fn, depth]
        memo[fn, depth] = False  # recursion
        inner = State(func=fn)
        calls = [n for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, ast.Call)]
        found = any(tctx.values.is_model_callee(n.func, inner)
                    and callee_tail(n) not in MODEL_HOUSEKEEPING for n in calls) or (
            depth < 2 and any(tctx.loops.helper_runs_model(n, inner, depth + 1)
                              for n in calls))
        memo[fn, depth] = found
        return found


def named_like_model(name: str) -> bool:
    """`self.model`, `generator.module`: named as models are; not `model_out`."""
    tail = name.rsplit(".", 1)[-1]
    return bool(MODEL_RE.search(tail.lower())) and not OUTPUT_NAME_RE.search(tail)


def _literal(node: ast.AST) -> bool:
    """A value written in the program (`"loss"`, `-1`, `(0, 1)`): not data."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True
