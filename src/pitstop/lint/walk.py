"""The walk: statement by statement through a module and its functions, keeping the
value of every name (:mod:`pitstop.lint.values`), entering hot loops
(:mod:`pitstop.lint.loops`) and calling the per-batch rules on every expression that runs
unguarded once per batch. Calls made per batch are followed into the functions they
reach -- in this module or in another module of the program -- with the arguments'
kinds bound to the callee's parameters; findings there are reported in the callee's
file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    callee_tail,
    children,
    data_root,
    dotted,
    is_main_guard,
    kwarg,
    last_name,
    move_target,
    root_name,
    target_names,
)
from pitstop.lint.entry_env import EntryEnv
from pitstop.lint.index import LOOPS, FuncDef
from pitstop.lint.loops import ENGINES, LIGHTNING_HOOKS
from pitstop.lint.steps import is_optimizer_class
from pitstop.lint.stmt_shapes import (
    NAMED_ITEMS,
    only_reports,
    refills_cache,
    serves_cached,
    used_as_string,
)
from pitstop.lint.values_kinds import (
    CPU,
    DERIVED,
    GPU,
    GPU_LIST,
    MASK,
    METER,
    MODEL,
    PARAM_GROUP,
    PARAM_GROUPS,
    PARAM_STATE,
    is_loader_kind,
    is_model,
    meter_key,
    placed,
)
from pitstop.lint.walk_follow import CallFollowing
from pitstop.lint.walk_iterables import LoopIterables

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext

# Functions that time or profile code: their loops synchronize on purpose.
MEASURE_RE = re.compile(r"profil|bench|throughput|timing|measure|speed_test|latency",
                        re.IGNORECASE)
# The node types the per-batch rules look at (the others are walked through, not shown).
RULE_NODES = frozenset({ast.Call, ast.FormattedValue, ast.Subscript, ast.BinOp, ast.If,
                        ast.While, ast.Assert, ast.Slice, ast.IfExp, ast.ListComp, ast.SetComp,
                        ast.GeneratorExp, ast.DictComp})


@dataclass(frozen=True)
class HotLoop:
    """A loop whose body runs once per batch."""

    node: ast.AST
    kind: str  # "train", "eval", "forward" (a module's forward()) or "step" (an optimizer's)
    line: int
    path: str = ""
    generates: bool = False  # calls .generate(): decoding reads every token on the host
    measures: bool = False  # in a benchmark/profiling function: it syncs to time on purpose

    @property
    def describe(self) -> str:
        if self.kind == "forward":
            return f"`forward` (line {self.line}), which runs once per batch"
        if self.kind == "step":
            return f"the optimizer's `step` (line {self.line}), which runs once per training step"
        what = "training" if self.kind == "train" else "evaluation"
        return f"the {what} loop at line {self.line}"


@dataclass
class State:
    """Where the walk is: inside which hot loop, under a rare guard or not."""

    hot: HotLoop | None = None
    rare: bool = False
    env: dict[str, str] = field(default_factory=dict)
    batch: set[str] = field(default_factory=set)  # names holding (host) batch data
    batch_src: dict[str, str] = field(default_factory=dict)  # batch name -> loader kind
    via: str = ""  # "(`f` is called per batch from line N)" when the walk followed a call
    depth: int = 0
    func: FuncDef | None = None
    no_grad: bool = False
    nested: bool = False  # inside a plain loop within the hot loop (`break` leaves only it)
    optional: bool = False  # under an opt-in flag that is off by default: loops here are rare

    @property
    def per_batch(self) -> bool:
        return self.hot is not None and not self.rare


HotRule = Callable[["ModuleContext", ast.AST, State], None]


class Walker(CallFollowing, LoopIterables):
    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self.rules: list[HotRule] = []
        self._walked: set[tuple[int, frozenset[str], str]] = set()
        self.entry = EntryEnv(ctx)

    # ------------------------------------------------------------------ entry
    def run(self, rules: list[HotRule]) -> None:
        """Walk the module and every function, calling ``rules`` on per-batch code."""
        ctx = self.ctx
        index = ctx.index
        self.rules = rules
        top = State()
        body = index.tree.body
        if ctx.program.imported(ctx.key):
            # a module that the program imports runs its `if __name__ == "__main__":`
            # block only when started on its own: a self-test, not this program's loop
            body = [s for s in body if not is_main_guard(s)]
        self.walk_body(body, top)
        global_env = dict(top.env)
        engine_steps = self._framework_loops()
        for fns in index.functions.values():
            for fn in fns:
                hook = LIGHTNING_HOOKS.get(fn.name)
                cls = index.class_of.get(fn)
                is_module = cls is not None and (cls.name in index.module_classes or
                                                 ctx.program.class_is(ctx.key, cls.name, "module"))
                if is_module and (fn.name == "forward" or (
                        fn.name.startswith("forward_") and self._forward_inherited(cls))):
                    # (`forward_features` of a subclass of a library model whose forward()
                    # calls it: once per batch as well)
                    # forward() runs once per batch. Its arguments' devices are unknown, so
                    # only rules that do not depend on them look at it (tensor-on-device).
                    env = {**global_env, **self.entry.class_env(cls)}  # type: ignore[arg-type]
                    if ctx.gpu_program:
                        env.update(self.entry.forward_inputs(fn))
                    hot = HotLoop(fn, "forward", fn.lineno, ctx.path)
                    self.walk_body(fn.body, State(hot=hot, env=env, func=fn))
                    continue
                if fn in engine_steps:
                    self._walk_engine_step(fn, global_env)
                    continue
                if fn.name == "step" and cls is not None and ctx.gpu_program \
                        and is_optimizer_class(cls, ctx.aliases) and not ctx.unused_definition(fn):
                    # an optimizer of the program's own: step() runs once per training
                    # step, over the model's parameters (`for p in group["params"]`)
                    env = {**global_env, **self.entry.class_env(cls), "self.param_groups": PARAM_GROUPS,
                           "self.state": PARAM_STATE}
                    hot = HotLoop(fn, "step", fn.lineno, ctx.path)
                    self.walk_body(fn.body, State(hot=hot, env=env, func=fn))
                    continue
                if fn not in index.funcs_with_loops and not hook:
                    continue  # no loop of its own: walked only when a hot loop calls it
                env = dict(global_env)
                if cls is not None:
                    env.update(self.entry.class_env(cls))
                env.update(self.entry.param_env(fn))
                if hook and is_module:
                    hot = HotLoop(fn, hook, fn.lineno, ctx.path)
                    params = [a.arg for a in fn.args.args[1:]]
                    st = State(hot=hot, env=env, func=fn,
                               via=f"(`{fn.name}` runs once per batch)")
                    if ctx.gpu_program and params:
                        # the hook's batch (its first argument) arrives on the device; the
                        # others are indices, or the author's own flags and sizes
                        st.env[params[0]] = GPU
                    self.walk_body(fn.body, st)
                else:
                    # (`if args.eval: test(args)`, the flag off by default: loops there are
                    # run on request, as those under such a flag are)
                    self.walk_body(fn.body, State(env=env, func=fn,
                                                  optional=ctx.on_request_only(fn)))

    def _forward_inherited(self, cls: ast.ClassDef | None) -> bool:
        """Does this module class take its forward() from a base the program does not
        show (timm's VisionTransformer, a torchvision model)?"""
        if cls is None or any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))
                              and b.name == "forward" for b in cls.body):
            return False
        return not self.ctx.program.defines(self.ctx.key, f"{cls.name}.forward")

    def _framework_loops(self) -> set[FuncDef]:
        """Training loops run by a framework: ``create_supervised_trainer(...)`` (a loop
        of its own, which moves batches to ``device``) and the step functions handed to
        an ignite ``Engine``, which run once per batch. Returns the latter."""
        ctx = self.ctx
        index = ctx.index
        steps: set[FuncDef] = set()
        for tail in ENGINES:
            for call in index.calls_by_tail.get(tail, ()):
                arg = call.args[0] if call.args else None
                if isinstance(arg, ast.Name):
                    fn = index.module_function(arg.id)
                    if fn is not None:
                        steps.add(fn)
        for tail in ("create_supervised_trainer", "create_supervised_evaluator"):
            for call in index.calls_by_tail.get(tail, ()):
                kind = "train" if tail.endswith("trainer") else "eval"
                ctx.hot_loops.append(HotLoop(call, kind, call.lineno, ctx.path))
                if kind == "train":
                    ctx.has_train_loop = True
                dev = kwarg(call, "device")
                if dev is not None and ctx.devices.is_gpu(dev.value, index.owner.get(call)):
                    ctx.note_batches_to_gpu(None)
        return steps

    def _walk_engine_step(self, fn: FuncDef, global_env: dict[str, str]) -> None:
        """``def train_step(engine, batch)`` handed to ``Engine``: one call per batch."""
        ctx = self.ctx
        st = State(env=dict(global_env), func=fn)
        kind = "train" if ctx.loops.has_markers(fn.body, st, into_loops=False) else "eval"
        hot = HotLoop(fn, kind, fn.lineno, ctx.path)
        ctx.hot_loops.append(hot)
        if kind == "train":
            ctx.has_train_loop = True
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        st = State(hot=hot, env=dict(global_env), func=fn,
                   via=f"(`{fn.name}` runs once per batch of its Engine)")
        if len(params) >= 2:
            st.batch.add(params[1])
        self.walk_body(fn.body, st)

    # ------------------------------------------------------------------ statements
    def walk_body(self, stmts: list[ast.stmt], st: State) -> None:
        rest = st
        loops = self.ctx.loops
        for i, stmt in enumerate(stmts):
            self.walk_stmt(stmt, rest)
            if rest.hot is not None and not rest.rare and isinstance(stmt, ast.If) \
                    and not stmt.orelse and all(isinstance(s, (ast.Continue, ast.Return))
                                                for s in stmt.body) \
                    and (loops.rarity(stmt.test, rest) == "frequent"
                         or loops.gates_progress(stmt.test, rest)):
                rest = replace(rest, rare=True)
            elif rest.hot is not None and not rest.rare and isinstance(stmt, ast.If) \
                    and not stmt.orelse and serves_cached(stmt, stmts[i + 1:]):
                rest = replace(rest, rare=True)  # what follows runs on a cache miss only

    def walk_stmt(self, stmt: ast.stmt, st: State) -> None:
        ctx = self.ctx
        values = ctx.values
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(stmt, ast.Assign):
            self.visit_expr(stmt.value, st)
            if st.per_batch and any(isinstance(t, ast.Subscript) for t in stmt.targets):
                for rule in self.rules:  # `losses[k] = loss` into a CPU tensor copies it
                    rule(ctx, stmt, st)
            values.bind(stmt.targets, stmt.value, st)
            for t in stmt.targets:  # `losses["d"] = d_loss`: a container of GPU tensors
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                        and st.env.get(t.value.id) in (None, CPU, DERIVED) \
                        and not _host_tensor_name(ctx, t.value.id, st):
                    k = values.kind(stmt.value, st)
                    if k in (GPU, MASK):
                        st.env[t.value.id] = GPU
                    elif k == DERIVED and st.env.get(t.value.id) != GPU:
                        st.env[t.value.id] = DERIVED
            if isinstance(stmt.value, ast.Call) and values.is_model_callee(stmt.value.func, st) \
                    and callee_tail(stmt.value) in {"to", "cuda"}:
                for t in stmt.targets:
                    for n in target_names(t):
                        if not is_model(st.env.get(n)):
                            st.env[n] = MODEL
        elif isinstance(stmt, ast.AugAssign):
            self.visit_expr(stmt.value, st)
            if st.per_batch and isinstance(stmt.target, ast.Subscript):
                for rule in self.rules:  # `m[:, mask] *= 0` reads and writes through a mask
                    rule(ctx, stmt, st)
            name = dotted(stmt.target)
            if name:
                values.accumulate(name, stmt.value, st)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.visit_expr(stmt.value, st)
                values.bind([stmt.target], stmt.value, st)
        elif isinstance(stmt, ast.Expr):
            self.visit_expr(stmt.value, st)
            value = stmt.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr == "update" and value.args:
                meter = meter_key(value.func.value)  # `top1.update(acc1[0], n)`: a GPU meter
                held = st.env.get(meter or "")
                if meter and (held in (None, CPU, DERIVED) or held.startswith("obj@")) \
                        and values.kind(value.args[0], st) in (GPU, MASK):
                    st.env[meter + METER] = GPU
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr in {"append", "extend"} and len(value.args) == 1:
                name = dotted(value.func.value)
                added = value.args[0]
                if value.func.attr == "extend" and isinstance(added, (ast.List, ast.Tuple)) \
                        and len(added.elts) == 1:
                    added = added.elts[0]
                if name and st.env.get(name) is None and values.kind(added, st) in (GPU, MASK):
                    st.env[name] = GPU_LIST  # `all_b.append(b[idx])`: torch.cat(all_b) is GPU
            if isinstance(value, ast.Call) and st.batch and values.moves_batch(value, st):
                for a in value.args:  # `batch_to_device(batch, device)` moves it in place
                    root = a.id if isinstance(a, ast.Name) else None
                    if root in st.batch:
                        st.batch.discard(root)
                        st.env[root] = GPU
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.visit_expr(stmt.value, st)
        elif isinstance(stmt, ast.If):
            self.visit_expr(stmt.test, st)
            self.check_test(stmt.test, stmt, st)
            rare = ctx.loops.rarity(stmt.test, st) == "rare"
            if rare and st.hot is not None and ctx.loops.has_markers(stmt.body, st, into_loops=False):
                rare = False  # `if (i + 1) % n_critic == 0:` around G's step: every update
            if not rare and st.hot is not None and ctx.loops.off_by_default_level(stmt.test, st) \
                    and not ctx.loops.has_markers(stmt.body, st, into_loops=False):
                # `if opt.debug > 0:` with --debug 0 by default, `if args.n_gpu > 1:` with
                # --n_gpu 1: off unless asked
                rare = True
            if not rare and st.hot is not None and refills_cache(stmt) \
                    and not ctx.loops.has_markers(stmt.body, st, into_loops=False):
                rare = True  # `if self.grid[i].shape != x.shape: self.grid[i] = ...`: a cache
            if st.hot is None and not st.optional and ctx.loops.opt_in(stmt.test, st):
                # `if use_fsdp_eval:` (a parameter defaulting to False) around a loop
                self.walk_body(stmt.body, replace(st, optional=True))
                self.walk_body(stmt.orelse, st)
                return
            # (a test on GPU values that only reports, `if torch.min(y) < -1: print(...)`,
            # checks the data: its body is the exception, the test itself is the sync)
            checks_data = st.per_batch and not stmt.orelse and only_reports(stmt.body) \
                and ctx.values.kind(stmt.test, st) in (GPU, MASK)
            self.walk_body(stmt.body, replace(st, rare=True) if st.hot and (
                rare or checks_data or self._leaves_loop(stmt.body, st)) else st)
            # (a body that ends in `continue`/`break`/`return`/`raise` reaches no code below)
            after_body = dict(st.env) if stmt.orelse and not (stmt.body and isinstance(
                stmt.body[-1], (ast.Continue, ast.Break, ast.Return, ast.Raise))) else None
            self.walk_body(stmt.orelse, replace(st, rare=True) if st.hot and stmt.orelse
                           and (self._leaves_loop(stmt.orelse, st) or serves_cached(stmt))
                           else st)
            if after_body:  # a GPU value on one branch may be what reaches the code below
                for name, k in after_body.items():
                    if k in (GPU, MASK) and st.env.get(name) not in (GPU, MASK):
                        st.env[name] = k
        elif isinstance(stmt, LOOPS):
            self._walk_loop(stmt, st)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            no_grad = st.no_grad
            for item in stmt.items:
                self.visit_expr(item.context_expr, st)
                ce = item.context_expr
                tail = callee_tail(ce) if isinstance(ce, ast.Call) else (last_name(ce) or "")
                if tail in {"no_grad", "inference_mode"}:
                    no_grad = True
            self.walk_body(stmt.body, replace(st, no_grad=no_grad) if no_grad != st.no_grad else st)
        elif isinstance(stmt, ast.Try) or (hasattr(ast, "TryStar") and isinstance(
                stmt, ast.TryStar)):
            self.walk_body(stmt.body, st)
            for h in stmt.handlers:  # runs on an error, not per batch
                self.walk_body(h.body, replace(st, rare=True) if st.hot else st)
            self.walk_body(stmt.orelse, st)
            self.walk_body(stmt.finalbody, st)
        elif isinstance(stmt, ast.Assert):
            self.visit_expr(stmt.test, st)
            self.check_test(stmt.test, stmt, st)
        elif hasattr(ast, "Match") and isinstance(stmt, ast.Match):
            self.visit_expr(stmt.subject, st)
            for case in stmt.cases:
                self.walk_body(case.body, st)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.visit_expr(child, st)

    def _leaves_loop(self, body: list[ast.stmt], st: State) -> bool:
        """Does this branch end by leaving the hot loop (so it runs at most once)? A
        `raise` always; a `return` when the hot loop is in this very function (not one
        followed into); a `break` when, moreover, no plain loop is nested in between."""
        last = body[-1] if body else None
        if isinstance(last, ast.Raise) or (
                isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and dotted(last.value.func) in {"sys.exit", "exit", "quit", "os._exit"}):
            return True  # (`print(loss_dict); sys.exit(1)` ends the run)
        if not isinstance(last, (ast.Return, ast.Break)) or st.hot is None or st.via:
            return False
        if isinstance(last, ast.Break) and st.nested:
            return False
        if st.hot.path and st.hot.path != self.ctx.path:
            return False
        return self.ctx.index.owner.get(st.hot.node) is st.func

    def _walk_loop(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> None:
        ctx = self.ctx
        kind = ctx.loops.classify(loop, st)
        if st.optional and kind != "train":
            kind = None  # (a training loop under an opt-in flag is a mode the user picks)
        if kind == "eval" and isinstance(loop, (ast.For, ast.AsyncFor)) \
                and self._one_batch_pass(loop.iter, st):
            kind = None  # `DataLoader(dev, batch_size=len(dev))`: the loop runs once
        if kind is not None and st.hot is None and st.func is not None \
                and ctx.unused_definition(st.func):
            kind = None  # a trainer class of the module that this program never uses
        inner = st
        if kind is not None and (st.hot is None or st.rare):
            hot = HotLoop(loop, kind, loop.lineno, ctx.path,
                          generates=kind == "eval" and _generates(loop),
                          measures=st.func is not None and MEASURE_RE.search(st.func.name) is not None)
            ctx.hot_loops.append(hot)
            if kind == "train":
                ctx.has_train_loop = True
            inner = replace(st, hot=hot, rare=False, via="", nested=False)
        elif st.hot is not None and not st.nested:
            inner = replace(st, nested=True)
        if isinstance(loop, ast.While):
            self.visit_expr(loop.test, inner)
            self.check_test(loop.test, loop, inner)
        else:
            self.visit_expr(loop.iter, st)
            batchy = ctx.loops.is_batch_source(loop.iter, st)
            src = self._loader_kind(loop.iter, st) if batchy else None
            on_device = batchy and placed(src or self._any_loader_kind(loop.iter, st))
            ik = ctx.values.kind(loop.iter, st)
            names = list(target_names(loop.target))
            part_of = data_root(loop.iter) if not batchy else None
            if part_of is not None and part_of in st.batch:
                batchy = True  # `for k, v in batch.items():` the items are batch data
                src = st.batch_src.get(part_of)
            for name in names:
                if on_device:  # accelerate / Fabric moved the batch already
                    inner.env[name] = GPU
                    inner.batch.discard(name)
                elif batchy:
                    inner.env.pop(name, None)
                    inner.batch.add(name)
                    if src:
                        inner.batch_src[name] = src
                elif ik in (GPU, GPU_LIST):  # (a list of GPU tensors: each item is one)
                    inner.env[name] = GPU
                elif ik == PARAM_GROUPS and len(names) == 1:
                    inner.env[name] = PARAM_GROUP
                else:
                    inner.env.pop(name, None)
            if not batchy and not on_device:
                for t, k in self._zipped_kinds(loop.iter, loop.target, st):
                    for name in target_names(t):
                        inner.env[name] = k
            if ik == GPU and isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2 \
                    and isinstance(loop.iter, ast.Call) and (
                        callee_tail(loop.iter) in NAMED_ITEMS
                        or used_as_string(loop.target.elts[0], loop.body)):
                for name in target_names(loop.target.elts[0]):
                    inner.env[name] = CPU  # the keys of a dict of GPU tensors are host values
            params = self._parameters_of_model(loop, st)
            if params is not None:  # `for name, p in model.named_parameters():`
                for name in target_names(params):
                    inner.env[name] = GPU
            if on_device:
                ctx.note_batches_to_gpu(src)
            # enumerate(loader): the counter is a host int, not batch data
            if batchy and isinstance(loop.iter, ast.Call) and callee_tail(loop.iter) == "enumerate" \
                    and isinstance(loop.target, ast.Tuple) and loop.target.elts:
                for name in target_names(loop.target.elts[0]):
                    inner.batch.discard(name)
                    inner.env[name] = CPU
            if batchy:
                # re-iterated: inside another loop, a hot loop, or a function called in one
                epochs = self._in_outer_loop(loop) or st.hot is not None or (
                    st.func is not None and ctx.program.called_in_loop(
                        ctx.key, ctx.index.qualname_of(st.func)))
                trains = kind == "train" or (st.hot is not None and st.hot.kind == "train"
                                             and not st.rare)
                ctx.note_loader_use(src, epochs=epochs, trains=trains)
        self.walk_body(loop.body, inner)
        self.walk_body(loop.orelse, st)

    def _in_outer_loop(self, loop: ast.AST) -> bool:
        """Inside another loop that runs more than once (`for epoch in range(1)`, or a
        `--epochs` option that defaults to 1, runs once)."""
        outer = self.ctx.index.outer_loop.get(loop)
        return outer is not None and not self.ctx.loops.runs_once(outer)

    def check_test(self, test: ast.expr, stmt: ast.AST, st: State) -> None:
        if not st.per_batch:
            return
        if isinstance(test, ast.Name) and st.func is not None and test.id in {
                a.arg for a in (st.func.args.vararg, st.func.args.kwarg) if a is not None}:
            return  # `if kwargs:` asks whether a dict (`*args`: a tuple) is empty
        k = self.ctx.values.kind(test, st)
        if k in (GPU, MASK):
            for rule in self.rules:
                rule(self.ctx, stmt, st)

    # ------------------------------------------------------------------ expressions
    def visit_expr(self, expr: ast.expr, st: State) -> None:
        """Run the hot rules on every node of ``expr`` when it runs once per batch, and
        follow calls into functions of the program."""
        if st.hot is None or st.rare:
            return
        stack: list[ast.AST] = [expr]
        ctx = self.ctx
        rules = self.rules
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for gen in node.generators:
                    rn = root_name(gen.iter.func.value) if isinstance(gen.iter, ast.Call) and \
                        isinstance(gen.iter.func, ast.Attribute) else root_name(gen.iter)
                    if rn in st.batch:
                        for n in target_names(gen.target):
                            st.batch.add(n)
                    elif ctx.values.kind(gen.iter, st) in (GPU, GPU_LIST):
                        # (a list of GPU tensors, `[v.item() for v in losses]`: each is one)
                        for n in target_names(gen.target):
                            st.env[n] = GPU
                        if isinstance(gen.iter, ast.Call) and callee_tail(gen.iter) == "items" \
                                and isinstance(gen.target, ast.Tuple) and gen.target.elts:
                            for n in target_names(gen.target.elts[0]):
                                st.env[n] = CPU  # the keys of a dict of GPU tensors
                    elif isinstance(gen.iter, ast.Call) and callee_tail(gen.iter) == "zip" \
                            and isinstance(gen.target, ast.Tuple) \
                            and len(gen.target.elts) == len(gen.iter.args):
                        for t, a in zip(gen.target.elts, gen.iter.args, strict=True):
                            if ctx.values.kind(a, st) == GPU:  # `for a, b in zip(xs, gpu)`
                                for n in target_names(t):
                                    st.env[n] = GPU
            if node.__class__ in RULE_NODES:
                for rule in rules:
                    rule(ctx, node, st)
            if isinstance(node, ast.Call):
                self._note_batch_move(node, st)
                self._follow(node, st)
                if node.args and isinstance(node.args[0], ast.Lambda) and isinstance(
                        node.func, ast.Name) and node.func.id in {"map", "filter"}:
                    stack.append(node.args[0].body)  # `map(lambda t: ..., xs)` runs it now
            stack.extend(children(node))

    def _note_batch_move(self, call: ast.Call, st: State) -> None:
        """Remember that batch data goes to a GPU (the pin-memory rule asks)."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "type" and call.args \
                and data_root(func.value) in st.batch \
                and self.ctx.devices.gpu_tensor_type(call.args[0]):
            root = data_root(func.value)  # `imgs.type(Tensor)`, Tensor a CUDA tensor type
            self.ctx.note_batches_to_gpu(st.batch_src.get(root or ""))
            return
        if isinstance(func, ast.Attribute) and func.attr == "copy_" and len(call.args) >= 1 \
                and data_root(call.args[0]) in st.batch \
                and self.ctx.values.kind(func.value, st) == GPU:
            # `self.input.resize_(x.size()).copy_(x)`: into a buffer made on the GPU
            root = data_root(call.args[0])
            self.ctx.note_batches_to_gpu(st.batch_src.get(root or ""))
            return
        if not isinstance(func, ast.Attribute) or func.attr not in {"to", "cuda"}:
            if st.batch and self.ctx.values.moves_batch(call, st):
                root = next((data_root(a) for a in call.args if data_root(a) in st.batch), None)
                self.ctx.note_batches_to_gpu(st.batch_src.get(root or ""))
            return
        root = data_root(func.value)
        if root not in st.batch:
            return
        if func.attr == "to":
            target = move_target(call)
            if target is None or not self.ctx.devices.is_gpu(target, st.func):
                return
        self.ctx.note_batches_to_gpu(st.batch_src.get(root or ""))

def is_loader_value(k: str | None) -> bool:
    return is_loader_kind(k)


def _generates(loop: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and callee_tail(n) == "generate" for n in ast.walk(loop))


def _host_tensor_name(ctx: ModuleContext, name: str, st: State) -> bool:
    """Is ``name`` a tensor built on the host (`torch.zeros(n)`), not a container?"""
    from pitstop.lint.values_kinds import CREATORS

    for a in ctx.index.scoped_assigns.get((st.func, name), ()):
        v = a.value
        if isinstance(v, ast.Call) and (callee_tail(v) in CREATORS or callee_tail(v).endswith(
                "Tensor") or callee_tail(v) == "cpu"):
            return True
    return False
