"""Loop context: which code of a module runs once per batch, and which values live on a GPU.

This is the part of the linter that a pattern matcher does not have. For one parsed
module, :class:`ModuleContext` works out

- the **hot loops**: training loops (the body reaches ``backward()``,
  ``optimizer.step()`` or ``scaler.step()`` directly or through functions of the same
  module it calls) and evaluation loops (a loop over a loader that runs the model and
  never steps an optimizer); an epoch loop around a batch loop is *not* hot;
- the **guards** that make code rare inside a hot loop (``if step % N == 0``,
  ``if i == last``, ``if should_log:``, and a leading ``if step % N: continue``);
- the **kind of each value** as the code runs, statement by statement: a GPU tensor
  (a model's output, a loss, ``.to(device)``/``.cuda()`` results and what is computed
  from them), a boolean GPU mask, a value certainly on the CPU (``.item()`` results,
  literals, ``torch.tensor`` without a device), a model, or unknown.

Rules that care about per-batch code (sync, non-blocking, tensor-on-device) are called
for every expression that runs unguarded in a hot loop, with the context at that point.
The walk also follows calls from a hot loop into functions of the same module (one
level of ``train_step(model, x, y)``, a few levels deep), binding GPU arguments to the
callee's parameters.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from pitstop.lint.astutil import (
    LOADERISH_RE,
    LOSS_RE,
    MODEL_EXACT,
    MODEL_RE,
    OPTIM_RE,
    TORCH_DTYPES,
    callee_tail,
    collect_aliases,
    dotted,
    iter_shallow,
    kwarg,
    last_name,
    qualname,
    root_name,
    target_names,
    unwrap_iterable,
)
from pitstop.lint.model import Fix, LintFinding

GPU = "gpu"  # a tensor on an accelerator
MASK = "mask"  # a boolean tensor on an accelerator
CPU = "cpu"  # certainly a host value (Python number, CPU tensor, numpy array)
MODEL = "model"  # a module (callable, its outputs are GPU tensors in a GPU program)

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
LOOPS = (ast.For, ast.AsyncFor, ast.While)

# Methods whose result is a host value (no sync of their own except where the sync rule
# says so) and attributes of a tensor that are metadata, not data.
HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "size", "dim", "numel",
                          "ndimension", "element_size", "nelement", "get_device",
                          "data_ptr", "is_contiguous", "stride", "storage_offset", "__len__"})
META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad",
                        "layout", "names", "is_leaf"})
MASK_METHODS = frozenset({"bool", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge",
                          "le", "logical_and", "logical_or", "logical_not", "isclose"})
TIME_FUNCS = frozenset({"time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns"})
RARE_NAME_RE = re.compile(
    r"log|print|eval|save|ckpt|checkpoint|verbose|debug|display|report|visuali|plot|"
    r"sample|valid|profil|dump|write|last|first|final|flush|summary|track|monitor",
    re.IGNORECASE,
)
LASTISH_RE = re.compile(r"last|final|end|max|total|num_|n_|len|steps|epochs|iters", re.IGNORECASE)
LIGHTNING_HOOKS = {"training_step": "train", "train_step": "train",
                   "validation_step": "eval", "test_step": "eval", "predict_step": "eval"}
MODEL_FACTORY_RE = re.compile(
    r"(^|\.)(resnet\d*|resnext\w*|wide_resnet\w*|vgg\w*|efficientnet\w*|mobilenet\w*|densenet\w*|"
    r"convnext\w*|regnet\w*|alexnet|googlenet|inception_v3|squeezenet\w*|shufflenet\w*|"
    r"mnasnet\w*|vit_\w+|swin_\w+|create_model|from_pretrained|from_config)$"
)
CONV_TAIL_RE = re.compile(
    r"resnet\d*|resnext\w*|wide_resnet\w*|vgg\w*|efficientnet\w*|mobilenet\w*|densenet\w*|"
    r"convnext\w*|regnet\w*|alexnet|googlenet|inception_v3|squeezenet\w*|shufflenet\w*|"
    r"mnasnet\w*"
)
CONV_FACTORY_RE = re.compile(
    r"(^|\.)(resnet\d*|resnext\w*|wide_resnet\w*|vgg\w*|efficientnet\w*|mobilenet\w*|densenet\w*|"
    r"convnext\w*|regnet\w*|alexnet|googlenet|inception_v3|squeezenet\w*|shufflenet\w*|"
    r"mnasnet\w*)$"
)


# Node type -> what _index does with it; fields never worth descending into.
_KIND: dict[type, str] = {
    ast.Call: "call", ast.Attribute: "attr", ast.Constant: "const", ast.Assign: "assign",
    ast.For: "loop", ast.AsyncFor: "loop", ast.While: "loop", ast.With: "with",
    ast.AsyncWith: "with", ast.FunctionDef: "func", ast.AsyncFunctionDef: "func",
    ast.ClassDef: "class", ast.Import: "import", ast.ImportFrom: "importfrom",
    ast.List: "list",
}
# Fields the index never descends into: operators and contexts, and the fields that hold
# plain strings/ints (a name, an attribute, an import's aliases, which the import case
# reads itself). Name and Constant nodes are leaves for it (a Constant is looked at, not
# entered); what is left in a field is a node, a list of nodes, or None.
_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind", "type_ignores", "id",
                          "attr", "name", "names", "arg", "asname", "module", "level",
                          "conversion", "is_async", "simple", "kwd_attrs", "tag", "rest"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAVES = frozenset({ast.Constant, ast.MatchSingleton})  # values, not nodes, inside
_CONV_CLASSES = frozenset({"Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d",
                           "LazyConv2d", "LazyConv3d"})
_CALL_TAILS = _CONV_CLASSES | {
    "cuda", "to", "parameters", "autocast", "GradScaler", "half", "bfloat16", "TrainStep",
    "set_float32_matmul_precision", "fast_defaults", "use_deterministic_algorithms",
    "DistributedDataParallel", "FullyShardedDataParallel", "DDP", "FSDP", "no_sync",
}


@dataclass(frozen=True)
class HotLoop:
    """A loop whose body runs once per batch."""

    node: ast.AST
    kind: str  # "train", "eval", or "forward" (a module's forward(): once per batch)
    line: int

    @property
    def describe(self) -> str:
        if self.kind == "forward":
            return f"`forward` (line {self.line}), which runs once per batch"
        what = "training" if self.kind == "train" else "evaluation"
        return f"the {what} loop at line {self.line}"


@dataclass
class State:
    """Where the walk is: inside which hot loop, under a rare guard or not."""

    hot: HotLoop | None = None
    rare: bool = False
    env: dict[str, str] = field(default_factory=dict)
    batch: set[str] = field(default_factory=set)  # names holding batch data from a loader
    via: str = ""  # "called from line N" when the walk followed a call
    depth: int = 0
    func: FuncDef | None = None
    no_grad: bool = False
    nested: bool = False  # inside a plain loop within the hot loop (`break` leaves only it)

    @property
    def per_batch(self) -> bool:
        return self.hot is not None and not self.rare


HotRule = Callable[["ModuleContext", ast.AST, State], None]


class ModuleContext:
    """The analysis of one module; rules read it and add findings with :meth:`report`."""

    def __init__(self, tree: ast.Module, lines: list[str], path: str,
                 *, text: str = "", cpus: int = 1, local_world_size: int = 1) -> None:
        self.cpus = cpus
        self.local_world_size = local_world_size
        self.tree = tree
        self.lines = lines
        self.path = path
        self.text = text
        self.findings: list[LintFinding] = []
        self._seen: set[tuple[str, int, int]] = set()
        self.functions: dict[str, list[FuncDef]] = {}
        self.class_of: dict[FuncDef, ast.ClassDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.module_classes: set[str] = set()  # classes that subclass some *Module
        self.model_names: set[str] = set()
        self.loader_names: set[str] = set()
        self.rare_names: set[str] = set()
        self.device_literals: dict[str, set[str]] = {}
        self.calls: list[ast.Call] = []
        self.assigns: list[ast.Assign] = []
        self.loops: list[ast.AST] = []
        self.withs: list[ast.With | ast.AsyncWith] = []
        self.lists: list[ast.List] = []  # list displays ([conv, bn, ...] for conv-bias-bn)
        self.hot_loops: list[HotLoop] = []
        self.facts: set[str] = set()
        self.gpu_program = False
        self.moves_batches_to_gpu = False
        self.has_train_loop = False
        self._step_fn_memo: dict[FuncDef, bool] = {}
        self._walked: set[tuple[int, frozenset[str], str]] = set()
        self._returns: list[str | None] | None = None
        self.hot_rules: list[HotRule] = []
        self._parents: dict[ast.AST, ast.AST] | None = None
        self.funcs_with_loops: set[FuncDef] = set()
        self.module_loops = False
        self._return_memo: dict[tuple[int, tuple[str | None, ...]], str | None] = {}
        self.aliases: dict[str, str] = {}
        top: list[ast.stmt] = list(tree.body)
        for stmt in tree.body:
            if isinstance(stmt, (ast.If, ast.Try)):
                top.extend(stmt.body)
                top.extend(getattr(stmt, "orelse", []))
                for h in getattr(stmt, "handlers", []):
                    top.extend(h.body)
        self.aliases.update(collect_aliases(ast.Module(body=[
            s for s in top if isinstance(s, (ast.Import, ast.ImportFrom))], type_ignores=[])))
        # Device expressions seen by the index pass (`.to(device)`, `device=dev`), judged
        # once every assignment is known: the pass visits nodes in no particular order,
        # and `device = "cpu"` must count even when it is visited after its uses.
        self._device_uses: list[ast.expr] = []
        self._index()
        if not self.gpu_program:
            self.gpu_program = any(self.device_kind(e) == GPU for e in self._device_uses)
        self._device_uses = []

    # ------------------------------------------------------------------ indexing
    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Child -> parent for every node (built on first use: most files never need it)."""
        if self._parents is None:
            parents: dict[ast.AST, ast.AST] = {}
            for node in ast.walk(self.tree):
                for child in ast.iter_child_nodes(node):
                    parents[child] = node
            self._parents = parents
        return self._parents

    def _index(self) -> None:
        """One pass over every node, collecting what the rules ask about.

        This loop is the linter's hottest code after parsing: it dispatches on the node's
        type through a dict and never descends into operator/context nodes."""
        stack: list[tuple[ast.AST, FuncDef | None, ast.ClassDef | None]] = [(self.tree, None, None)]
        aliases = self.aliases
        fields_of = _CHILD_FIELDS
        pop, push = stack.pop, stack.append
        name_t = ast.Name
        calls, assigns, loops, withs = self.calls, self.assigns, self.loops, self.withs
        while stack:
            node, owner, klass = pop()
            t = type(node)
            fields = fields_of.get(t)
            if fields is None:
                fields = fields_of[t] = () if t in _LEAVES else tuple(
                    f for f in t._fields if f not in _SKIP_FIELDS)
            child_owner: FuncDef | None = owner
            child_class: ast.ClassDef | None = None
            kind = _KIND.get(t)
            if kind == "func":
                child_owner = node  # type: ignore[assignment]
            elif kind == "class":
                child_class = node  # type: ignore[assignment]
            for name in fields:
                v = getattr(node, name, None)
                if v.__class__ is list:
                    for x in v:  # Dict.keys may hold None
                        if x is not None and x.__class__ is not name_t:
                            push((x, child_owner, child_class))
                elif v is not None and v.__class__ is not name_t:
                    push((v, child_owner, child_class))
            if kind is None:
                continue
            if kind == "call":
                calls.append(node)  # type: ignore[arg-type]
                self._index_call(node)  # type: ignore[arg-type]
            elif kind == "attr":
                self._index_attribute(node)  # type: ignore[arg-type]
            elif kind == "const":
                v = node.value  # type: ignore[attr-defined]
                if v.__class__ is str and v.startswith(("cuda", "gpu")):
                    self.gpu_program = True
            elif kind == "assign":
                assigns.append(node)  # type: ignore[arg-type]
                self._index_assign(node)  # type: ignore[arg-type]
            elif kind == "loop":
                loops.append(node)
                if owner is not None:
                    self.funcs_with_loops.add(owner)
                else:
                    self.module_loops = True
            elif kind == "with":
                withs.append(node)  # type: ignore[arg-type]
            elif kind == "list":
                self.lists.append(node)  # type: ignore[arg-type]
            elif kind == "func":
                fn: FuncDef = node  # type: ignore[assignment]
                self.functions.setdefault(fn.name, []).append(fn)
                if klass is not None:
                    self.class_of[fn] = klass
            elif kind == "class":
                cls: ast.ClassDef = node  # type: ignore[assignment]
                self.classes[cls.name] = cls
                for base in cls.bases:
                    tail = last_name(base) or ""
                    if tail.endswith("Module") or tail in {"Module", "LightningModule"}:
                        self.module_classes.add(cls.name)
            elif kind == "import":
                for a in node.names:  # type: ignore[attr-defined]
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".", 1)[0]
                        aliases.setdefault(top, top)
            elif kind == "importfrom":
                imp: ast.ImportFrom = node  # type: ignore[assignment]
                if imp.module and not imp.level:
                    for a in imp.names:
                        aliases[a.asname or a.name] = f"{imp.module}.{a.name}"

    def _index_attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in {"autocast", "GradScaler", "bfloat16", "float16", "half"}:
            self.facts.add("reduced_precision")
        elif attr in {"no_sync", "require_backward_grad_sync"}:
            self.facts.add("ddp_sync_control")
        elif attr in {"DistributedDataParallel", "FullyShardedDataParallel"}:
            self.facts.add("uses_ddp")
        elif attr in {"cuda", "is_available"} and isinstance(node.value, ast.Name) \
                and node.value.id == "torch":
            self.gpu_program = True

    def _index_call(self, node: ast.Call) -> None:
        func = node.func
        ft = type(func)
        tail = func.attr if ft is ast.Attribute else (func.id if ft is ast.Name else "")  # type: ignore[attr-defined]
        for kw in node.keywords:
            if kw.arg == "device":
                if not self.gpu_program:
                    self._device_uses.append(kw.value)
            elif kw.arg in {"precision", "mixed_precision"} and isinstance(
                    kw.value, ast.Constant) and "16" in str(kw.value.value):
                # Trainer(precision="bf16-mixed"), Accelerator(mixed_precision="fp16")
                self.facts.add("reduced_precision")
        if tail not in _CALL_TAILS and CONV_TAIL_RE.fullmatch(tail) is None:
            return
        if tail in _CONV_CLASSES or CONV_TAIL_RE.fullmatch(tail):
            self.facts.add("has_conv")
        elif tail == "cuda":
            if ft is ast.Attribute:
                self.gpu_program = True
        elif tail == "to":
            if not self.gpu_program and node.args:
                self._device_uses.append(node.args[0])
            if any(isinstance(a, ast.Attribute) and a.attr in {"bfloat16", "float16", "half"}
                   for a in node.args):
                self.facts.add("reduced_precision")
        elif tail == "parameters":
            if ft is ast.Attribute:
                name = dotted(func.value)  # type: ignore[attr-defined]
                if name:
                    self.model_names.add(name)
        elif tail in {"autocast", "GradScaler", "half", "bfloat16", "TrainStep"}:
            self.facts.add("reduced_precision")
        elif tail == "set_float32_matmul_precision":
            if node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value in {"high", "medium"}:
                self.facts.add("tf32_enabled")
        elif tail == "fast_defaults":  # pitstop.train.fast_defaults: TF32 and the autotuner
            self.facts.update({"tf32_enabled", "cudnn_benchmark_true"})
        elif tail == "use_deterministic_algorithms":
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is True:
                self.facts.add("deterministic")
        elif tail in {"DistributedDataParallel", "FullyShardedDataParallel", "DDP", "FSDP"}:
            self.facts.add("uses_ddp")
        elif tail == "no_sync":
            self.facts.add("ddp_sync_control")

    def _index_assign(self, node: ast.Assign) -> None:
        value = node.value
        for target in node.targets:
            for name in target_names(target):
                tail = name.rsplit(".", 1)[-1]
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    if "device" in tail.lower() or tail.lower() in {"dev", "accelerator"}:
                        kind = CPU if value.value in {"cpu", "meta"} else GPU
                        self.device_literals.setdefault(name, set()).add(kind)
                elif isinstance(value, ast.Call):
                    t = callee_tail(value)
                    if t == "DataLoader" or (t and "loader" in t.lower()):
                        self.loader_names.add(name)
                    elif t in {"DistributedDataParallel", "DDP", "DataParallel", "compile"} \
                            or MODEL_FACTORY_RE.search(qualname(value.func, self.aliases) or ""):
                        self.model_names.add(name)
                    elif t == "device" and value.args and isinstance(value.args[0], ast.Constant):
                        arg = value.args[0].value
                        kind = CPU if arg in {"cpu", "meta"} else GPU
                        self.device_literals.setdefault(name, set()).add(kind)
                    elif t in {"to", "cuda"} and isinstance(value.func, ast.Attribute):
                        inner = value.func.value
                        if (isinstance(inner, ast.Call) and (
                                (callee_tail(inner)[:1].isupper()
                                 and callee_tail(inner) not in {"DataLoader", "Tensor"})
                                or MODEL_FACTORY_RE.search(qualname(inner.func, self.aliases) or ""))) or dotted(inner) in self.model_names:
                            self.model_names.add(name)
                if tail == "benchmark" and "cudnn" in (dotted(target) or "") + str(
                        self.aliases.get("cudnn", "")):
                    if isinstance(value, ast.Constant) and value.value is True:
                        self.facts.add("cudnn_benchmark_true")
                elif tail == "deterministic" and isinstance(value, ast.Constant) \
                        and value.value is True:
                    self.facts.add("deterministic")
                elif (tail == "allow_tf32" and isinstance(value, ast.Constant) \
                        and value.value is True and "matmul" in name) or (tail == "fp32_precision" and isinstance(value, ast.Constant) \
                        and value.value == "tf32"):
                    self.facts.add("tf32_enabled")
                elif tail == "require_backward_grad_sync":
                    self.facts.add("ddp_sync_control")

    # ------------------------------------------------------------------ reporting
    def report(self, code: str, node: ast.AST, message: str, *, fix: Fix | None = None,
               evidence: Iterable[tuple[str, object]] = (), condition: str = "") -> None:
        line = getattr(node, "lineno", 1)
        col_bytes = getattr(node, "col_offset", 0)
        col = self.char_column(line, col_bytes)
        key = (code, line, col)
        if key in self._seen:
            return
        self._seen.add(key)
        end_line = getattr(node, "end_lineno", None)
        end_col_b = getattr(node, "end_col_offset", None)
        end_col = self.char_column(end_line, end_col_b) if end_line and end_col_b is not None else None
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.findings.append(LintFinding(
            code=code, path=self.path, line=line, column=col + 1, message=message,
            end_line=end_line, end_column=None if end_col is None else end_col + 1, fix=fix,
            evidence=tuple(evidence), condition=condition, source_line=src.rstrip("\r\n"),
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

    # ------------------------------------------------------------------ value kinds
    def device_kind(self, node: ast.AST) -> str | None:
        """GPU / CPU for an expression used as a device, ``"dtype"`` for a dtype, else None."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                if v in {"cpu", "meta"}:
                    return CPU
                if v.startswith(("cuda", "mps", "xpu", "hpu", "npu")):
                    return GPU
                return None
            if isinstance(v, int) and not isinstance(v, bool):
                return GPU
            return None
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("cuda"):
                return GPU
            return None
        if isinstance(node, ast.Call):
            tail = callee_tail(node)
            if tail == "device":
                arg = node.args[0] if node.args else None
                return CPU if isinstance(arg, ast.Constant) and arg.value in {"cpu", "meta"} else GPU
            if tail in {"current_device", "get_device", "device_count"}:
                return GPU
            return None
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node) or ""
            tail = name.rsplit(".", 1)[-1]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and self.aliases.get(node.value.id) == "torch" and tail in TORCH_DTYPES:
                return "dtype"
            low = tail.lower()
            if "dtype" in low or low in {"ptdtype", "precision"}:
                return "dtype"
            if "device" in low or low in {"dev", "rank", "local_rank", "gpu", "gpu_id", "cuda",
                                          "accelerator", "device_id", "ddp_local_rank"}:
                kinds = self.device_literals.get(name)
                if kinds == {CPU}:
                    return CPU
                return GPU
            return None
        if isinstance(node, ast.IfExp):
            a, b = self.device_kind(node.body), self.device_kind(node.orelse)
            return GPU if GPU in (a, b) else (a or b)
        return None

    def is_model_callee(self, func: ast.AST, st: State) -> bool:
        name = dotted(func)
        if name is None:
            return False
        if st.env.get(name) == MODEL or name in self.model_names:
            return True
        if name == "self" and st.func is not None:
            cls = self.class_of.get(st.func)
            return cls is not None and cls.name in self.module_classes
        tail = name.rsplit(".", 1)[-1]
        return bool(MODEL_RE.search(tail.lower())) or tail in MODEL_EXACT

    def looks_like_module(self, node: ast.AST, st: State) -> bool:
        """``Net()``, ``resnet50()``, ``model``: something that is a module, not a tensor."""
        if isinstance(node, ast.Call):
            tail = callee_tail(node)
            if tail[:1].isupper() and tail not in {"Tensor", "DataLoader"} and not tail.isupper():
                return True
            if tail in {"to", "cuda", "half", "float", "bfloat16"} and isinstance(
                    node.func, ast.Attribute):
                return self.looks_like_module(node.func.value, st)
            return bool(MODEL_FACTORY_RE.search(qualname(node.func, self.aliases) or ""))
        if isinstance(node, (ast.Name, ast.Attribute)):
            return st.env.get(dotted(node) or "") == MODEL or self.is_model_callee(node, st)
        return False

    def kind(self, node: ast.AST, st: State) -> str | None:
        """What ``node`` evaluates to: GPU, MASK, CPU, MODEL or None (unknown)."""
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name is not None and name in st.env:
                return st.env[name]
            if isinstance(node, ast.Attribute):
                inner = self.kind(node.value, st)
                if inner in (GPU, MASK):
                    if node.attr in META_ATTRS:
                        return CPU
                    if node.attr in {"T", "mT", "H", "data", "grad", "real", "imag"} or \
                            not node.attr.startswith("_"):
                        return GPU  # outputs.logits, loss.data
                return None
            return None
        if isinstance(node, ast.Constant):
            return CPU
        if isinstance(node, (ast.JoinedStr, ast.List, ast.Dict, ast.Set)):
            return CPU if not isinstance(node, ast.List) else None
        if isinstance(node, ast.Call):
            return self._call_kind(node, st)
        if isinstance(node, ast.BinOp):
            left, right = self.kind(node.left, st), self.kind(node.right, st)
            if MASK in (left, right) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
                return MASK
            if GPU in (left, right) or MASK in (left, right):
                return GPU
            if left == CPU and right == CPU:
                return CPU
            return None
        if isinstance(node, ast.UnaryOp):
            inner = self.kind(node.operand, st)
            if isinstance(node.op, ast.Not):
                return CPU if inner == CPU else (MASK if inner in (GPU, MASK) else None)
            return inner
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return CPU
            kinds = [self.kind(node.left, st)] + [self.kind(c, st) for c in node.comparators]
            if GPU in kinds or MASK in kinds:
                return MASK
            return CPU if all(k == CPU for k in kinds) else None
        if isinstance(node, ast.Subscript):
            inner = self.kind(node.value, st)
            if inner in (GPU, MASK):
                return inner
            return None
        if isinstance(node, ast.IfExp):
            a, b = self.kind(node.body, st), self.kind(node.orelse, st)
            return a if a == b else (GPU if GPU in (a, b) else None)
        if isinstance(node, ast.BoolOp):
            kinds = [self.kind(v, st) for v in node.values]
            return MASK if GPU in kinds or MASK in kinds else None
        if isinstance(node, ast.Tuple):
            return None
        return None

    def _call_kind(self, node: ast.Call, st: State) -> str | None:
        func = node.func
        tail = callee_tail(node)
        if isinstance(func, ast.Attribute):
            recv = self.kind(func.value, st)
            if tail == "to":
                dev = kwarg(node, "device")
                target = dev.value if dev is not None else (node.args[0] if node.args else None)
                dk = self.device_kind(target) if target is not None else None
                if dk == GPU:
                    return MODEL if recv == MODEL or self.looks_like_module(func.value, st) \
                        else GPU
                if dk == CPU:
                    return CPU
                if target is not None and dk is None:
                    other = self.kind(target, st)
                    if other in (GPU, MASK):
                        return GPU
                return recv
            if tail == "cuda":
                return MODEL if recv == MODEL or self.looks_like_module(func.value, st) else GPU
            if tail == "cpu":  # a tensor or a module brought to the host
                return CPU
            if recv == MODEL and tail in {"parameters", "named_parameters", "buffers",
                                          "named_buffers", "modules", "children", "state_dict",
                                          "named_modules", "train", "eval"}:
                return None
            if recv in (GPU, MASK):
                if tail in HOST_METHODS:
                    return CPU
                if tail in MASK_METHODS:
                    return MASK
                if tail in {"any", "all"}:
                    return MASK
                return GPU
            if recv == MODEL and tail in {"forward", "generate", "__call__"}:
                return GPU if self.gpu_program else None
        qn = qualname(func, self.aliases) or ""
        if tail in {"DistributedDataParallel", "DDP", "DataParallel", "FullyShardedDataParallel",
                    "FSDP", "compile"} or (tail[:1].isupper() and not tail.isupper()
                                           and tail not in {"Tensor", "DataLoader"}):
            return MODEL if self.gpu_program else None
        if tail in {"float", "int", "bool", "len", "str", "repr", "round", "abs", "time",
                    "perf_counter"} and isinstance(func, ast.Name):
            return CPU
        if tail in {"allclose", "equal", "is_tensor", "is_floating_point", "is_complex",
                    "is_grad_enabled", "numel"} and qn.startswith("torch."):
            return CPU
        if tail in {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                    "randint", "arange", "linspace", "eye", "zeros_like", "ones_like",
                    "empty_like", "full_like", "rand_like", "randn_like", "from_numpy"} \
                and qn.startswith("torch."):
            dev = kwarg(node, "device")
            if dev is not None:
                dk = self.device_kind(dev.value)
                return GPU if dk == GPU or self.kind(dev.value, st) == GPU else (
                    CPU if dk == CPU else None)
            if tail.endswith("_like") and node.args:
                return self.kind(node.args[0], st)
            return CPU
        if st.env.get(dotted(func) or "") == CPU:  # `model = model.cpu()`; `model(x)`
            return CPU
        if self.is_model_callee(func, st):
            if self.gpu_program:
                return GPU
            return None
        argkinds = [self.kind(a, st) for a in node.args if not isinstance(a, ast.Starred)]
        argkinds += [self.kind(k.value, st) for k in node.keywords]
        any_gpu = GPU in argkinds or MASK in argkinds
        if LOSS_RE.search(tail) or qn.startswith("torch.nn.functional."):
            if any_gpu:
                return GPU
            return None
        if qn.startswith("torch.") and not qn.startswith(("torch.cuda.", "torch.distributed.")):
            if tail in {"isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
                        "logical_and", "logical_or", "logical_not", "isclose", "any", "all"}:
                return MASK if any_gpu else None
            return GPU if any_gpu else None
        if qn.startswith(("numpy.", "np.", "math.")):
            return CPU
        # a function of this module: what does it return?
        if isinstance(func, ast.Name) and func.id in self.functions:
            return self._return_kind(self.functions[func.id][0], node, st)
        return None

    def _return_kind(self, fn: FuncDef, call: ast.Call, st: State) -> str | None:
        if st.depth > 2 or st.hot is None or st.rare:
            return None
        key = (id(fn), tuple(self.kind(a, st) for a in call.args))
        if key in self._return_memo:
            return self._return_memo[key]
        self._return_memo[key] = None
        result = self._return_kind_uncached(fn, call, st)
        self._return_memo[key] = result
        return result

    def _return_kind_uncached(self, fn: FuncDef, call: ast.Call, st: State) -> str | None:
        returns: list[ast.Return] = [n for n in iter_shallow(fn.body, into_loops=True)
                                     if isinstance(n, ast.Return) and n.value is not None]
        if not returns:
            return None
        env = self._bind_params(fn, call, st)
        sub = State(env=env, depth=st.depth + 1, func=fn)
        # Evaluate assignments in order (no findings) so that `x = x.to(device); return x`
        # is known to return a GPU tensor.
        # In source order (iter_shallow yields nested bodies last-first): `res = []` must
        # be bound before the `res.append(...)` that follows it.
        steps = sorted((n for n in iter_shallow(fn.body, into_loops=True)
                        if isinstance(n, (ast.Assign, ast.Call))),
                       key=lambda n: (n.lineno, n.col_offset))
        for n in steps:
            if isinstance(n, ast.Assign):
                self._bind(n.targets, n.value, sub)
            elif isinstance(n, ast.Call) and callee_tail(n) == "append" and len(n.args) == 1 \
                    and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and self.kind(n.args[0], sub) == GPU:
                sub.env[n.func.value.id] = GPU  # its items are GPU tensors
        kinds = {self.kind(r.value, sub) if not isinstance(r.value, ast.Tuple) else
                 (GPU if any(self.kind(e, sub) == GPU for e in r.value.elts) else None)
                 for r in returns if r.value is not None}
        return kinds.pop() if len(kinds) == 1 else (GPU if GPU in kinds else None)

    def _bind_params(self, fn: FuncDef, call: ast.Call | None, st: State) -> dict[str, str]:
        env: dict[str, str] = {k: v for k, v in st.env.items() if k.startswith("self.")}
        if call is None:
            return env
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if params and params[0] in {"self", "cls"} and isinstance(call.func, ast.Attribute):
            params = params[1:]
        for name, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            k = self.kind(arg, st)
            if k is not None:
                env[name] = k
        for kw in call.keywords:
            if kw.arg:
                k = self.kind(kw.value, st)
                if k is not None:
                    env[kw.arg] = k
        return env

    def _bind(self, targets: list[ast.expr], value: ast.expr, st: State) -> None:
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self._bind([t], v, st)
                continue
            k = self.kind(value, st)
            from_batch = root_name(value) in st.batch if not isinstance(value, ast.Call) else (
                isinstance(value.func, ast.Attribute) and root_name(value.func.value) in st.batch
                and callee_tail(value) not in {"to", "cuda"})
            rare = self.rarity(value, st) == "rare" if isinstance(
                value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) else False
            for name in target_names(target):
                if k is None:
                    st.env.pop(name, None)
                else:
                    st.env[name] = k
                if from_batch and "." not in name:
                    st.batch.add(name)
                elif name in st.batch and not from_batch:
                    st.batch.discard(name)
                if rare:
                    self.rare_names.add(name)

    # ------------------------------------------------------------------ guards
    def rarity(self, test: ast.AST, st: State) -> str | None:
        """``"rare"`` when ``test`` holds on few iterations (``step % N == 0``),
        ``"frequent"`` for its complement (``step % N != 0``), None when unknown."""
        if isinstance(test, ast.BoolOp):
            parts = [self.rarity(v, st) for v in test.values]
            if isinstance(test.op, ast.And):
                return "rare" if "rare" in parts else None
            return "rare" if all(p == "rare" for p in parts) else None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.rarity(test.operand, st)
            return {"rare": "frequent", "frequent": "rare"}.get(inner or "")
        if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
            return "frequent"
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op = test.ops[0]
            sides = [test.left, test.comparators[0]]
            has_mod = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                          for s in sides for n in ast.walk(s))
            if isinstance(op, ast.Eq):
                if has_mod:
                    return "rare"
                names = " ".join(dotted(s) or "" for s in sides).lower()
                if "rank" in names or "master" in names:
                    return None
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
                return "frequent" if has_mod else None
            if isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
                for side in sides:
                    for sub in ast.walk(side):
                        if isinstance(sub, ast.Call) and callee_tail(sub) in TIME_FUNCS:
                            return "rare"
                return None
            return None
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = dotted(test) or ""
            if name in self.rare_names or RARE_NAME_RE.search(name.rsplit(".", 1)[-1]):
                return "rare"
            return None
        if isinstance(test, ast.Call):
            tail = callee_tail(test)
            if RARE_NAME_RE.search(tail) or tail in {"every", "should_log", "is_log_step"}:
                return "rare"
            if isinstance(test.func, ast.Call) and callee_tail(test.func) == "every":
                return "rare"
        return None

    # ------------------------------------------------------------------ loops
    def is_optimizer_step(self, call: ast.Call) -> bool:
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr == "backward":
            return True
        if func.attr in {"step", "optimizer_step"}:
            owner = last_name(func.value)
            if owner and OPTIM_RE.search(owner):
                return True
        return False

    def is_step_function(self, fn: FuncDef) -> bool:
        """Does ``fn`` run backward/optimizer.step outside any loop of its own?"""
        memo = self._step_fn_memo
        if fn in memo:
            return memo[fn]
        memo[fn] = False  # recursion guard
        result = self._has_markers(fn.body, into_loops=False, owner=fn)
        memo[fn] = result
        return result

    def _resolve_local(self, call: ast.Call, owner: FuncDef | None) -> FuncDef | None:
        func = call.func
        if isinstance(func, ast.Name):
            cands = self.functions.get(func.id)
            if cands:
                for c in cands:
                    if c not in self.class_of:
                        return c
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and owner is not None:
            cls = self.class_of.get(owner)
            if cls is not None:
                for c in self.functions.get(func.attr, ()):
                    if self.class_of.get(c) is cls:
                        return c
        return None

    def _has_markers(self, stmts: list[ast.stmt], *, into_loops: bool,
                     owner: FuncDef | None, skip_loaderish: bool = False) -> bool:
        for node in iter_shallow(stmts, into_loops=into_loops):
            if skip_loaderish and isinstance(node, (ast.For, ast.AsyncFor)) \
                    and self.is_loaderish(node.iter):
                continue
            if isinstance(node, ast.Call):
                if self.is_optimizer_step(node):
                    return True
                fn = self._resolve_local(node, owner)
                if fn is not None and self.is_step_function(fn):
                    return True
        return False

    def is_loaderish(self, it: ast.expr) -> bool:
        for inner in unwrap_iterable(it):
            name = dotted(inner)
            if isinstance(inner, ast.Call):
                name = dotted(inner.func)
            if not name:
                continue
            if name in self.loader_names:
                return True
            tail = name.rsplit(".", 1)[-1]
            if LOADERISH_RE.search(tail):
                return True
        return False

    def classify_loop(self, loop: ast.For | ast.AsyncFor | ast.While,
                      owner: FuncDef | None) -> str | None:
        body = loop.body
        if self._has_markers(body, into_loops=False, owner=owner):
            return "train"
        if isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_loaderish(loop.iter):
            if self._has_markers(body, into_loops=True, owner=owner, skip_loaderish=True):
                return "train"
            if self._runs_model_eval(body, owner):
                return "eval"
        return None

    def _runs_model_eval(self, body: list[ast.stmt], owner: FuncDef | None) -> bool:
        calls_model = False
        st = State(func=owner)
        for node in iter_shallow(body, into_loops=True):
            if isinstance(node, ast.Call):
                tail = callee_tail(node)
                if "step" in tail or "backward" in tail or "train" in tail:
                    return False
                if self._has_markers_call(node, owner):
                    return False
                if not calls_model and self.is_model_callee(node.func, st) and tail not in {
                        "parameters", "train", "eval", "state_dict", "to", "cuda", "zero_grad",
                        "named_parameters", "apply", "register_forward_hook"}:
                    calls_model = True
        return calls_model

    def _has_markers_call(self, call: ast.Call, owner: FuncDef | None) -> bool:
        if self.is_optimizer_step(call):
            return True
        fn = self._resolve_local(call, owner)
        return fn is not None and (self.is_step_function(fn) or self._has_markers(
            fn.body, into_loops=True, owner=fn))

    # ------------------------------------------------------------------ the walk
    def could_have_hot_loops(self) -> bool:
        """A cheap test before the walk: a loop can only be hot if something steps an
        optimizer / calls backward, a loop iterates a loader, or a Lightning hook exists."""
        if any(n in self.functions for n in LIGHTNING_HOOKS) or (
                "forward" in self.functions and self.module_classes):
            return True
        if not self.loops:
            return False
        if any(self.is_optimizer_step(c) for c in self.calls):
            return True
        return any(isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_loaderish(loop.iter)
                   for loop in self.loops)

    def run(self, hot_rules: list[HotRule]) -> None:
        """Walk the module and every function, calling ``hot_rules`` on per-batch code."""
        self.hot_rules = hot_rules
        top = State()
        self.walk_body(self.tree.body, top)
        global_env = {k: v for k, v in top.env.items()}
        class_env: dict[ast.ClassDef, dict[str, str]] = {}
        for fns in self.functions.values():
            for fn in fns:
                hook = LIGHTNING_HOOKS.get(fn.name)
                cls = self.class_of.get(fn)
                if fn.name == "forward" and cls is not None and cls.name in self.module_classes:
                    # forward() runs once per batch. Its arguments' devices are unknown, so
                    # only rules that do not depend on them look at it (tensor-on-device).
                    env = dict(global_env)
                    if cls not in class_env:
                        class_env[cls] = self._class_env(cls)
                    env.update(class_env[cls])
                    hot = HotLoop(fn, "forward", fn.lineno)
                    self.walk_body(fn.body, State(hot=hot, env=env, func=fn))
                    continue
                if fn not in self.funcs_with_loops and not hook:
                    continue  # no loop of its own: walked only when a hot loop calls it
                env = dict(global_env)
                if cls is not None:
                    if cls not in class_env:
                        class_env[cls] = self._class_env(cls)
                    env.update(class_env[cls])
                if hook and cls is not None and cls.name in self.module_classes:
                    hot = HotLoop(fn, hook, fn.lineno)
                    params = [a.arg for a in fn.args.args[1:]]
                    st = State(hot=hot, env=env, func=fn, via=f"(`{fn.name}` runs once per batch)")
                    if self.gpu_program:
                        for p in params:
                            if p not in {"batch_idx", "dataloader_idx", "optimizer_idx"}:
                                st.env[p] = GPU
                    self.walk_body(fn.body, st)
                else:
                    self.walk_body(fn.body, State(env=env, func=fn))

    def _class_env(self, cls: ast.ClassDef) -> dict[str, str]:
        env: dict[str, str] = {}
        st = State(env=env)
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and all(
                    (dotted(t) or "").startswith("self.") for t in node.targets):
                k = self.kind(node.value, st)
                if k is None and isinstance(node.value, ast.Call) and (
                        callee_tail(node.value)[:1].isupper() or MODEL_FACTORY_RE.search(
                            qualname(node.value.func, self.aliases) or "")):
                    for t in node.targets:
                        name = dotted(t) or ""
                        if name in self.model_names:
                            env[name] = MODEL
                    continue
                if k is not None:
                    for t in node.targets:
                        env[dotted(t) or ""] = k
        return env

    def walk_body(self, stmts: list[ast.stmt], st: State) -> None:
        rest = st
        for stmt in stmts:
            self.walk_stmt(stmt, rest)
            if rest.hot is not None and not rest.rare and isinstance(stmt, ast.If) \
                    and not stmt.orelse and all(isinstance(s, (ast.Continue, ast.Return))
                                                for s in stmt.body) \
                    and self.rarity(stmt.test, rest) == "frequent":
                rest = replace(rest, rare=True)

    def walk_stmt(self, stmt: ast.stmt, st: State) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(stmt, ast.Assign):
            self.visit_expr(stmt.value, st)
            self._bind(stmt.targets, stmt.value, st)
            if isinstance(stmt.value, ast.Call) and self.is_model_callee(stmt.value.func, st) \
                    and callee_tail(stmt.value) in {"to", "cuda"}:
                for t in stmt.targets:
                    for n in target_names(t):
                        st.env[n] = MODEL
        elif isinstance(stmt, ast.AugAssign):
            self.visit_expr(stmt.value, st)
            name = dotted(stmt.target)
            if name:
                k = self.kind(stmt.value, st)
                if k == GPU:
                    st.env[name] = GPU
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.visit_expr(stmt.value, st)
                self._bind([stmt.target], stmt.value, st)
        elif isinstance(stmt, ast.Expr):
            self.visit_expr(stmt.value, st)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.visit_expr(stmt.value, st)
        elif isinstance(stmt, ast.If):
            self.visit_expr(stmt.test, st)
            self._check_test(stmt.test, stmt, st)
            rare = self.rarity(stmt.test, st) == "rare"
            self.walk_body(stmt.body, replace(st, rare=True) if st.hot and (
                rare or self._leaves_loop(stmt.body, st)) else st)
            self.walk_body(stmt.orelse, replace(st, rare=True) if st.hot and stmt.orelse
                           and self._leaves_loop(stmt.orelse, st) else st)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
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
            self._check_test(stmt.test, stmt, st)
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
        if isinstance(last, ast.Raise):
            return True
        if not isinstance(last, (ast.Return, ast.Break)) or st.hot is None or st.via:
            return False
        if isinstance(last, ast.Break) and st.nested:
            return False
        return self.enclosing(st.hot.node, (ast.FunctionDef, ast.AsyncFunctionDef)) is st.func

    def _walk_loop(self, loop: ast.For | ast.AsyncFor | ast.While, st: State) -> None:
        kind = self.classify_loop(loop, st.func)
        inner = st
        if kind is not None and (st.hot is None or st.rare):
            hot = HotLoop(loop, kind, loop.lineno)
            self.hot_loops.append(hot)
            if kind == "train":
                self.has_train_loop = True
            inner = replace(st, hot=hot, rare=False, via="", nested=False)
        elif st.hot is not None and not st.nested:
            inner = replace(st, nested=True)
        if isinstance(loop, ast.While):
            self.visit_expr(loop.test, inner)
            self._check_test(loop.test, loop, inner)
        else:
            self.visit_expr(loop.iter, st)
            loaderish = self.is_loaderish(loop.iter)
            ik = self.kind(loop.iter, st)
            names = list(target_names(loop.target))
            for name in names:
                if loaderish:
                    inner.env.pop(name, None)
                    inner.batch.add(name)
                elif ik == GPU:
                    inner.env[name] = GPU
                else:
                    inner.env.pop(name, None)
            # enumerate(loader): the counter is a host int, not batch data
            if loaderish and isinstance(loop.iter, ast.Call) and callee_tail(loop.iter) == "enumerate" \
                    and isinstance(loop.target, ast.Tuple) and loop.target.elts:
                for name in target_names(loop.target.elts[0]):
                    inner.batch.discard(name)
                    inner.env[name] = CPU
        self.walk_body(loop.body, inner)
        self.walk_body(loop.orelse, st)

    def _check_test(self, test: ast.expr, stmt: ast.AST, st: State) -> None:
        if not st.per_batch:
            return
        k = self.kind(test, st)
        if k in (GPU, MASK):
            for rule in self.hot_rules:
                rule(self, stmt, st)

    def visit_expr(self, expr: ast.expr, st: State) -> None:
        """Run the hot rules on every node of ``expr`` when it runs once per batch, and
        follow calls into functions of this module."""
        if st.hot is None or st.rare:
            return
        stack: list[ast.AST] = [expr]
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
            for rule in self.hot_rules:
                rule(self, node, st)
            if isinstance(node, ast.Call):
                self._note_batch_move(node, st)
                self._follow(node, st)
            stack.extend(ast.iter_child_nodes(node))

    def _note_batch_move(self, call: ast.Call, st: State) -> None:
        """Remember that batch data goes to a GPU (the pin-memory rule asks)."""
        func = call.func
        if self.moves_batches_to_gpu or not isinstance(func, ast.Attribute) \
                or func.attr not in {"to", "cuda"} or root_name(func.value) not in st.batch:
            return
        if func.attr == "to":
            dev = kwarg(call, "device")
            target = dev.value if dev is not None else (call.args[0] if call.args else None)
            if target is None or self.device_kind(target) != GPU:
                return
        self.moves_batches_to_gpu = True

    def _follow(self, call: ast.Call, st: State) -> None:
        if st.depth >= 3:
            return
        fn = self._resolve_local(call, st.func)
        if fn is None or fn is st.func:
            return
        env = self._bind_params(fn, call, st)
        # keep module-level and self.* knowledge
        for k, v in st.env.items():
            if "." in k:
                env.setdefault(k, v)
        params = {a.arg for a in fn.args.args}
        batch = {p for p, a in zip([a.arg for a in fn.args.args], call.args, strict=False)
                 if root_name(a) in st.batch} & params
        key = (id(fn), frozenset(f"{k}={v}" for k, v in env.items()), st.hot.kind if st.hot else "")
        if key in self._walked:
            return
        self._walked.add(key)
        line = getattr(call, "lineno", 0)
        via = st.via or f"(`{fn.name}` is called per batch from line {line})"
        sub = State(hot=st.hot, env=env, batch=batch, via=via, depth=st.depth + 1, func=fn,
                    no_grad=st.no_grad)
        self.walk_body(fn.body, sub)

    def enclosing(self, node: ast.AST, types: tuple[type, ...]) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, types):
            cur = self.parents.get(cur)
        return cur
