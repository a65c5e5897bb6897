"""The loop model: which loops run once per batch, and which code inside them is rare.

A *training loop* iterates batches (a loader, or anything built from one: ``enumerate``,
``tqdm``, ``zip``, ``islice``, ``metric_logger.log_every(loader, ...)``, a prefetcher
class, a generator that yields from a loader, ``next(it)`` in a ``while``) and trains:
its body reaches ``backward()``, ``accelerator.backward()`` or an optimizer step,
directly or anywhere in the program the calls lead (a ``train_step`` in another module,
a method of a ``Trainer``, a callable object whose ``__call__`` runs backward). A loop
that steps without iterating a loader (``while step < max_steps:`` with ``get_batch()``)
is a training loop as well. An *evaluation loop* iterates batches and runs the model
without training. The epoch loop around a batch loop is not hot.

Inside a hot loop, code under a rare guard runs on few iterations: ``if step % N == 0``,
``if i == len(loader) - 1``, ``if should_log:``, a time-based guard, a leading ``if step
% N: continue``, and a flag that is off unless asked for (``if args.profile:`` where the
option defaults to False). ``if (step + 1) % grad_accum == 0`` is not rare: it is the
optimizer step itself.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    LOADER_WRAPPERS,
    LOADERISH_RE,
    MODEL_RE,
    callee_tail,
    dotted,
    iter_shallow,
    last_name,
    param_default,
    param_names,
    unwrap_iterable,
)
from pitstop.lint.index import FuncDef
from pitstop.lint.settings import option_name, options_owner
from pitstop.lint.steps import is_optimizer_class, is_step_call
from pitstop.lint.values_kinds import is_loader_kind

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

# A loop over the program's parts (`for optim in optimizers:`, `for group in
# opt.param_groups:`) runs once per part: stepping inside it is no training loop of its
# own (the batch loop around it, if any, is)
PARTS_RE = re.compile(r"optim|sched|param|group|models?$|modules?$|layers?$|blocks?$|nets?$",
                      re.IGNORECASE)
# Periods of logging/evaluation guards: an option of that name whose default is 1 makes
# `step % N == 0` hold on every step, whatever owns it (`train.log_interval`)
LOGGISH = frozenset({"log_interval", "log_every", "log_freq", "log_steps", "print_freq",
                     "log_every_n_steps", "logging_steps", "print_every", "log_iter"})
TIME_FUNCS = frozenset({"time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns"})
RARE_NAME_RE = re.compile(
    r"log|print|eval|save|ckpt|checkpoint|verbose|debug|display|report|visuali|plot|"
    r"sample|valid|profil|dump|write|last|first|final|flush|summary|track|monitor",
    re.IGNORECASE,
)
# A flag that turns the accelerator on (`-gpu` with action="store_true", `if args.cuda:`)
# is off by default but is how the program runs on a GPU, the case the rules are about:
# the code under it is the common path, not an opt-in.
DEVICE_FLAG_RE = re.compile(r"^(use_?|with_?|on_?|enable_?|run_on_)?(gpus?|cuda|accel|"
                            r"accelerator|device)(_?(enabled|available|on))?$", re.IGNORECASE)
# Counts that say how a run is set up, not where an iteration is (`n_gpu == 1`).
SETUP_NAME_RE = re.compile(r"gpu|world|device|proc|node|worker", re.IGNORECASE)
LASTISH_RE = re.compile(r"last|final|end|max|total|num_|n_|len|steps|epochs|iters", re.IGNORECASE)
# A modulus that is the gradient-accumulation period: its `== 0` branch is the optimizer
# step, which runs every step, not rarely.
ACCUM_RE = re.compile(r"accum|grad_acc|update_freq|accumulate|micro|sub_batch|n_batches_per",
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
# A step of evaluation, not of training (`self._eval_step(batch)`, Lightning's
# `validation_step`): a loop calling one evaluates.
EVAL_STEP_RE = re.compile(r"^_*(eval(uate|uation)?|valid(ate|ation)?|val|test|predict|"
                          r"infer(ence)?)_step$", re.IGNORECASE)
# Iterables that count steps, not pieces of data.
COUNTERS = frozenset({"range", "trange", "reversed", "arange", "linspace", "count", "product"})
# `--do_train --do_eval`: the modes of a Hugging Face style script, which its README runs
# together; off by default, but not a request for extra work (`--do_predict` is one).
RUN_MODE_RE = re.compile(r"^do_(train|eval)$")
HANDED_BATCHES_RE = re.compile(r"loader|iter|data|batch|^dl$|^ds$|set$", re.IGNORECASE)
# Functions that hand out the next batch (a loop calling one takes a batch per iteration).
GET_BATCH_RE = re.compile(r"^(get|next|sample|load|fetch|draw)_batch(es)?$|^get_(train|val|eval)_"
                          r"batch$", re.IGNORECASE)
# Calls whose result is no batch even when handed a loader.
NOT_BATCHES = frozenset({"len", "range", "list", "sorted", "print", "str", "int", "float",
                         "isinstance", "getattr", "hasattr", "type", "id", "repr", "dict",
                         "set", "tuple", "sum", "max", "min"})


class LoopModel:
    """Loop classification and guard rarity for one module."""

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

    def _batchy(self, it: ast.expr, st: State, depth: int) -> bool:
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
            if LOADERISH_RE.search(name.rsplit(".", 1)[-1]):
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
            return self._batchy(it.value, st, depth + 1)
        return False

    def loop_batches(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> bool:
        """Does this loop take a batch per iteration (for over a batch source, or a while
        whose body pulls ``next(...)`` from one)?"""
        if isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_batch_source(loop.iter, st):
            return True
        for node in iter_shallow(loop.body, into_loops=False):
            if isinstance(node, ast.Call) and callee_tail(node) == "next" and node.args \
                    and self.is_batch_source(node.args[0], st):
                return True
            if isinstance(node, ast.Call) and GET_BATCH_RE.search(callee_tail(node)):
                return True  # `for k in range(eval_iters): x, y = get_batch("val")`
        return False

    # ------------------------------------------------------------------ classification
    def classify(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> str | None:
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

    def runs_model_eval(self, body: list[ast.stmt], st: State) -> bool:
        ctx = self.ctx
        calls_model = False
        for node in iter_shallow(body, into_loops=True):
            if isinstance(node, ast.Call):
                tail = callee_tail(node)
                if ("step" in tail and not EVAL_STEP_RE.search(tail)) or "backward" in tail \
                        or tail == "train":
                    return False
                if self.call_steps(node, st):
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
        return any(self.call_steps(c, st) for c in index.calls
                   if index.owner.get(c) in index.funcs_with_loops or index.module_loops) \
            or (bool(index.import_locals) and self.ctx.program.imports_training(self.ctx.key))

    # ------------------------------------------------------------------ guards
    def _period_is_one(self, period: ast.expr, st: State) -> bool:
        """The ``N`` of ``step % N`` is 1 by default: a literal, a parameter default, an
        option or config field (``log_interval: int = 1``, ``TrainArgs(log_interval=1)``)."""
        if isinstance(period, ast.Constant):
            return period.value == 1
        if isinstance(period, ast.Name):
            if st.func is not None and param_default(st.func, period.id) == 1:
                return True
            top = self.ctx.index.scoped_assigns.get((None, period.id), ())
            if len(top) == 1 and isinstance(top[0].value, ast.Constant) and top[0].value.value == 1:
                return True  # `log_interval = 1` at the top of the script
            setting = self.ctx.program.setting(period.id) if period.id in LOGGISH else None
            return setting is not None and setting.default == 1
        if isinstance(period, ast.Attribute):
            setting = self.ctx.program.setting(period.attr)
            return setting is not None and setting.default == 1 and (
                options_owner(period.value) or period.attr in LOGGISH)
        return False

    def rarity(self, test: ast.AST, st: State) -> str | None:
        """``"rare"`` when ``test`` holds on few iterations (``step % N == 0``),
        ``"frequent"`` for its complement (``step % N != 0``), None when unknown."""
        ctx = self.ctx
        if isinstance(test, ast.BoolOp):
            parts = [self.rarity(v, st) for v in test.values]
            if isinstance(test.op, ast.And):
                return "rare" if "rare" in parts else None
            return "rare" if all(p == "rare" for p in parts) else None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.rarity(test.operand, st)
            return {"rare": "frequent", "frequent": "rare"}.get(inner or "")
        if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
            return None if _accumulation(test) else "frequent"
        if self._first_time(test):
            return "rare"
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op = test.ops[0]
            sides = [test.left, test.comparators[0]]
            mods = [n for s in sides for n in ast.walk(s)
                    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)]
            if mods and all(_accumulation(m) for m in mods):
                return None
            has_mod = bool(mods)
            if isinstance(op, ast.Eq):
                if has_mod:
                    # `step % log_interval == 0` with log_interval defaulting to 1: every step
                    return None if any(self._period_is_one(m.right, st) for m in mods) \
                        else "rare"
                names = " ".join(dotted(s) or "" for s in sides).lower()
                if "rank" in names or "master" in names:
                    return None
                if ctx.gpu_program and any(isinstance(s, ast.Constant) and s.value == "cpu"
                                           for s in sides):
                    return "rare"  # `if mode == "cpu":` a fallback off the GPU path
                if any(option_name(s) is not None or SETUP_NAME_RE.search(
                        (dotted(s) or "").rsplit(".", 1)[-1]) for s in sides):
                    return None  # `if params.num_gpus == 1:`: how the run is set up
                for s in sides:
                    if isinstance(s, ast.Constant) and isinstance(s.value, int):
                        return "rare"
                    if isinstance(s, ast.BinOp) and isinstance(s.op, ast.Sub):
                        return "rare"
                    n = dotted(s)
                    if n and LASTISH_RE.search(n.rsplit(".", 1)[-1]):
                        return "rare"
                return None
            if isinstance(op, ast.NotEq):
                if ctx.gpu_program and any(isinstance(s, ast.Constant) and s.value == "cpu"
                                           for s in sides):
                    return "frequent"
                return "frequent" if has_mod else None
            if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(test.left, ast.Name) \
                    and isinstance(test.comparators[0], ast.Constant) \
                    and isinstance(test.comparators[0].value, int) \
                    and not isinstance(test.comparators[0].value, bool) \
                    and test.comparators[0].value <= 16:
                return "rare"  # `if j <= 4:` the first few iterations only
            if isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
                for side in sides:
                    for sub in ast.walk(side):
                        if isinstance(sub, ast.Call) and callee_tail(sub) in TIME_FUNCS:
                            return "rare"
                return None
            return None
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = dotted(test) or ""
            if name in ctx.rare_names or (RARE_NAME_RE.search(name.rsplit(".", 1)[-1])
                                          and not self._mode_switch(name)):
                return "rare"
            if self._opt_in(test, st):
                return "rare"
            return None
        if isinstance(test, ast.Subscript) and self._opt_in(test, st):
            return "rare"  # `if config["enable_tensorboard"]:` (store_true)
        if isinstance(test, ast.Call):
            tail = callee_tail(test)
            if RARE_NAME_RE.search(tail) or tail in {"every", "should_log", "is_log_step"}:
                return "rare"
            if isinstance(test.func, ast.Call) and callee_tail(test.func) == "every":
                return "rare"
        return None

    def _first_time(self, test: ast.AST) -> bool:
        """`if preds is None: preds = x.cpu()` inside a loop: the branch that fills the
        name runs on the first iteration only (the `else:` is the per-iteration one)."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None):
            return False
        name = dotted(test.left)
        branch = self.ctx.parents.get(test)
        if not name or not isinstance(branch, ast.If) or branch.test is not test:
            return False
        # (`preds = None` above, before the loop: not `if prior is None:` of a parameter,
        # which is filled on every call that leaves it out)
        scope = self.ctx.scope_of(test)
        loop = self.ctx.enclosing(test, (ast.For, ast.AsyncFor, ast.While))
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            return False
        initialised = any(  # (reset inside the loop, it would be "every iteration")
            isinstance(a.value, ast.Constant) and a.value.value is None and a.lineno < loop.lineno
            for a in self.ctx.index.scoped_assigns.get((scope, name), ()))
        return initialised and any(
            isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets)
            for stmt in branch.body for n in ast.walk(stmt))

    def runs_once(self, loop: ast.AST) -> bool:
        """`for epoch in range(1)`, or over `range(args.epochs)` whose option defaults to
        1: the loop body runs once, so what is inside it is not repeated."""
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and callee_tail(loop.iter) == "range" and len(loop.iter.args) == 1):
            return False
        n = loop.iter.args[0]
        if isinstance(n, ast.Constant):
            return n.value == 1
        if isinstance(n, ast.Call) and callee_tail(n) == "int" and n.args:
            n = n.args[0]  # range(int(args.epochs))
        if isinstance(n, ast.Attribute) and options_owner(n.value):
            st = self.ctx.program.setting(n.attr)
            return st is not None and st.default in (1, "1")
        return False

    def gates_progress(self, test: ast.AST, st: State) -> bool:
        """`if cur_nimg < tick_start + tick_len: continue`: what follows waits for a
        counter to pass a threshold -- it runs once in a while, not every iteration."""
        if isinstance(test, ast.BoolOp):
            return any(self.gates_progress(v, st) for v in test.values)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                test.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            from pitstop.lint.values_kinds import GPU, MASK

            sides = [test.left, test.comparators[0]]
            if isinstance(test.ops[0], (ast.Lt, ast.LtE)) and isinstance(test.left, ast.Name) \
                    and test.left.id == _loop_index(st):
                return False  # `if iter < resume_at: continue`: skips the first iterations once
            return all(self.ctx.values.kind(s, st) not in (GPU, MASK) for s in sides) and any(
                isinstance(s, ast.BinOp) for s in sides)
        return False

    def periodic(self, test: ast.AST, st: State) -> bool:
        """Does ``test`` hold every N iterations (``(i + 1) % accum == 0``) or rarely?"""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self.periodic(v, st) for v in test.values)
        if isinstance(test, ast.BoolOp):
            return all(self.periodic(v, st) for v in test.values)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                        for s in (test.left, test.comparators[0]) for n in ast.walk(s)):
            return True
        if isinstance(test, (ast.Name, ast.Attribute)) and re.search(
                r"sync_gradients|accum|update|step", (dotted(test) or "").rsplit(".", 1)[-1]):
            return True  # `if accelerator.sync_gradients:`, `if do_update:`
        return self.rarity(test, st) == "rare"

    def opt_in(self, test: ast.AST, st: State) -> bool:
        """Is ``test`` a flag that is off unless asked for (also `if a and flag:`)?"""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self.opt_in(v, st) for v in test.values)
        return isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)) \
            and self._opt_in(test, st)

    def _attribute_source(self, attr: str, method: FuncDef) -> ast.expr | None:
        """What `__init__` of ``method``'s class assigns to `self.<attr>`, if it is an
        option (`self.ngpu = opt.ngpu`)."""
        found = self._init_assignment(attr, method)
        value = found[1].value if found is not None else None
        return value if isinstance(value, ast.Attribute) and options_owner(value.value) else None

    def _init_assignment(self, attr: str, method: FuncDef
                         ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Assign] | None:
        """The `__init__` of ``method``'s class and its first `self.<attr> = ...`."""
        index = self.ctx.index
        cls = index.class_of.get(method)
        init = index.method(cls, "__init__") if cls is not None else None
        for stmt in ast.walk(init) if init is not None else ():
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Attribute) \
                    and stmt.targets[0].attr == attr:
                assert init is not None
                return init, stmt
        return None

    def under_opt_in(self, node: ast.AST) -> bool:
        """Does ``node`` run only when the user asks: in the body of an `if` on an opt-in
        flag (`if args.dp:`), or in the `else:` of `if not flag:`, in its own function?"""
        from pitstop.lint.walk import State

        st = State(func=self.ctx.scope_of(node))
        parents = self.ctx.parents
        child, parent = node, parents.get(node)
        while parent is not None and not isinstance(
                parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if isinstance(parent, ast.If):
                test = parent.test
                if child in parent.body and self.opt_in(test, st):
                    return True
                if child in parent.orelse and isinstance(test, ast.UnaryOp) \
                        and isinstance(test.op, ast.Not) and self.opt_in(test.operand, st):
                    return True
            child, parent = parent, parents.get(parent)
        return False

    def off_by_default_level(self, test: ast.AST, st: State | None = None) -> bool:
        """`if opt.debug > 0:` (or `!= 0`, `>= 1`) with the option 0 by default, `if
        args.n_gpu > 1:` with `--n_gpu 1`: an option compared with a number, false at the
        option's default -- a level of extra work (visualisation, checks, the multi-GPU
        path) that the user turns on. Not when the program sets the option itself
        (`args.n_gpu = torch.cuda.device_count()`: the machine decides). Only for code
        inside a hot loop: a whole loop under such a test (`if args.warmup_epochs > 0:`)
        still runs whenever the user asks, and is linted as a loop."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.comparators[0], ast.Constant)
                and isinstance(test.ops[0], (ast.Gt, ast.GtE, ast.NotEq))):
            return False
        left = test.left
        if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) \
                and left.value.id == "self" and st is not None and st.func is not None:
            left = self._attribute_source(left.attr, st.func) or left  # `self.ngpu = opt.ngpu`
        if not (isinstance(left, ast.Attribute) and options_owner(left.value)):
            return False
        if any(not isinstance(a.value, ast.Constant)
               for a in self.ctx.index.assigns_by_name.get(dotted(left) or "", ())):
            return False
        setting = self.ctx.program.setting(left.attr)
        bound = test.comparators[0].value
        if setting is None or not isinstance(setting.default, (int, bool)) \
                or not isinstance(bound, int) or isinstance(bound, bool):
            return False
        op, default = test.ops[0], int(setting.default)
        on = default > bound if isinstance(op, ast.Gt) else (
            default >= bound if isinstance(op, ast.GtE) else default != bound)
        return not on

    def _opt_in(self, test: ast.Name | ast.Attribute | ast.Subscript, st: State) -> bool:
        """A flag that is off unless the user asks: an option or config field defaulting
        to False/None, or a parameter of the function defaulting to False. (Not a device
        switch: `if opt.cuda:` guards the GPU path, which is how a GPU program runs.)"""
        ctx = self.ctx
        name = test.attr if isinstance(test, ast.Attribute) else (
            test.id if isinstance(test, ast.Name) else None)
        if name is not None and (DEVICE_FLAG_RE.match(name) or RUN_MODE_RE.match(name)):
            return False
        option = option_name(test)  # `args.visdom`, `config["enable_tensorboard"]`
        if option is not None:
            setting = ctx.program.setting(option)
            return setting is not None and setting.default in (False, None, 0)
        if isinstance(test, ast.Subscript):
            return False
        if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) \
                and test.value.id == "self" and st.func is not None:
            return self._opt_in_attribute(test.attr, st.func)
        if isinstance(test, ast.Name):
            if st.func is not None and param_default(st.func, test.id) is False:
                # (`use_adv_cls=False` that a caller passes `use_adv_cls=use_adv_cls`:
                # on whenever that caller says so)
                return not any(self.ctx.program.switched_on(ctx.key, qn, test.id)
                               for qn in self._qualnames_called(st.func))
            # `wass_metric = args.wass_flag` ... `if wass_metric:` (assigned once)
            assigns = ctx.index.visible_assigns(st.func, test.id)
            if len(assigns) == 1 and isinstance(assigns[0].value, ast.Attribute) \
                    and options_owner(assigns[0].value.value):
                return self._opt_in(assigns[0].value, st)
        return False


    def _qualnames_called(self, fn: FuncDef) -> list[str]:
        """The names a call of ``fn`` can be made under: its own, and for a method that
        overrides one of a base class of this module, the base's (`Trainer.valid` calls
        `self.iteration(epoch, loader, full_sort)`, which runs `FinetuneTrainer.iteration`)."""
        index = self.ctx.index
        names = [index.qualname_of(fn)]
        cls = index.class_of.get(fn)
        seen: set[str] = set()
        todo = [b for b in (cls.bases if cls is not None else []) if isinstance(b, ast.Name)]
        while todo:
            base = index.classes.get(todo.pop().id)
            if base is None or base.name in seen:
                continue
            seen.add(base.name)
            if index.method(base, fn.name) is not None:
                names.append(f"{base.name}.{fn.name}")
            todo += [b for b in base.bases if isinstance(b, ast.Name)]
        return names

    def _opt_in_attribute(self, attr: str, method: ast.FunctionDef | ast.AsyncFunctionDef
                          ) -> bool:
        """`if self.variational:` where `__init__(self, ..., variational=False)` stores
        `self.variational = variational` and no call in the program passes it anything but
        False/None (by keyword, position or `**kw`); `self.binaryCE = False` that no other
        assignment in the module turns on; `self.flag = args.flag` of an option that
        defaults off: off unless the user builds or configures the object so."""
        from pitstop.lint.walk import State

        found = self._init_assignment(attr, method)
        if found is None:
            return False
        init, stmt = found
        cls = self.ctx.index.class_of[method]
        if isinstance(stmt.value, ast.Name):
            param = stmt.value.id
            return param_default(init, param) is False and not self.ctx.program.switched_on(
                self.ctx.key, f"{cls.name}.__init__", param)
        if isinstance(stmt.value, (ast.Attribute, ast.Subscript)) \
                and not (isinstance(stmt.value, ast.Attribute)
                         and dotted(stmt.value.value) == "self"):
            # `self.visdom_epoch = args.visdom_epoch` (an option that defaults to 0)
            return self._opt_in(stmt.value, State(func=init))
        if isinstance(stmt.value, ast.Constant) and stmt.value.value is False:
            # `self.binaryCE = False` (set by whoever builds the model, when asked)
            return not self._turned_on_elsewhere(attr)
        return False

    def _mode_switch(self, name: str) -> bool:
        """`self._do_log`, set to True in `train()` and to False in `val()`: a mode of the
        object, on for a whole pass, not a gate opened every N steps (`should_log = step
        % n == 0`): every assignment of the attribute in this module is a literal True or
        False, and one of them is True."""
        if not name.startswith("self."):
            return False
        attr = name.split(".", 1)[1]
        assigns = [a for n, group in self.ctx.index.assigns_by_name.items()
                   if n.startswith("self.") and n.split(".", 1)[1] == attr for a in group]
        if not assigns or not all(isinstance(a.value, ast.Constant)
                                  and isinstance(a.value.value, bool) for a in assigns):
            return False
        # (each a statement of its method's own body, not under an `if` or in a loop:
        # `if step % 100 == 0: self.should_log = True` is a gate set every step)
        parents = self.ctx.parents
        if not all(isinstance(parents.get(a), (ast.FunctionDef, ast.AsyncFunctionDef))
                   for a in assigns):
            return False
        on = {parents.get(a) for a in assigns if a.value.value is True}  # type: ignore[union-attr]
        off = {parents.get(a) for a in assigns if a.value.value is False}  # type: ignore[union-attr]
        return bool(on) and not (on & off)

    def _turned_on_elsewhere(self, attr: str) -> bool:
        """Does an assignment `x.attr = value` of this module (other than a False/None
        literal) turn the attribute on?"""
        memo = self._turned_on
        if memo is None:
            memo = self._turned_on = set()
            for name, assigns in self.ctx.index.assigns_by_name.items():
                if "." in name and any(
                        not (isinstance(a.value, ast.Constant) and a.value.value in (False, None))
                        for a in assigns):
                    memo.add(name.rsplit(".", 1)[-1])
        return attr in memo

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


def _eval_switched(fn: FuncDef, loop: ast.stmt) -> list[ast.expr]:
    """What ``fn`` switches to eval mode before ``loop`` (`model` of `model.eval()`)."""
    return [c.func.value for c in iter_shallow(fn.body, into_loops=False)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "eval" and not c.args and c.lineno < loop.lineno]


def _loop_index(st: State) -> str | None:
    """The counter of the hot loop: `i` of `for i, batch in enumerate(loader):`."""
    loop = st.hot.node if st.hot is not None else None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Tuple) \
            and loop.target.elts and isinstance(loop.target.elts[0], ast.Name) \
            and isinstance(loop.iter, ast.Call) and callee_tail(loop.iter) == "enumerate":
        return loop.target.elts[0].id
    return None


def is_env_step(node: ast.AST) -> bool:
    """`envs.step(action)`: an RL environment stepped."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "step" and ENV_RE.search(last_name(node.func.value) or "") is not None


def _accumulation(mod: ast.BinOp) -> bool:
    """``step % args.gradient_accumulation_steps``: the period of optimizer steps."""
    return bool(ACCUM_RE.search(ast.unparse(mod.right)))


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
