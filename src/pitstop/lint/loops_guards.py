"""Guards inside a hot loop: which code under an ``if`` runs on few iterations.

Inside a hot loop, code under a rare guard runs on few iterations: ``if step % N == 0``,
``if i == len(loader) - 1``, ``if should_log:``, a time-based guard, a leading ``if step
% N: continue``, and a flag that is off unless asked for (``if args.profile:`` where the
option defaults to False). ``if (step + 1) % grad_accum == 0`` is not rare: it is the
optimizer step itself.

:class:`LoopGuards` is the part of :class:`~pitstop.lint.loops.LoopModel` that answers
these questions.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import callee_tail, dotted, param_default
from pitstop.lint.index import FuncDef
from pitstop.lint.settings import option_name, options_owner

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

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
# `--do_train --do_eval`: the modes of a Hugging Face style script, which its README runs
# together; off by default, but not a request for extra work (`--do_predict` is one).
RUN_MODE_RE = re.compile(r"^do_(train|eval)$")


class LoopGuards:
    """The part of :class:`~pitstop.lint.loops.LoopModel` that judges guards: rarity,
    periods, progress gates and opt-in flags."""

    ctx: ModuleContext
    _turned_on: set[str] | None  # (set by LoopModel.__init__)

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


def _loop_index(st: State) -> str | None:
    """The counter of the hot loop: `i` of `for i, batch in enumerate(loader):`."""
    loop = st.hot.node if st.hot is not None else None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Tuple) \
            and loop.target.elts and isinstance(loop.target.elts[0], ast.Name) \
            and isinstance(loop.iter, ast.Call) and callee_tail(loop.iter) == "enumerate":
        return loop.target.elts[0].id
    return None


def _accumulation(mod: ast.BinOp) -> bool:
    """``step % args.gradient_accumulation_steps``: the period of optimizer steps."""
    return bool(ACCUM_RE.search(ast.unparse(mod.right)))
