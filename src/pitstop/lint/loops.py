"""The loop model: which loops run once per batch, training or evaluating.

A *training loop* iterates batches (a loader, or anything built from one: ``enumerate``,
``tqdm``, ``zip``, ``islice``, ``metric_logger.log_every(loader, ...)``, a prefetcher
class, a generator that yields from a loader, ``next(it)`` in a ``while``) and trains:
its body reaches ``backward()``, ``accelerator.backward()`` or an optimizer step,
directly or anywhere in the program the calls lead (a ``train_step`` in another module,
a method of a ``Trainer``, a callable object whose ``__call__`` runs backward). A loop
that steps without iterating a loader (``while step < max_steps:`` with ``get_batch()``)
is a training loop as well. An *evaluation loop* iterates batches and runs the model
without training. The epoch loop around a batch loop is not hot.

Which code inside a hot loop is rare is :mod:`~pitstop.lint.loops_guards`; whether code
runs a model is :mod:`~pitstop.lint.loops_model_runs`.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    LOADER_WRAPPERS,
    LOADERISH_RE,
    callee_tail,
    dotted,
    iter_shallow,
    last_name,
    param_names,
    unwrap_iterable,
)
from pitstop.lint.index import FuncDef
from pitstop.lint.loops_guards import LoopGuards
from pitstop.lint.loops_model_runs import ModelRuns
from pitstop.lint.steps import is_optimizer_class, is_step_call
from pitstop.lint.values_kinds import is_loader_kind, object_ref

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

# A loop over the program's parts (`for optim in optimizers:`, `for group in
# opt.param_groups:`) runs once per part: stepping inside it is no training loop of its
# own (the batch loop around it, if any, is)
PARTS_RE = re.compile(r"optim|sched|param|group|models?$|modules?$|layers?$|blocks?$|nets?$",
                      re.IGNORECASE)
# Calls that run a training or evaluation loop inside a framework (ignite): the function
# handed to an Engine runs once per batch.
ENGINES = frozenset({"Engine", "DeterministicEngine"})
FRAMEWORK_LOOPS = ENGINES | {"create_supervised_trainer", "create_supervised_evaluator"}
LIGHTNING_HOOKS = {"training_step": "train", "train_step": "train",
                   "validation_step": "eval", "test_step": "eval", "predict_step": "eval"}
# Methods of a hand-written loader class that hand out its batches.
ITERATOR_GETTERS = frozenset({"get_iterator", "iterator", "iter_batches", "get_batches",
                              "batch_iterator", "epoch_iterator"})
BATCH_WRAPPER_TAILS = LOADER_WRAPPERS | {"log_every", "chain", "prefetch", "tqdm_notebook",
                                         "maybe_tqdm", "cycle", "infinite", "repeat",
                                         "iterate", "with_progress", "progress_bar"}
ENV_RE = re.compile(r"^(envs?|vec_?envs?|train_envs?|environment)$", re.IGNORECASE)
# Functions that evaluate, and parameters that hold the batches they are handed.
EVAL_FUNC_RE = re.compile(r"^_*(eval(uate)?|valid(ate|ation)?|val|test|run_eval|"
                          r"evaluate_\w+|eval_\w+|validate_\w+|test_\w+|\w+_eval(uate)?)$",
                          re.IGNORECASE)
# Iterables that count steps, not pieces of data.
COUNTERS = frozenset({"range", "trange", "reversed", "arange", "linspace", "count", "product"})
HANDED_BATCHES_RE = re.compile(r"loader|iter|data|batch|^dl$|^ds$|set$", re.IGNORECASE)
# Functions that hand out the next batch (a loop calling one takes a batch per iteration).
GET_BATCH_RE = re.compile(r"^(get|next|sample|load|fetch|draw)_batch(es)?$|^get_(train|val|eval)_"
                          r"batch$", re.IGNORECASE)
# a collection of loaders by its name (`dataloaders`, `self.loaders`, `data_loaders`):
# iterated itself it yields keys or loaders, not batches
PLURAL_LOADERS_RE = re.compile(r"loaders$", re.IGNORECASE)
# Calls whose result is no batch even when handed a loader.
NOT_BATCHES = frozenset({"len", "range", "list", "sorted", "print", "str", "int", "float",
                         "isinstance", "getattr", "hasattr", "type", "id", "repr", "dict",
                         "set", "tuple", "sum", "max", "min"})


class LoopModel(LoopGuards, ModelRuns):
    """Loop classification and guard rarity for one module (the guards are
    :class:`~pitstop.lint.loops_guards.LoopGuards`; whether code runs a model,
    :class:`~pitstop.lint.loops_model_runs.ModelRuns`)."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self._step_memo: dict[ast.Call, bool] = {}
        self._runs_model_memo: dict[tuple[ast.AST, int], bool] = {}
        self._trains_after_memo: dict[ast.AST, bool] = {}
        self._steps_memo: dict[ast.stmt, bool] = {}
        self._turned_on: set[str] | None = None

    # ------------------------------------------------------------------ steps
    def call_steps(self, call: ast.Call, st: State) -> bool:
        """Does this call run backward / an optimizer step, itself or through the
        functions, methods and callable objects of the program it reaches?"""
        if is_step_call(call):
            return True
        memo = self._step_memo
        if call in memo and not st.env:
            return memo[call]
        ctx = self.ctx
        result = ctx.call_steps(call, st)
        if not st.env:
            memo[call] = result
        return result

    def has_markers(self, stmts: list[ast.stmt], st: State, *, into_loops: bool,
                    skip_batch_loops: bool = False) -> bool:
        """Does a call among ``stmts`` step (:meth:`call_steps`)? ``into_loops``: also in
        the loops among them; ``skip_batch_loops``: not in those that iterate batches."""
        for node in iter_shallow(stmts, into_loops=into_loops):
            if skip_batch_loops and isinstance(node, (ast.For, ast.AsyncFor)) \
                    and self.is_batch_source(node.iter, st):
                continue
            if isinstance(node, ast.Call) and self.call_steps(node, st):
                return True
        return False

    # ------------------------------------------------------------------ batches
    def is_batch_source(self, it: ast.expr, st: State | None = None) -> bool:
        """Does iterating ``it`` yield batches from a loader?"""
        from pitstop.lint.walk import State

        st = st if st is not None else State()
        return self._batchy(it, st, 0)

    def _batchy(self, it: ast.expr, st: State, depth: int, item: bool = False) -> bool:
        """``item``: ``it`` is indexed (`dataloaders[phase]`), not iterated itself."""
        if depth > 4:
            return False
        ctx = self.ctx
        if isinstance(it, ast.Call):
            tail = callee_tail(it)
            if tail in NOT_BATCHES:
                return False
            if tail in BATCH_WRAPPER_TAILS or tail in {"iter", "next"}:
                return any(self._batchy(a, st, depth + 1) for a in it.args
                           if not isinstance(a, ast.Starred))
            if tail in ITERATOR_GETTERS and isinstance(it.func, ast.Attribute):
                # a hand-written loader's own iterator: `loaders["train"].get_iterator()`
                return self._batchy(it.func.value, st, depth + 1)
            name = dotted(it.func)
            if name and name in ctx.index.loader_names:
                return True
            k = ctx.values.kind(it, st)
            if is_loader_kind(k):
                return True
            if name and LOADERISH_RE.search(name.rsplit(".", 1)[-1]):
                return True  # `get_train_loader(...)`, `self.train_dataloader()`
            # a generic wrapper around a loader: `metric_logger.log_every(loader, 10)`
            return bool(it.args) and isinstance(it.func, ast.Attribute) and self._batchy(
                it.args[0], st, depth + 1) and not self.call_steps(it, st)
        if isinstance(it, (ast.Name, ast.Attribute)):
            name = dotted(it)
            if not name:
                return False
            k = st.env.get(name)
            if k is not None:
                return is_loader_kind(k)
            if name in ctx.index.loader_names:
                return True
            tail = name.rsplit(".", 1)[-1]
            if not item and PLURAL_LOADERS_RE.search(tail):
                return False  # `for phase in dataloaders:` yields the keys of a collection
            if LOADERISH_RE.search(tail):
                return True
            r = ctx.resolve_name(it, st)
            if r is not None and r.kind in {"loader", "batches"}:
                return True
            if not isinstance(it, ast.Name):
                return False
            # `pbar = tqdm(enumerate(loader)) if rank == 0 else enumerate(loader)`, or the
            # same on the two branches of an `if` (`diter = enumerate(dl)` / `enumerate(
            # tqdm(dl))`): every value it can have above the loop iterates batches
            values = [a.value for a in ctx.index.scoped_assigns.get((ctx.scope_of(it), name), ())
                      if a.lineno < it.lineno and isinstance(a.value, (ast.Call, ast.IfExp))]
            return bool(values) and all(self._batchy(v, st, depth + 1) for v in values)
        if isinstance(it, ast.IfExp):
            return self._batchy(it.body, st, depth + 1) and self._batchy(it.orelse, st, depth + 1)
        if isinstance(it, ast.Subscript):
            if is_loader_kind(ctx.values.kind(it, st)):
                return True  # `dataloaders[phase]` of a dict of loaders
            return self._batchy(it.value, st, depth + 1, item=True)
        return False

    def loop_batches(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> bool:
        """Does this loop take a batch per iteration (for over a batch source, or a while
        whose body pulls ``next(...)`` from one)?"""
        if isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_batch_source(loop.iter, st):
            return True
        for node in iter_shallow(loop.body, into_loops=False):
            if isinstance(node, ast.Call) and self.pulls_batch(node, st):
                return True
            if isinstance(node, ast.Call) and GET_BATCH_RE.search(callee_tail(node)):
                return True  # `for k in range(eval_iters): x, y = get_batch("val")`
        return False

    def pulls_batch(self, call: ast.Call, st: State) -> bool:
        """`next(it)` over a batch source, or the hand-written iterator's own
        `data_loader_source.next()` (an `IterLoader` around a DataLoader)."""
        if callee_tail(call) not in {"next", "__next__"}:
            return False
        if isinstance(call.func, ast.Name):
            return bool(call.args) and self.is_batch_source(call.args[0], st)
        return isinstance(call.func, ast.Attribute) and not call.args \
            and self.is_batch_source(call.func.value, st)

    # ------------------------------------------------------------------ classification
    def classify(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> str | None:
        """``"train"`` for a training loop, ``"eval"`` for an evaluation loop, None for any
        other loop."""
        body = loop.body
        if body and isinstance(body[-1], (ast.Return, ast.Break, ast.Raise)):
            return None  # its body runs once (a timing pass that returns after one batch)
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _over_parts(loop.iter):
            return None
        if self.has_markers(body, st, into_loops=False):
            return "train"
        if self._rl_rollout(loop):
            return "train"
        if self.loop_batches(loop, st):
            if self.has_markers(body, st, into_loops=True, skip_batch_loops=True):
                return "train"
            if self.runs_model_eval(body, st):
                return "eval"
        if self._evaluates_handed_batches(loop, st) or self._evaluates_after_switch(loop, st):
            return "eval"
        return None

    def _evaluates_after_switch(self, loop: ast.For | ast.AsyncFor | ast.While, st: State
                                ) -> bool:
        """`model.eval()` then `for i in slices: targets, scores = forward(model, i, data)`:
        a loop over pieces of data the program model cannot type, after the function
        switched a model to eval mode, that runs a model (itself or through a helper) and
        trains nothing. (Not a loop over a count: sampling and decoding loops count steps.)"""
        fn = st.func
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or fn is None:
            return False
        if any(isinstance(n, ast.Call) and callee_tail(n) in COUNTERS for n in ast.walk(loop.iter)):
            return False  # (`tqdm(reversed(range(T)))`, `trange(0, n, bs)`: steps)
        switched = any(self.ctx.values.is_model_callee(m, st) for m in _eval_switched(fn, loop))
        return switched and self.runs_model_eval(loop.body, st)

    def _evaluates_handed_batches(self, loop: ast.For | ast.AsyncFor | ast.While, st: State
                                  ) -> bool:
        """`def evaluate(model, iterator, ...): model.eval(); for batch in iterator:
        model(...)`: an evaluation function's loop over the batches it is handed (a
        torchtext iterator, a loader the program model cannot follow), after it switched
        the model it runs to eval mode."""
        fn = st.func
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or fn is None \
                or not EVAL_FUNC_RE.search(fn.name):
            return False
        params = set(param_names(fn))
        sources = unwrap_iterable(loop.iter)
        if len(sources) != 1 or not isinstance(sources[0], ast.Name) \
                or sources[0].id not in params or not HANDED_BATCHES_RE.search(sources[0].id):
            return False
        switched = {dotted(m) for m in _eval_switched(fn, loop)}
        # (the loop trains nothing: `classify` looked for steps first)
        return any(isinstance(c, ast.Call) and dotted(c.func) in switched
                   for c in iter_shallow(loop.body, into_loops=True))

    def _rl_rollout(self, loop: ast.For | ast.AsyncFor | ast.While) -> bool:
        """A rollout loop of RL training: it steps the environment (`envs.step(action)`)
        once per iteration, and what it does with tensors there happens every env step,
        as per-batch work does in supervised training."""
        return any(is_env_step(node) for node in iter_shallow(loop.body, into_loops=False))

    def could_have_hot_loops(self) -> bool:
        """A cheap test before the walk: a loop can only be hot if something steps, a loop
        iterates something loader-like, or a Lightning hook / module forward exists."""
        from pitstop.lint.walk import State

        index = self.ctx.index
        if any(n in index.functions for n in LIGHTNING_HOOKS) or (
                "forward" in index.functions and index.module_classes) or any(
                t in index.calls_by_tail for t in FRAMEWORK_LOOPS) or (
                "step" in index.functions and any(is_optimizer_class(c, self.ctx.aliases)
                                                  for c in index.classes.values())):
            return True
        if not index.loops:
            return False
        st = State()
        for loop in index.loops:
            if self.loop_batches(loop, st):  # (also `while batch is not None: ... next_batch()`)
                return True
        return any(self.call_steps(c, st) or self._local_object_steps(c, st) for c in index.calls
                   if index.owner.get(c) in index.funcs_with_loops or index.module_loops) \
            or (bool(index.import_locals) and self.ctx.program.imports_training(self.ctx.key))


    def _local_object_steps(self, call: ast.Call, st: State) -> bool:
        """`agent = Agent(cfg)` ... `agent.update(buffer)`: a method of an object the same
        function builds from a class of the program, which trains (the cheap test above
        runs without the walk, which would know the object)."""
        func = call.func
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return False
        ctx = self.ctx
        # (the call's own function, from the index: no parent map for a cheap test)
        assigns = ctx.index.scoped_assigns.get((ctx.index.owner.get(call), func.value.id), ())
        for a in assigns:
            value = _assigned(a, func.value.id)
            if not isinstance(value, ast.Call):
                continue
            ref = object_ref(ctx.values.kind(value, st))
            if ref is None:
                continue
            sym = ctx.program.quiet_in_class(*ref, func.attr)
            if sym is not None and ctx.program.sym_steps(sym):
                return True
        return False


def _assigned(a: ast.Assign | ast.AnnAssign, name: str) -> ast.expr | None:
    """What ``a`` assigns to ``name`` (also `env, agent = make_env(c), Agent(c)`)."""
    targets = a.targets if isinstance(a, ast.Assign) else [a.target]
    for t in targets:
        if isinstance(t, ast.Name) and t.id == name:
            return a.value
        if isinstance(t, ast.Tuple) and isinstance(a.value, ast.Tuple) \
                and len(t.elts) == len(a.value.elts):
            for sub, v in zip(t.elts, a.value.elts, strict=True):
                if isinstance(sub, ast.Name) and sub.id == name:
                    return v
    return None


def _eval_switched(fn: FuncDef, loop: ast.stmt) -> list[ast.expr]:
    """What ``fn`` switches to eval mode before ``loop`` (`model` of `model.eval()`)."""
    return [c.func.value for c in iter_shallow(fn.body, into_loops=False)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "eval" and not c.args and c.lineno < loop.lineno]




def is_env_step(node: ast.AST) -> bool:
    """`envs.step(action)`: an RL environment stepped."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "step" and ENV_RE.search(last_name(node.func.value) or "") is not None




def _over_parts(it: ast.expr) -> bool:
    """`optimizers`, `self.schedulers`, `opt.param_groups`, `model.parameters()`,
    `enumerate(optimizers)`, `zip(models, optims)`, `dict.items()` of those."""
    if isinstance(it, ast.Call):
        tail = callee_tail(it)
        if tail in {"enumerate", "zip", "reversed", "list", "tuple", "sorted"}:
            return bool(it.args) and all(_over_parts(a) for a in it.args
                                         if not isinstance(a, ast.Starred))
        if tail in {"items", "values", "keys"} and isinstance(it.func, ast.Attribute):
            return _over_parts(it.func.value)
        return tail in {"parameters", "named_parameters", "modules", "named_modules",
                        "children", "named_children"}
    if isinstance(it, (ast.List, ast.Tuple)):
        return bool(it.elts) and all(_over_parts(e) for e in it.elts)
    name = dotted(it)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return PARTS_RE.search(last) is not None and LOADERISH_RE.search(last) is None
