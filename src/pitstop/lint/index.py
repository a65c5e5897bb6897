"""The index of one module: one pass over its AST that collects what every model and rule
asks about (calls, assignments, loops, functions, classes, imports, facts, accelerator
evidence), grouped so that each question is a dictionary look-up, never a scan.

Linear in the size of the module: every node is visited once, and nothing later walks
the whole tree again (``parents`` is built on first use, also in one pass).

Kept beside it: the facts and accelerator evidence it records
(:mod:`~pitstop.lint.index_facts`) and the questions it answers once built
(:mod:`~pitstop.lint.index_queries`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pitstop.lint.astutil import (
    callee_tail,
    dotted,
    last_name,
    param_names,
    qualname,
    target_names,
)
from pitstop.lint.index_facts import (
    _HEAVY_CLASS_WORDS,
    _LOW_PRECISION,
    SEED_FN_RE,
    IndexFacts,
    _does_matmuls,
)
from pitstop.lint.index_queries import IndexQueries
from pitstop.lint.steps import is_step_call

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)

# packages whose classes are nn.Modules (a subclass of one is a model)
MODEL_LIBRARIES = ("timm.models.", "torchvision.models.", "transformers.models.",
                   "transformers.modeling_", "diffusers.models.",
                   # graph layers: `class GINEConv(MessagePassing)` is an nn.Module
                   "torch_geometric.nn.", "dgl.nn.")
# a model class exported at the top of a transformers package (`from pytorch_transformers
# import BertForTokenClassification`): `BertModel`, `GPT2LMHeadModel`, `...ForXxx`
TRANSFORMERS_PACKAGES = ("transformers.", "pytorch_transformers.", "pytorch_pretrained_bert.")
TRANSFORMERS_MODEL_RE = re.compile(r"(Model|For[A-Z]\w+)$")

# Node type -> what the index does with it.
_KIND: dict[type, str] = {
    ast.Call: "call", ast.Attribute: "attr", ast.Assign: "assign", ast.AnnAssign: "annassign",
    ast.AugAssign: "augassign",
    ast.For: "loop", ast.AsyncFor: "loop", ast.While: "loop", ast.With: "with",
    ast.AsyncWith: "with", ast.FunctionDef: "func", ast.AsyncFunctionDef: "func",
    ast.ClassDef: "class", ast.Import: "import", ast.ImportFrom: "importfrom",
    ast.List: "list", ast.Dict: "dict", ast.Return: "return", ast.Yield: "yield", ast.YieldFrom: "yield",
    ast.BinOp: "binop", ast.Compare: "compare",
}
# Fields never worth descending into (operators, contexts, plain strings and ints).
_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind", "type_ignores", "id",
                          "attr", "name", "names", "arg", "asname", "module", "level",
                          "conversion", "is_async", "simple", "kwd_attrs", "tag", "rest"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAVES = frozenset({ast.Constant, ast.MatchSingleton})


def _child_fields(t: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(t)
    if fields is None:
        fields = _CHILD_FIELDS[t] = () if t in _LEAVES else tuple(
            f for f in getattr(t, "_fields", ()) if f not in _SKIP_FIELDS)
    return fields


def _parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """Child -> parent for every node worth asking about (contexts and operators are
    shared singletons, so they have no parent of their own). A plain stack over the
    cached child fields: three times faster than ``ast.walk`` with ``iter_child_nodes``
    on the torch package, where this map was a fifth of the lint time."""
    parents: dict[ast.AST, ast.AST] = {}
    stack: list[ast.AST] = [tree]
    pop, push, node_t = stack.pop, stack.append, ast.AST
    while stack:
        node = pop()
        for name in _child_fields(node.__class__):
            v = getattr(node, name, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, node_t):
                        parents[x] = node
                        push(x)
            elif isinstance(v, node_t):
                parents[v] = node
                push(v)
    return parents


def _source_order(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


@dataclass(frozen=True)
class ImportRef:
    """One imported name: ``local`` is bound to ``module`` (``name`` of it, if a
    from-import), ``level`` dots up for relative imports."""

    local: str
    module: str
    name: str | None
    level: int
    line: int


class ModuleIndex(IndexFacts, IndexQueries):
    """Everything collected from one module in one pass."""

    def __init__(self, tree: ast.Module, path: str = "<string>", *, light: bool = False,
                 text: str = "", preamble: list[ast.stmt] | None = None) -> None:
        self.tree = tree
        self.path = path
        self.light = light
        self.text = text  # the source, when the caller has it (names mentioned in it)
        self.aliases: dict[str, str] = {}
        self.imports: list[ImportRef] = []
        self.functions: dict[str, list[FuncDef]] = {}
        self.class_of: dict[FuncDef, ast.ClassDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.module_classes: set[str] = set()
        self.owner: dict[ast.AST, FuncDef | None] = {}  # calls/loops/assigns/returns -> function
        self.calls: list[ast.Call] = []
        self.calls_by_tail: dict[str, list[ast.Call]] = {}
        self.assigns: list[ast.Assign] = []
        self.ann_assigns: list[ast.AnnAssign] = []
        self.aug_assigns: list[ast.AugAssign] = []
        self.assigns_by_name: dict[str, list[ast.Assign | ast.AnnAssign]] = {}
        # (function or None for the module body, name) -> assignments there, in source order
        self.scoped_assigns: dict[tuple[FuncDef | None, str], list[ast.Assign | ast.AnnAssign]] = {}
        self.assigns_of: dict[FuncDef | None, list[ast.Assign]] = {}
        self.loops_of: dict[FuncDef | None, list[ast.For | ast.AsyncFor | ast.While]] = {}
        self.calls_of: dict[FuncDef | None, list[ast.Call]] = {}
        self.import_locals: set[str] = set()
        self.calls_in_loop: set[ast.Call] = set()  # calls in the body of a loop
        # function -> the calls it makes outside any loop of its own, and whether one of
        # them is a backward()/optimizer step (a step function)
        self.direct_calls: dict[FuncDef, list[ast.Call]] = {}
        self.steps_directly: set[FuncDef] = set()
        self.outer_loop: dict[ast.AST, ast.AST | None] = {}  # loop -> the loop around it
        self.assign_of: dict[ast.AST, ast.Assign] = {}  # an assigned value -> its assignment
        self.item_assigns_by_name: dict[str, list[ast.Assign]] = {}  # `kw["x"] = v`
        self.aug_by_name: dict[str, list[ast.AugAssign]] = {}
        self.updates_by_name: dict[str, list[ast.Call]] = {}  # `kw.update(...)`
        self.loops: list[ast.For | ast.AsyncFor | ast.While] = []
        self.withs: list[ast.With | ast.AsyncWith] = []
        self.lists: list[ast.List] = []
        self.returns: dict[FuncDef, list[ast.Return]] = {}
        self.yields: dict[FuncDef, list[ast.Yield | ast.YieldFrom]] = {}
        self.attr_names: set[str] = set()  # every attribute name used (cheap "is X used?")
        self.facts: dict[str, int] = {}  # program fact -> first line
        # architecture facts (layers, matmuls) -> every line they are seen on: a model
        # class that the program never builds does not make the program's architecture
        self.arch_lines: dict[str, list[int]] = {}
        self.gpu_origins: list[tuple[int, str]] = []  # (line, what) that can put work on a GPU
        self.cpu_device_lines: list[int] = []
        self.device_literals: dict[str, set[str]] = {}
        self.model_names: set[str] = set()
        self.loader_names: set[str] = set()
        self.funcs_with_loops: set[FuncDef] = set()
        self.module_loops = False
        self.matmul_binops = 0
        self._parents: dict[ast.AST, ast.AST] | None = None
        self._collect_top_imports()
        for stmt in preamble or ():  # a piece of a big module: the module's imports
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._import(stmt)
        self._heavy_calls: list[tuple[str, int]] = []
        # the sides of comparisons seen (their ids): about the data, about a setting
        self._compared: set[int] = set()
        self._compared_setting: set[int] = set()
        self._seed_calls: list[ast.Call] = []
        if light:
            self._walk_statements(tree.body, None, None, None)
            self._text_facts(text)
        else:
            self._walk()
        for call in self._seed_calls:
            if not self._under_seed_guard(call):
                self.facts.setdefault(f"calls:{callee_tail(call)}", call.lineno)
        for tail, line in self._heavy_calls:
            cls = self.classes.get(tail)
            if cls is None or _does_matmuls(cls):
                self._arch("matmul_heavy", line)
        self.import_locals = {i.local for i in self.imports if i.local != "*"}

    # ------------------------------------------------------------------ the pass
    def _collect_top_imports(self) -> None:
        # Imports of the module body (and of `if`/`try` blocks at the top) bind names for
        # the whole module; the pass below adds the ones inside functions.
        top: list[ast.stmt] = list(self.tree.body)
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.If, ast.Try)):
                top.extend(stmt.body)
                top.extend(getattr(stmt, "orelse", []))
                for h in getattr(stmt, "handlers", []):
                    top.extend(h.body)
        for s in top:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                self._import(s)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        aliases = self.aliases
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                    self.imports.append(ImportRef(a.asname, a.name, None, 0, node.lineno))
                else:
                    top = a.name.split(".", 1)[0]
                    aliases.setdefault(top, top)
                    self.imports.append(ImportRef(top, a.name, None, 0, node.lineno))
        else:
            module = node.module or ""
            for a in node.names:
                if a.name == "*":  # `from utils import *`: looked up when a name is not found
                    self.imports.append(ImportRef("*", module, "*", node.level or 0, node.lineno))
                    continue
                local = a.asname or a.name
                if not node.level and module:
                    aliases[local] = f"{module}.{a.name}"
                self.imports.append(ImportRef(local, module, a.name, node.level or 0, node.lineno))

    def _walk(self) -> None:
        stack: list[tuple[ast.AST, FuncDef | None, ast.ClassDef | None, ast.AST | None]] = [
            (self.tree, None, None, None)]
        in_loop_calls = self.calls_in_loop
        outer_loop = self.outer_loop
        fields_of = _CHILD_FIELDS
        pop, push = stack.pop, stack.append
        name_t = ast.Name
        owner_map = self.owner
        seen_imports = {id(s) for s in self.tree.body}
        while stack:
            node, owner, klass, in_loop = pop()  # in_loop: the innermost enclosing loop
            t = type(node)
            fields = fields_of.get(t)
            if fields is None:
                fields = _child_fields(t)
            kind = _KIND.get(t)
            child_owner: FuncDef | None = owner
            child_class: ast.ClassDef | None = None
            child_loop = in_loop
            if kind == "func":
                child_owner = node  # type: ignore[assignment]
                child_loop = None
            elif kind == "class":
                child_class = node  # type: ignore[assignment]
                child_loop = None
            elif kind == "loop":
                child_loop = node
            # children pushed last-first, so that they pop in source order: every list
            # the pass builds is in source order without sorting
            for name in reversed(fields):
                v = getattr(node, name, None)
                flag = in_loop if (kind == "loop" and name == "iter") else child_loop
                if v.__class__ is list:
                    for x in reversed(v):
                        if x is not None and x.__class__ is not name_t:
                            push((x, child_owner, child_class, flag))
                elif v is not None and v.__class__ is not name_t:
                    push((v, child_owner, child_class, flag))
            if kind is None:
                if t is ast.Constant:
                    self._constant(node)  # type: ignore[arg-type]
                continue
            if kind == "call":
                call: ast.Call = node  # type: ignore[assignment]
                self.calls.append(call)
                owner_map[call] = owner
                ctail = callee_tail(call)
                if in_loop is not None:
                    in_loop_calls.add(call)
                elif owner is not None:
                    self.direct_calls.setdefault(owner, []).append(call)
                    if ctail in {"backward", "manual_backward", "step", "optimizer_step"} \
                            and is_step_call(call):
                        self.steps_directly.add(owner)
                self.calls_of.setdefault(owner, []).append(call)
                self.calls_by_tail.setdefault(ctail, []).append(call)
                if ctail == "update" and call.func.__class__ is ast.Attribute:
                    recv = dotted(call.func.value)
                    if recv:
                        self.updates_by_name.setdefault(recv, []).append(call)
                self._call(call)
            elif kind == "attr":
                self.attr_names.add(node.attr)  # type: ignore[attr-defined]
                self._attribute(node)  # type: ignore[arg-type]
            elif kind == "assign":
                assign: ast.Assign = node  # type: ignore[assignment]
                self.assigns.append(assign)
                owner_map[assign] = owner
                self.assigns_of.setdefault(owner, []).append(assign)
                self.assign_of[assign.value] = assign
                for tgt in assign.targets:
                    if isinstance(tgt, ast.Subscript):
                        base = dotted(tgt.value)
                        if base:
                            self.item_assigns_by_name.setdefault(base, []).append(assign)
                        continue
                    for n in target_names(tgt):
                        self.assigns_by_name.setdefault(n, []).append(assign)
                        self.scoped_assigns.setdefault((owner, n), []).append(assign)
                self._assign(assign, owner)
            elif kind == "annassign":
                ann: ast.AnnAssign = node  # type: ignore[assignment]
                self.ann_assigns.append(ann)
                owner_map[ann] = owner
                ann_name = dotted(ann.target)
                if ann_name and ann.value is not None:
                    self.assigns_by_name.setdefault(ann_name, []).append(ann)
                    self.scoped_assigns.setdefault((owner, ann_name), []).append(ann)
            elif kind == "augassign":
                aug: ast.AugAssign = node  # type: ignore[assignment]
                self.aug_assigns.append(aug)
                owner_map[aug] = owner
                aug_name = dotted(aug.target)
                if aug_name:
                    self.aug_by_name.setdefault(aug_name, []).append(aug)
            elif kind == "loop":
                self.loops.append(node)  # type: ignore[arg-type]
                owner_map[node] = owner
                self.loops_of.setdefault(owner, []).append(node)  # type: ignore[arg-type]
                outer_loop[node] = in_loop
                if owner is not None:
                    self.funcs_with_loops.add(owner)
                else:
                    self.module_loops = True
            elif kind == "with":
                self.withs.append(node)  # type: ignore[arg-type]
                owner_map[node] = owner
            elif kind == "list":
                self.lists.append(node)  # type: ignore[arg-type]
            elif kind == "dict":  # a DeepSpeed config: {"fp16": {"enabled": True}}
                for k in node.keys:  # type: ignore[attr-defined]
                    if isinstance(k, ast.Constant) and k.value in {"fp16", "bf16", "amp"}:
                        self.facts.setdefault("reduced_precision", k.lineno)
                    elif type(k) is ast.Attribute and k.attr in _LOW_PRECISION:
                        # (`{torch.float16: float, ...}`: a table keyed by dtype, which
                        # looks a precision up and sets none)
                        self._compared.add(id(k))
            elif kind == "return":
                if owner is not None:
                    self.returns.setdefault(owner, []).append(node)  # type: ignore[arg-type]
            elif kind == "yield":
                if owner is not None:
                    self.yields.setdefault(owner, []).append(node)  # type: ignore[arg-type]
            elif kind == "compare":  # `if dtype == torch.float16:` asks, sets nothing
                cmp: ast.Compare = node  # type: ignore[assignment]
                sides = (cmp.left, *cmp.comparators)
                if any(type(x) is ast.Attribute and x.attr in _LOW_PRECISION
                       for x in sides):
                    # (of a tensor's dtype, or a parameter: a question about the data; of a
                    # setting, `self._dtype`: the precision is chosen elsewhere)
                    params = set(param_names(owner)) if owner is not None else set()
                    asks_data = any((isinstance(x, ast.Attribute) and x.attr == "dtype")
                                    or (isinstance(x, ast.Name) and x.id in params)
                                    for x in sides)
                    (self._compared if asks_data else self._compared_setting).update(
                        id(x) for x in sides)
            elif kind == "binop":
                if isinstance(node.op, ast.MatMult):  # type: ignore[attr-defined]
                    self.matmul_binops += 1
                    self._arch("matmul_heavy", node.lineno)  # type: ignore[attr-defined]
            elif kind == "func":
                fn: FuncDef = node  # type: ignore[assignment]
                self.functions.setdefault(fn.name, []).append(fn)
                owner_map[fn] = owner
                if klass is not None:
                    self.class_of[fn] = klass
            elif kind == "class":
                cls: ast.ClassDef = node  # type: ignore[assignment]
                self.classes.setdefault(cls.name, cls)
                if any(w in cls.name for w in _HEAVY_CLASS_WORDS) and _does_matmuls(cls):
                    self._arch("matmul_heavy", cls.lineno)
                if any(self._module_base(b) for b in cls.bases):
                    self.module_classes.add(cls.name)
            elif kind in ("import", "importfrom") and id(node) not in seen_imports:
                self._import(node)  # type: ignore[arg-type]

    def _module_base(self, base: ast.expr) -> bool:
        """A base class that makes a class an ``nn.Module``: ``nn.Module`` and its kin, or a
        model class of a model library (timm's VisionTransformer, a torchvision ResNet)."""
        btail = last_name(base) or ""
        if btail.endswith(("Module", "ModelMixin", "PreTrainedModel")):
            return True  # (`BertPreTrainedModel`: a transformers base of a family)
        qual = qualname(base, self.aliases) or ""
        return qual.startswith(MODEL_LIBRARIES) or (
            qual.startswith(TRANSFORMERS_PACKAGES) and TRANSFORMERS_MODEL_RE.search(btail)
            is not None)

    # ------------------------------------------------------------------ the light pass
    def _walk_statements(self, stmts: list[ast.stmt], owner: FuncDef | None,
                         klass: ast.ClassDef | None, in_loop: ast.AST | None) -> None:
        """Statements only (no expressions): enough for the summary of a module no rule
        could fire in (a model definition, a helper) -- its functions, classes, imports,
        assignments, returns and loops -- at a fraction of the full pass's cost."""
        for stmt in stmts:
            t = type(stmt)
            if t in (ast.FunctionDef, ast.AsyncFunctionDef):
                fn: FuncDef = stmt  # type: ignore[assignment]
                self.functions.setdefault(fn.name, []).append(fn)
                self.owner[fn] = owner
                if klass is not None:
                    self.class_of[fn] = klass
                self._walk_statements(fn.body, fn, None, None)
            elif t is ast.ClassDef:
                cls: ast.ClassDef = stmt  # type: ignore[assignment]
                self.classes.setdefault(cls.name, cls)
                if any(self._module_base(b) for b in cls.bases):
                    self.module_classes.add(cls.name)
                self._walk_statements(cls.body, None, cls, None)
            elif t is ast.Assign:
                a: ast.Assign = stmt  # type: ignore[assignment]
                self.assigns.append(a)
                self.owner[a] = owner
                self.assigns_of.setdefault(owner, []).append(a)
                self.assign_of[a.value] = a
                for tgt in a.targets:
                    for n in target_names(tgt):
                        self.assigns_by_name.setdefault(n, []).append(a)
                        self.scoped_assigns.setdefault((owner, n), []).append(a)
                self._assign(a, owner)
            elif t is ast.AnnAssign:
                ann: ast.AnnAssign = stmt  # type: ignore[assignment]
                ann_name = dotted(ann.target)
                if ann_name and ann.value is not None:
                    self.owner[ann] = owner
                    self.assigns_by_name.setdefault(ann_name, []).append(ann)
                    self.scoped_assigns.setdefault((owner, ann_name), []).append(ann)
            elif t is ast.Return:
                if owner is not None:
                    self.returns.setdefault(owner, []).append(stmt)  # type: ignore[arg-type]
            elif t is ast.Expr and isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):  # type: ignore[attr-defined]
                if owner is not None:
                    self.yields.setdefault(owner, []).append(stmt.value)  # type: ignore[attr-defined]
            elif t in (ast.For, ast.AsyncFor, ast.While):
                loop: ast.For | ast.AsyncFor | ast.While = stmt  # type: ignore[assignment]
                self.loops.append(loop)
                self.owner[loop] = owner
                self.loops_of.setdefault(owner, []).append(loop)
                self.outer_loop[loop] = in_loop
                if owner is not None:
                    self.funcs_with_loops.add(owner)
                else:
                    self.module_loops = True
                self._walk_statements(loop.body, owner, klass, loop)
                self._walk_statements(loop.orelse, owner, klass, in_loop)
            elif t in (ast.Import, ast.ImportFrom):
                if owner is not None:
                    self._import(stmt)  # type: ignore[arg-type]
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    sub = getattr(stmt, field, None)
                    if sub:
                        items = [x for h in sub for x in getattr(h, "body", [h])] \
                            if field in ("handlers", "cases") else sub
                        self._walk_statements(items, owner, klass, in_loop)

    def _under_seed_guard(self, call: ast.Call) -> bool:
        """`if args.seed is not None: set_deterministic(args.seed)`: called only when the
        user asks for a seed."""
        cur = self.parents.get(call)
        while cur is not None and not isinstance(cur, FUNCS):
            if isinstance(cur, ast.If) and SEED_FN_RE.search(ast.unparse(cur.test)):
                return True
            cur = self.parents.get(cur)
        return False

    # ------------------------------------------------------------------ questions
    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Child -> parent for every node (built on first use: most files never need it)."""
        if self._parents is None:
            self._parents = _parent_map(self.tree)
        return self._parents

    def enclosing_function(self, node: ast.AST) -> FuncDef | None:
        if node in self.owner:
            return self.owner[node]
        found = self.enclosing(node, FUNCS)
        return found  # type: ignore[return-value]
