"""The analysis of one module, as the rules see it.

:class:`ModuleContext` ties the models together for one module: its index
(:mod:`~pitstop.lint.index`), the program it belongs to (:mod:`~pitstop.lint.program`),
its devices (:mod:`~pitstop.lint.devices`), values (:mod:`~pitstop.lint.values`), loops
(:mod:`~pitstop.lint.loops`) and the walk (:mod:`~pitstop.lint.walk`); rules read it and
report findings through it. An :class:`Analysis` is one run over one linted module: the
contexts of the other modules its hot loops lead into are opened on demand, and their
findings are reported in their own files.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pitstop.lint.astutil import dotted, is_partial, super_callees, super_method
from pitstop.lint.describe import Describer
from pitstop.lint.devices import DeviceModel
from pitstop.lint.index import LOOPS, FuncDef, ModuleIndex
from pitstop.lint.loops import LoopModel
from pitstop.lint.model import Fix, LintFinding
from pitstop.lint.program import Origin, Program, Resolved, Sym
from pitstop.lint.steps import is_step_call
from pitstop.lint.summary import summarize
from pitstop.lint.values import ValueModel
from pitstop.lint.values_kinds import (
    CPU,
    GPU,
    LOADER,
    MASK,
    MODEL,
    PLACED,
    loader_key,
    loader_ref,
    object_ref,
)
from pitstop.lint.walk import HotLoop, HotRule, State, Walker

if TYPE_CHECKING:
    from pitstop.lint.analyze import LintOptions

__all__ = ["CPU", "GPU", "LOOPS", "MASK", "MODEL", "Analysis", "HotLoop", "HotRule",
           "ModuleContext", "State"]

# Rules whose findings only matter on an accelerator: their evidence names the device.
GPU_ONLY = frozenset({"LT001", "LT003", "LT005", "LT006", "LT008", "LT011", "LT012", "LT015"})
TEST_PATH_RE = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_tests?\.py$|"
                          r"(^|/)conftest\.py$")
USE_EPOCHS = "loader_epochs:"
USE_GPU = "loader_gpu:"
USE_GPU_ANY = "loader_gpu_any:"
USE_SEEN = "loader_seen:"  # a loop of the program iterates this loader
USE_TRAINS = "loader_trains:"  # a training loop iterates this loader
USE_TRAIN = "train_loop:"  # the module trains (a training loop, a framework trainer)
USE_LOOP = "hot_loop:"  # the module runs a training or an evaluation loop
# The index of a module followed into, kept while its tree lives (the engine keeps the
# trees of the second look per process): every file analysed again there follows calls
# into the same few modules, and building their index each time was most of that pass.
# An index depends on the tree alone (and the program, which one run does not change).
_INDEX_OF: weakref.WeakKeyDictionary[ast.Module, ModuleIndex] = weakref.WeakKeyDictionary()
OR = "\t"  # alternatives inside one condition token
ANY = " || "  # alternative clauses of a condition


# What test code is written with. A file named like a test that has none of it is a script
# (`word_cnn_test.py` that trains a model end to end), linted as one.
TEST_CODE_RE = re.compile(r"^\s*(?:async\s+)?def test_\w*\s*\(|^\s*class Test|^\s*(?:import|from) "
                          r"(?:pytest|unittest|hypothesis|nose)\b|@pytest\.|TestCase\b|"
                          r"run_tests\(", re.MULTILINE)


def written_as_tests(text: str) -> bool:
    """Does ``text`` read as test code (a test function or class, a test framework)?"""
    return TEST_CODE_RE.search(text) is not None


def is_test_path(path: str) -> bool:
    """Test code (`tests/`, `test_*.py`, `*_test.py`, `conftest.py`)."""
    return TEST_PATH_RE.search(path.replace("\\", "/")) is not None


@dataclass
class Analysis:
    """One analysis of one linted module against a program."""

    program: Program
    options: LintOptions
    # key -> (tree, text) of a module of the program, for calls followed into it
    load: Callable[[str], tuple[ast.Module, str] | None] = lambda key: None
    reportable: Callable[[str], bool] = lambda key: True
    contexts: dict[str, ModuleContext] = field(default_factory=dict)
    findings: list[LintFinding] = field(default_factory=list)
    uses: set[str] = field(default_factory=set)  # facts about loaders, for the program
    tests: frozenset[str] | None = None  # keys of the linted modules that are test code
    _seen: set[tuple[str, str, int, int]] = field(default_factory=set)

    def context(self, key: str) -> ModuleContext | None:
        if key in self.contexts:
            return self.contexts[key]
        loaded = self.load(key)
        if loaded is None:
            return None
        tree, text = loaded
        summary = self.program.summary(key)
        path = summary.path if summary else key
        index = _INDEX_OF.get(tree)
        if index is None or index.path != path:
            index = _INDEX_OF[tree] = ModuleIndex(tree, path, text=text)
        ctx = ModuleContext(tree, text.splitlines(), path, text=text, analysis=self,
                            index=index)
        self.contexts[key] = ctx
        return ctx


class ModuleContext:
    """The analysis of one module; rules read it and add findings with :meth:`report`."""

    def __init__(self, tree: ast.Module, lines: list[str], path: str, *, text: str = "",
                 analysis: Analysis | None = None, options: LintOptions | None = None,
                 index: ModuleIndex | None = None, program: Program | None = None,
                 test: bool | None = None) -> None:
        from pitstop.lint.analyze import LintOptions

        self.tree = tree
        self.lines = lines
        self.path = path
        self.text = text
        self.index = index or ModuleIndex(tree, path, text=text)
        if analysis is None:
            opts = options or LintOptions()
            if program is None:
                program = Program([summarize(self.index)], device=opts.device, record=True)
            analysis = Analysis(program, opts)
        self.analysis = analysis
        self.options = analysis.options
        self.program = analysis.program
        self.key = self.program.key(path)
        # names a module gets only through its star imports of the program's modules
        # (before anything below reads the aliases: the describer's loaders, the rules)
        idx = self.index
        if any(i.local == "*" for i in idx.imports):
            own = set(idx.functions) | set(idx.classes) | set(idx.assigns_by_name)
            for local, target in self.program.star_aliases(self.key):
                if local not in own:
                    idx.aliases.setdefault(local, target)
        analysis.contexts.setdefault(self.key, self)
        self.cpus = self.options.cpus
        self.local_world_size = self.options.local_world_size
        if test is None:
            test = self.key in analysis.tests if analysis.tests is not None else is_test_path(path)
            test = test and (not text or written_as_tests(text))
        self.is_test = test
        self.describer = Describer(self.index)
        self.devices = DeviceModel(self)
        self.values = ValueModel(self)
        self.loops = LoopModel(self)
        self.walker = Walker(self)
        self.hot_loops: list[HotLoop] = []
        self.has_train_loop = False
        self.rare_names: set[str] = set()
        self._partials: dict[ast.Call, ast.Call] = {}
        self.facts: set[str] = set(self.index.facts)
        self.moves_batches_to_gpu = False
        # the index's collections, as the rules know them
        idx = self.index
        self.aliases = idx.aliases
        self.calls = idx.calls
        self.assigns = idx.assigns
        self.loops_nodes = idx.loops
        self.withs = idx.withs
        self.lists = idx.lists
        self.functions = idx.functions
        self.classes = idx.classes
        self.class_of = idx.class_of
        self.module_classes = idx.module_classes

    # ------------------------------------------------------------------ properties
    @property
    def findings(self) -> list[LintFinding]:
        return self.analysis.findings

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        return self.index.parents

    def enclosing(self, node: ast.AST, types: tuple[type, ...]) -> ast.AST | None:
        return self.index.enclosing(node, types)

    def scope_of(self, node: ast.AST) -> FuncDef | None:
        return self.index.enclosing_function(node)

    @property
    def gpu_program(self) -> bool:
        return self.devices.origin is not None

    @property
    def device_origin(self) -> Origin | None:
        return self.devices.origin

    def device_kind(self, node: ast.AST) -> str | None:
        """GPU / CPU for an expression used as a device, ``"dtype"`` for a dtype, else None
        (a device the code does not show counts as a GPU in a GPU program)."""
        k = self.devices.kind(node)
        if k == "maybe":
            return GPU if self.gpu_program else None
        return k

    def kind(self, node: ast.AST, st: State) -> str | None:
        return self.values.kind(node, st)

    def is_model_callee(self, func: ast.AST, st: State) -> bool:
        return self.values.is_model_callee(func, st)

    def rarity(self, test: ast.AST, st: State) -> str | None:
        return self.loops.rarity(test, st)

    def is_loaderish(self, it: ast.expr) -> bool:
        return self.loops.is_batch_source(it)

    def is_optimizer_step(self, call: ast.Call) -> bool:
        return is_step_call(call)

    def could_have_hot_loops(self) -> bool:
        return self.loops.could_have_hot_loops()

    def run(self, hot_rules: list[HotRule]) -> None:
        self.walker.run(hot_rules)

    # ------------------------------------------------------------------ the program
    def unwrap_partial(self, call: ast.Call) -> ast.Call:
        """`compute_losses()` with `compute_losses = functools.partial(self.diffusion.
        training_losses, model, batch, t)` above it in the function: the call it makes
        (the partial's callee, its arguments, then the call's own); else ``call``."""
        if not isinstance(call.func, ast.Name):
            return call
        memo = self._partials
        if call in memo:
            return memo[call]
        found = call
        scope = self.scope_of(call)
        assigns = [a for a in self.index.scoped_assigns.get((scope, call.func.id), ())
                   if (a.end_lineno or a.lineno) < call.lineno]
        if assigns:
            # (the latest assignment: `step = eval_step` after a partial replaces it)
            value = max(assigns, key=lambda a: a.lineno).value
            if isinstance(value, ast.Call) and is_partial(value, self.aliases) \
                    and value.args and not isinstance(value.args[0], ast.Starred):
                found = ast.Call(func=value.args[0], args=[*value.args[1:], *call.args],
                                 keywords=[*value.keywords, *call.keywords])
                ast.copy_location(found, call)
                parent = self.parents.get(call)
                if parent is not None:
                    self.parents[found] = parent
                self.index.owner[found] = self.index.owner.get(call)
                memo[found] = found  # (`f = partial(f, x)`: unwrapped once, not again)
        memo[call] = found
        return found

    def callee_sym(self, call: ast.Call, st: State) -> Sym | None:
        """What a call's callee is in the program (a function, a class, a method, an
        object whose ``__call__`` runs), following the walk's knowledge of local objects."""
        call = self.unwrap_partial(call)
        name = dotted(call.func)
        if name is None:
            return self._super_method(call, st)
        head, _, rest = name.partition(".")
        k = st.env.get(head)
        program = self.program
        ref = object_ref(k)
        if k is not None and ref is not None:
            module, cls = ref
            found = program.quiet_in_class(module, cls, rest or "__call__")
            if found is None and not rest and k.startswith("model@"):
                found = program.quiet_in_class(module, cls, "forward")  # nn.Module.__call__
            return found
        if k is not None and not rest:
            return None
        callee = self.describer._callee(name, st.func)
        if st.per_batch:
            return program.hot_callee(self.key, callee)
        return program.quiet_callee(self.key, callee)

    def _super_method(self, call: ast.Call, st: State) -> Sym | None:
        """`super().training_losses(model, ...)` (also `super(Cls, self)`): the method as
        the bases of the class around the call define it."""
        method = super_method(call)
        cls = self.index.class_of.get(st.func) if st.func is not None else None
        if method is None or cls is None:
            return None
        for callee in super_callees(cls, method):
            # (per batch: recorded, so that a base class in another module, which the
            # first pass does not see, sends this module to the second look)
            found = self.program.hot_callee(self.key, callee) if st.per_batch \
                else self.program.quiet_callee(self.key, callee)
            if found is not None:
                return found
        return None

    def function_target(self, call: ast.Call, st: State) -> tuple[ModuleContext, FuncDef] | None:
        """The function a call runs, with the context of its module (opened if needed)."""
        call = self.unwrap_partial(call)
        index = self.index
        func = call.func
        # fast path: a function or method of this module
        if isinstance(func, ast.Name) and func.id not in st.env:
            fn = index.module_function(func.id)
            if fn is not None:
                return self, fn
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and st.func is not None:
            cls = index.class_of.get(st.func)
            if cls is not None:
                m = index.method(cls, func.attr)
                if m is not None:
                    return self, m
        sym = self.callee_sym(call, st)
        if sym is None:
            return None
        if sym.kind != "func":
            return None
        return self.function_named(sym.module, sym.name)

    def function_named(self, module: str, qualname: str
                       ) -> tuple[ModuleContext, FuncDef] | None:
        """The def of ``qualname`` (`fn` or `Class.method`) in the program's module
        ``module``, with that module's context (opened if needed)."""
        tctx = self if module == self.key else self.analysis.context(module)
        if tctx is None:
            return None
        cls_name, _, fname = qualname.rpartition(".")
        for fn in tctx.index.functions.get(fname, ()):
            owner = tctx.index.class_of.get(fn)
            if (owner.name if owner is not None else "") == cls_name:
                return tctx, fn
        return None

    def _callee_name(self, call: ast.Call, st: State) -> str | None:
        """The callee as the program resolves it, or None when a local object of the walk
        decides it (then :meth:`callee_sym` knows the class)."""
        name = dotted(call.func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        k = st.env.get(head)
        if k is not None and (k.startswith(("obj@", "model@")) or not rest):
            return None
        return self.describer._callee(name, st.func)

    def resolve_call_result(self, call: ast.Call, st: State) -> Resolved | None:
        name = self._callee_name(call, st)
        if name is not None:
            return self.program.call_result(self.key, name)
        sym = self.callee_sym(call, st)
        if sym is not None and sym.kind == "func":
            return self.program.returns(sym.module, sym.name)
        return None

    def call_steps(self, call: ast.Call, st: State) -> bool:
        """Does the call run backward or a step somewhere in the program?"""
        call = self.unwrap_partial(call)
        name = self._callee_name(call, st)
        if name is not None:
            return self.program.call_steps(self.key, name)
        sym = self.callee_sym(call, st)
        if sym is None:
            sym = self._model_forward(call, st)
        return sym is not None and self.program.sym_steps(sym)

    def _model_forward(self, call: ast.Call, st: State) -> Sym | None:
        """`maml(x_spt, y_spt)` with `maml = Meta(args).to(device)`: the walk knows a model,
        the program its class, whose forward() may itself train (meta-learning, a model
        wrapper that owns its optimizer)."""
        if not isinstance(call.func, (ast.Name, ast.Attribute)) or \
                st.env.get(dotted(call.func) or "") != MODEL:
            return None
        r = self.resolve_name(call.func, st)
        if r is None or r.kind != "model" or not r.name:
            return None
        return self.program.quiet_in_class(r.module, r.name, "forward")

    def resolve_name(self, node: ast.AST, st: State) -> Resolved | None:
        d = self.describer.describe(node, st.func)
        return self.program.resolve(self.key, d) if d else None

    def kind_of_resolved(self, r: Resolved | None) -> str | None:
        """A resolved program value as a walk kind."""
        if r is None:
            return None
        if r.kind == "model":
            return f"{MODEL}@{r.module}|{r.name}" if r.name else MODEL
        if r.kind == "loader":
            k = f"{LOADER}@{r.module}|{r.name}" if r.name else LOADER
            return f"{k}{PLACED}" if r.placed else k
        if r.kind == "batches":
            return LOADER
        if r.kind == "obj":
            return f"obj@{r.module}|{r.name}"
        if r.kind == "tensor":
            return GPU if r.name == "gpu" else CPU
        return None

    def note_batches_to_gpu(self, loader_kind: str | None) -> None:
        """Batches of a loader (or of some loader of this module) go to the GPU."""
        self.moves_batches_to_gpu = True
        key = loader_key(loader_kind)
        if key is not None:
            self.analysis.uses.add(USE_GPU + key)
        # the program's batches go to the GPU: so will those of its other loaders
        self.analysis.uses.add(USE_GPU_ANY + self.key)

    def note_loader_use(self, loader_kind: str | None, *, epochs: bool, trains: bool) -> None:
        """A loop iterates a loader: repeatedly (``epochs``) or once, training or not."""
        key = loader_key(loader_kind)
        if key is not None:
            self.analysis.uses.add(USE_SEEN + key)
            if epochs:
                self.analysis.uses.add(USE_EPOCHS + key)
            if trains:
                self.analysis.uses.add(USE_TRAINS + key)

    def unused_definition(self, node: ast.AST) -> bool:
        """Is ``node`` inside a top-level class or function of an imported module that no
        module of the program mentions (another entry point's trainer, a block class no
        model uses)? Decorated ones may be registered and built by name."""
        top: ast.AST | None = node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # the cheap way up
            fn = node
            while True:
                cls = self.index.class_of.get(fn)
                outer = self.index.owner.get(fn)
                if cls is not None or outer is None:
                    top = cls if cls is not None else fn
                    break
                fn = outer
        while top is not None and top not in self.index.tree.body:
            top = self.parents.get(top)
        if not isinstance(top, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                or top.decorator_list:
            return False
        return self.program.unreached(self.key, top.name)

    def on_request_only(self, fn: FuncDef) -> bool:
        """Is top-level function ``fn`` of an entry script, which trains nothing itself,
        run only when the user asks: every use of its name is a call under an opt-in flag
        (`if args.eval: test(args)`, the `else:` of `if not args.eval: train(args)`)? No
        other module imports it."""
        if fn not in self.index.tree.body or fn.decorator_list \
                or self.program.importers_of(self.key):
            return False
        if any(isinstance(n, ast.Call) and is_step_call(n) for n in ast.walk(fn)):
            return False  # `if args.moco: train_moco(...)`: a training mode, not a request
        uses = self.name_uses(fn.name)
        return bool(uses) and all(
            isinstance(parent := self.parents.get(u), ast.Call) and parent.func is u
            and self.loops.under_opt_in(parent) for u in uses)

    def name_uses(self, name: str) -> list[ast.Name]:
        """The places this module reads ``name`` (made once per module)."""
        uses = getattr(self, "_name_uses", None)
        if uses is None:
            uses = {}
            for node in ast.walk(self.index.tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    uses.setdefault(node.id, []).append(node)
            self._name_uses: dict[str, list[ast.Name]] = uses
        return uses.get(name, [])

    def batch_pinned(self, loader_kind: str | None) -> bool:
        """Do these batches come pinned: from a loader known to pin memory, or (loader
        unknown) from this module's loaders, or the program's when it builds none here?"""
        from pitstop.lint.loaders import dataloader_calls
        from pitstop.lint.rules._dataloader import loader_pins

        ref = loader_ref(loader_kind)
        if ref is not None:
            return self.program.loader_pins(*ref)
        calls = dataloader_calls(self.index)
        if calls:
            return any(loader_pins(self, c) for c in calls)
        members = sorted(self.program.program_of(self.key))
        if not any((s := self.program.summary(m)) is not None and s.loaders for m in members):
            # no loader runs with this module by its imports (it is reached by a name
            # chosen at run time, through files left out): the run's loaders, as one program
            members = sorted(self.program.modules)
        for m in members:
            s = self.program.summary(m)
            if s is not None and any(self.program.loader_pins(m, lid) for lid in s.loaders):
                return True
        return False

    def loader_key(self, call: ast.Call) -> str:
        from pitstop.lint.loaders import loader_id

        return f"{self.key}|{loader_id(call)}"

    # ------------------------------------------------------------------ reporting
    def report(self, code: str, node: ast.AST, message: str, *, fix: Fix | None = None,
               evidence: Iterable[tuple[str, object]] = (), condition: str = "") -> None:
        analysis = self.analysis
        if not analysis.reportable(self.key):
            return
        if code in GPU_ONLY and self.options.device == "cpu":
            return  # `--device cpu`: the program is known to run on CPUs only
        line = getattr(node, "lineno", 1)
        col_bytes = getattr(node, "col_offset", 0)
        col = self.char_column(line, col_bytes)
        key = (self.key, code, line, 0)  # one finding per line and code: one place
        if key in analysis._seen:
            return
        analysis._seen.add(key)
        end_line = getattr(node, "end_lineno", None)
        end_col_b = getattr(node, "end_col_offset", None)
        end_col = self.char_column(end_line, end_col_b) if end_line and end_col_b is not None else None
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        ev = tuple(evidence)
        if code in GPU_ONLY and self.device_origin is not None:
            ev += (("device", str(self.device_origin)),)
        analysis.findings.append(LintFinding(
            code=code, path=self.path, line=line, column=col + 1, message=message,
            end_line=end_line, end_column=None if end_col is None else end_col + 1, fix=fix,
            evidence=ev, condition=condition, source_line=src.rstrip("\r\n"),
        ))

    def char_column(self, line: int, col_bytes: int) -> int:
        """``ast`` columns count UTF-8 bytes; people (and libcst) count characters."""
        if not 0 < line <= len(self.lines):
            return col_bytes
        text = self.lines[line - 1]
        if text.isascii():
            return col_bytes
        return len(text.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def segment(self, node: ast.AST, limit: int = 60) -> str:
        """The source text of ``node`` (shortened), for messages."""
        try:
            text = ast.unparse(node)
        except Exception:  # pragma: no cover - unparse handles every parsed node
            text = "<expr>"
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def gpu_words(self) -> str:
        """How sure the analysis is that this runs on a GPU, for messages."""
        o = self.device_origin
        return "" if o is None else f" (accelerator: {o})"
