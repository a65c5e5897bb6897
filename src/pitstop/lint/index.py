"""The index of one module: one pass over its AST that collects what every model and rule
asks about (calls, assignments, loops, functions, classes, imports, facts, accelerator
evidence), grouped so that each question is a dictionary look-up, never a scan.

Linear in the size of the module: every node is visited once, and nothing later walks
the whole tree again (``parents`` is built on first use, also in one pass).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from pitstop.lint.astutil import (
    OPTIM_RE,
    callee_tail,
    dotted,
    last_name,
    param_default,
    param_names,
    qualname,
    target_names,
)

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)

MODEL_FACTORY_RE = re.compile(
    r"(^|\.)(resnet\d*|resnext\w*|wide_resnet\w*|vgg\w*|efficientnet\w*|mobilenet\w*|densenet\w*|"
    r"convnext\w*|regnet\w*|alexnet|googlenet|inception_v3|squeezenet\w*|shufflenet\w*|"
    r"mnasnet\w*|vit_\w+|swin_\w+|create_model|from_pretrained|from_config)$"
)
CONV_TAIL_RE = re.compile(
    r"resnet\d*|resnext\w*|wide_resnet\w*|vgg\w*|efficientnet\w*|mobilenet\w*|densenet\w*|"
    r"convnext\w*|regnet\w*|alexnet|googlenet|inception_v3|squeezenet\w*|shufflenet\w*|"
    r"mnasnet\w*|UNet2DModel|UNet2DConditionModel|AutoencoderKL"
)
FUNCTIONAL_CONVS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d",
                              "conv_transpose2d", "conv_transpose3d"})
CONV_CLASSES = frozenset({"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                          "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "GCNConv",
                          "SAGEConv", "GATConv"})
# What decides whether TF32 for matmuls matters (cuDNN convolutions and RNNs already use
# TF32 by default): work that is mostly matrix multiplication (attention, transformers,
# explicit matmuls, step-by-step RNN cells), or Linear layers that are not a mere head on
# a convolutional or recurrent network (an MLP, or a language model's vocabulary layer).
MATMUL_HEAVY_TAILS = frozenset({"MultiheadAttention", "Transformer", "TransformerEncoder",
                                "TransformerDecoder", "TransformerEncoderLayer",
                                "TransformerDecoderLayer", "matmul", "bmm", "mm", "einsum",
                                "baddbmm", "addmm", "scaled_dot_product_attention",
                                "from_pretrained", "LSTMCell", "GRUCell", "RNNCell"})
LINEAR_TAILS = frozenset({"Linear", "LazyLinear", "Bilinear", "linear", "GCNConv", "SAGEConv",
                          "GATConv", "GATv2Conv", "GINConv", "PNAConv", "TransformerConv", "MLP"})
EMBEDDING_TAILS = frozenset({"Embedding", "EmbeddingBag"})
RNN_TAILS = frozenset({"LSTM", "GRU", "RNN"})
# packages whose classes are nn.Modules (a subclass of one is a model)
MODEL_LIBRARIES = ("timm.models.", "torchvision.models.", "transformers.models.",
                   "transformers.modeling_", "diffusers.models.")
# a model class exported at the top of a transformers package (`from pytorch_transformers
# import BertForTokenClassification`): `BertModel`, `GPT2LMHeadModel`, `...ForXxx`
TRANSFORMERS_PACKAGES = ("transformers.", "pytorch_transformers.", "pytorch_pretrained_bert.")
TRANSFORMERS_MODEL_RE = re.compile(r"(Model|For[A-Z]\w+)$")
_CONV_GCN = frozenset({"GCNConv", "SAGEConv", "GATConv"})  # graph "convolutions" are matmuls
_HEAVY_CLASS_WORDS = ("Attention", "Transformer", "Attn")
# models built by name from a library the program does not show: transformer families
HEAVY_MODEL_RE = re.compile(r"GPT|Llama|LLaMA|Bert|BERT|Transformer|Mistral|Mixtral|Gemma|Qwen|"
                            r"Falcon|Bloom|ViT|ForCausalLM|ForMaskedLM|ForSeq2SeqLM|Attention")
ACCEL_STRINGS = ("cuda", "mps", "xpu", "hpu", "npu", "gpu")
_ACCEL_EXACT = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "gpu"})
_ACCEL_HEADS = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "gpu", "cuda:", "mps:", "xpu:"})

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


_MATMUL_CALLS = frozenset({"Linear", "LazyLinear", "matmul", "bmm", "baddbmm", "einsum",
                           "softmax", "scaled_dot_product_attention", "MultiheadAttention",
                           "linear", "mm"})


def _does_matmuls(cls: ast.ClassDef) -> bool:
    """Does an `*Attention*` class multiply matrices (Linear projections, matmul, softmax
    attention), or is it a convolutional gate (Attention U-Net's 1x1 convs)?"""
    for node in ast.walk(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and callee_tail(node) in _MATMUL_CALLS:
            return True
    return False


def is_optimizer_class(cls: ast.ClassDef, aliases: dict[str, str]) -> bool:
    """A subclass of ``torch.optim.Optimizer`` or of one of torch's optimizers (LARS,
    LAMB written in the program): its ``step()`` runs once per training step. (Not a
    learning-rate scheduler: its ``step()`` may run once per epoch.)"""
    for base in cls.bases:
        qual = qualname(base, aliases) or ""
        if qual.startswith(("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")):
            continue
        if qual.startswith("torch.optim.") or (last_name(base) or "") == "Optimizer":
            return True
    return False


def is_step_call(call: ast.Call) -> bool:
    """``x.backward()`` (a loss, ``accelerator.backward``, ``scaler.scale(l).backward``,
    a DeepSpeed engine's) or ``optimizer.step()`` / ``scaler.step(opt)``: syntax alone."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    attr = func.attr
    if attr in {"backward", "manual_backward"} or attr in TRAINING_METHODS:
        return True
    if attr in {"step", "optimizer_step"}:
        owner = last_name(func.value)
        if owner and (OPTIM_RE.search(owner) or STEP_OWNER_RE.search(owner)):
            return True
    return False


STEP_OWNER_RE = re.compile(r"engine$|^ds_|^deepspeed", re.IGNORECASE)
# The training step of model-object frameworks (CycleGAN/pix2pix, BasicSR, KAIR, CUT...):
# `model.optimize_parameters(step)` runs forward, backward and the optimizers' steps, on a
# model the program often builds by name (`create_model(opt)`), out of the analysis' reach.
TRAINING_METHODS = frozenset({"optimize_parameters", "optimize_params", "train_on_batch",
                              "update_parameters"})


# What the light pass reads from a module's text (it does not look at expressions): plain
# substrings, found at memchr speed.
TEXT_FACTS: dict[str, tuple[str, ...]] = {
    "reduced_precision": ("autocast", "bfloat16", "float16", ".half()", '-mixed"', "-mixed'"),
    "tf32_enabled": ('set_float32_matmul_precision("high', "set_float32_matmul_precision('high",
                     'set_float32_matmul_precision("medium', "matmul.allow_tf32 = True"),
    "cudnn_benchmark_true": ("cudnn.benchmark = True",),
    "deterministic": ("cudnn.deterministic = True", "use_deterministic_algorithms(True"),
    "has_conv": ("Conv1d(", "Conv2d(", "Conv3d(", "ConvTranspose1d(", "ConvTranspose2d(",
                 "ConvTranspose3d(", "resnet", "vgg1", "efficientnet", "mobilenet", "densenet",
                 "convnext", "regnet", "models.__dict__[", "F.conv1d(", "F.conv2d(", "F.conv3d(",
                 "F.conv_transpose2d("),
    # image convolutions (fixed-size crops, as a rule), not 1-d ones over sequences
    "image_conv": ("Conv2d(", "Conv3d(", "ConvTranspose2d(", "ConvTranspose3d(", "resnet",
                   "vgg1", "efficientnet", "mobilenet", "densenet", "convnext", "regnet",
                   "models.__dict__[", "F.conv2d(", "F.conv3d(", "F.conv_transpose2d("),
    "has_linear": ("Linear(",),
    "matmul_heavy": ("MultiheadAttention", "scaled_dot_product_attention", "torch.matmul",
                     "torch.bmm", "einsum(", "Attention(nn.Module", "Attention(Module",
                     "Transformer(nn.Module", "LSTMCell(", "GRUCell(", " @ ", "GPT(",
                     "ForCausalLM("),
    "has_embedding": ("Embedding(",),
    "has_rnn": ("nn.LSTM(", "nn.GRU(", "nn.RNN(", " LSTM(", " GRU(", " RNN("),
    "uses_ddp": ("DistributedDataParallel", "FullyShardedDataParallel", "DDP("),
    "ddp_sync_control": ("no_sync", "require_backward_grad_sync"),
}
_LOW_PRECISION = frozenset({"autocast", "bfloat16", "float16", "half"})
ARCH_FACTS = frozenset({"has_conv", "image_conv", "has_linear", "has_embedding", "has_rnn",
                        "matmul_heavy"})


def _lines_of(text: str, needles: tuple[str, ...]) -> list[int]:
    """The line of every place one of ``needles`` occurs in ``text``, in order (the
    newlines are counted once, not again from the top for each place)."""
    offsets = []
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            offsets.append(at)
            at = text.find(needle, at + 1)
    lines, line, last = [], 1, 0
    for at in sorted(offsets):
        line += text.count("\n", last, at)
        last = at
        lines.append(line)
    return lines


TEXT_ORIGINS = re.compile(r"\.cuda\(|['\"]cuda(:\d+)?['\"]|torch\.accelerator")


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


class ModuleIndex:
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

    def _text_facts(self, text: str) -> None:
        """The program facts and accelerator evidence of a module read in the light pass,
        found in its text."""
        for fact, needles in TEXT_FACTS.items():
            at = min((i for i in (text.find(n) for n in needles) if i >= 0), default=-1)
            if at >= 0:
                if fact == "deterministic":
                    fact = _determinism_fact_in_text(text, at)
                self.facts.setdefault(fact, text.count("\n", 0, at) + 1)
                if fact in ARCH_FACTS:  # (every place: see `arch_lines`)
                    self.arch_lines[fact] = _lines_of(text, needles)
        if "cuda" in text or "accelerator" in text:
            m = TEXT_ORIGINS.search(text)
            if m is not None:
                self.gpu_origins.append((text.count("\n", 0, m.start()) + 1,
                                         m.group(0).strip("'\"(")))

    def _constant(self, node: ast.Constant) -> None:
        v = node.value
        # "cuda", "cuda:0", "mps", "xpu": a device string anywhere (`.to("cuda")`,
        # `device="cuda"`, `set_default_device("cuda")`)
        if v.__class__ is str and v[:4] in _ACCEL_HEADS and (
                v in _ACCEL_EXACT or (v.startswith(("cuda:", "xpu:", "mps:")) and v[5:].isdigit())):
            self.gpu_origins.append((node.lineno, f'"{v}"'))

    def _torchvision_models(self, node: ast.expr) -> bool:
        name = dotted(node)
        return name is not None and qualname(node, self.aliases) in {
            "torchvision.models", "torchvision.models.__init__"}

    def _attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        facts = self.facts
        if attr in _LOW_PRECISION and not (
                isinstance(node.value, ast.Name)
                and self.aliases.get(node.value.id, "").startswith("numpy")):
            # (`np.float16`: host arrays, no GPU precision)
            # (a GradScaler alone lowers no precision: without autocast it scales an fp32 loss)
            # (`if self._dtype == torch.bfloat16:` sets nothing, but says the precision is
            # chosen elsewhere: a config file, an option)
            if id(node) in self._compared_setting:
                facts.setdefault("precision_external", node.lineno)
            elif id(node) not in self._compared:
                facts.setdefault("reduced_precision", node.lineno)
        elif attr in {"no_sync", "require_backward_grad_sync", "accumulate"}:
            # (`with accelerator.accumulate(model):` skips the sync on micro-steps)
            facts.setdefault("ddp_sync_control", node.lineno)
        elif attr in {"DistributedDataParallel", "FullyShardedDataParallel"}:
            facts.setdefault("uses_ddp", node.lineno)
        elif attr == "__dict__" and self._torchvision_models(node.value):
            # `models.__dict__[args.arch]`: a model of torchvision's zoo by name, a conv net
            self._conv(node.lineno)
        elif attr == "accelerator" and isinstance(node.value, ast.Name) \
                and self.aliases.get(node.value.id) == "torch":
            self.gpu_origins.append((node.lineno, "torch.accelerator"))
        elif attr == "cuda" and isinstance(node.value, ast.Name) \
                and self.aliases.get(node.value.id) == "torch":
            self.gpu_origins.append((node.lineno, "torch.cuda"))

    def _arch(self, fact: str, line: int) -> None:
        self.facts.setdefault(fact, line)
        self.arch_lines.setdefault(fact, []).append(line)

    def _conv(self, line: int, *, one_d: bool = False) -> None:
        self._arch("has_conv", line)
        if not one_d:
            self._arch("image_conv", line)

    def _call(self, node: ast.Call) -> None:
        func = node.func
        ft = type(func)
        tail = func.attr if ft is ast.Attribute else (func.id if ft is ast.Name else "")  # type: ignore[attr-defined]
        facts = self.facts
        if SEED_FN_RE.search(tail):
            self._seed_calls.append(node)
        for kw in node.keywords:
            if kw.arg in {"precision", "mixed_precision", "dtype", "torch_dtype"}:
                v = kw.value
                if isinstance(v, ast.Constant) and any(s in str(v.value) for s in ("16", "bf", "fp8")):
                    facts.setdefault("reduced_precision", node.lineno)
                elif kw.arg == "mixed_precision" and not isinstance(v, ast.Constant):
                    # Accelerator(mixed_precision=args.mixed_precision): chosen at run time
                    facts.setdefault("reduced_precision", node.lineno)
            elif kw.arg in {"fp16", "bf16"} and not (isinstance(kw.value, ast.Constant)
                                                     and kw.value.value is False):
                facts.setdefault("reduced_precision", node.lineno)
        # (also a functional net: MAML's learner runs `F.conv2d(x, w)`)
        if ((tail in CONV_CLASSES or CONV_TAIL_RE.fullmatch(tail)) and tail not in _CONV_GCN) \
                or (tail in FUNCTIONAL_CONVS and (qualname(func, self.aliases) or "").startswith(
                    "torch.nn.functional.")):
            self._conv(node.lineno, one_d=tail.endswith("1d"))
        elif tail in {"from_pretrained", "from_config"} and ft is ast.Attribute and \
                CONV_TAIL_RE.fullmatch(last_name(func.value) or ""):  # type: ignore[attr-defined]
            self._conv(node.lineno)  # UNet2DConditionModel.from_pretrained
        if (tail == "getattr" and node.args and self._torchvision_models(node.args[0])) or (
                tail == "get_model" and (qualname(func, self.aliases) or "").startswith(
                    "torchvision.models")):
            self._conv(node.lineno)  # the zoo by name: a conv net
        if tail in MATMUL_HEAVY_TAILS:
            self._arch("matmul_heavy", node.lineno)
        elif tail[:1].isupper() and HEAVY_MODEL_RE.search(tail):
            # `GPT(config)`, `LlamaForCausalLM(c)`: judged once the module's classes are
            # known (a local `Attention_block` of 1x1 convs multiplies no matrices)
            self._heavy_calls.append((tail, node.lineno))
        elif tail in LINEAR_TAILS:
            self._arch("has_linear", node.lineno)
        elif tail in EMBEDDING_TAILS:
            self._arch("has_embedding", node.lineno)
        elif tail in RNN_TAILS:
            self._arch("has_rnn", node.lineno)
        if tail == "cuda":
            if ft is ast.Attribute:
                self.gpu_origins.append((node.lineno, ".cuda()"))
        elif tail == "to":
            if any(isinstance(a, ast.Attribute) and a.attr in {"bfloat16", "float16", "half"}
                   for a in node.args):
                facts.setdefault("reduced_precision", node.lineno)
        elif tail == "parameters":
            if ft is ast.Attribute:
                name = dotted(func.value)  # type: ignore[attr-defined]
                if name:
                    self.model_names.add(name)
        elif tail in {"autocast", "half", "bfloat16", "TrainStep"}:
            facts.setdefault("reduced_precision", node.lineno)
        elif tail in {"initialize", "scale_loss"} and "apex" in (qualname(func, self.aliases) or ""):
            facts.setdefault("reduced_precision", node.lineno)  # apex.amp
        elif tail == "set_float32_matmul_precision":
            if node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value in {"high", "medium"}:
                facts.setdefault("tf32_enabled", node.lineno)
        elif tail == "fast_defaults":  # pitstop.train.fast_defaults: TF32 and the autotuner
            facts.setdefault("tf32_enabled", node.lineno)
            facts.setdefault("cudnn_benchmark_true", node.lineno)
        elif tail == "use_deterministic_algorithms":
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is True:
                facts.setdefault(_determinism_fact(self.owner.get(node)), node.lineno)
        elif tail in {"DistributedDataParallel", "FullyShardedDataParallel", "DDP", "FSDP",
                      "auto_model"}:  # (ignite's idist.auto_model wraps in DDP when distributed)
            facts.setdefault("uses_ddp", node.lineno)
        elif tail == "no_sync":
            facts.setdefault("ddp_sync_control", node.lineno)
        elif tail == "Fabric":
            # Lightning Fabric puts the model and batches on the accelerator it finds
            self.gpu_origins.append((node.lineno, "Fabric()"))
        elif tail == "Accelerator":
            # Accelerate places the model and batches on the accelerator it finds; without
            # mixed_precision= its precision comes from `accelerate config`, not the code
            self.gpu_origins.append((node.lineno, "Accelerator()"))
            facts.setdefault("accelerate", node.lineno)
            facts.setdefault("uses_ddp", node.lineno)  # DDP when launched on several GPUs
            if not any(k.arg in {"mixed_precision", None} for k in node.keywords):
                facts.setdefault("precision_external", node.lineno)
        elif tail in {"set_default_tensor_type", "set_default_device"} and node.args:
            # `torch.set_default_tensor_type("torch.cuda.FloatTensor")`: float tensors built
            # without a device are built on the GPU (set_default_device: all of them)
            spelled = ast.unparse(node.args[0])
            if tail == "set_default_device" and "cpu" not in spelled and "meta" not in spelled:
                facts.setdefault("default_device_gpu", node.lineno)
            elif "cuda" in spelled:
                facts.setdefault("default_float_gpu", node.lineno)
        elif tail == "init_process_group":
            backend = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "backend"), None)
            if isinstance(backend, ast.Constant) and backend.value == "nccl":
                self.gpu_origins.append((node.lineno, 'init_process_group("nccl")'))
        elif tail == "device" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if arg.value.startswith(ACCEL_STRINGS):
                    self.gpu_origins.append((node.lineno, f'torch.device("{arg.value}")'))
                elif arg.value in {"cpu", "meta"}:
                    self.cpu_device_lines.append(node.lineno)
        if tail in {"initialize", "deepspeed_init"} and "deepspeed" in (qualname(func, self.aliases) or ""):
            self.gpu_origins.append((node.lineno, "deepspeed.initialize()"))
            facts.setdefault("precision_external", node.lineno)  # the DeepSpeed config's

    def _assign(self, node: ast.Assign, owner: FuncDef | None) -> None:
        value = node.value
        for target in node.targets:
            for name in target_names(target):
                tail = name.rsplit(".", 1)[-1]
                if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)) and (
                        "device" in tail.lower() or tail in {"dev", "accelerator"}):
                    # `device = local_rank` on one path, `device = "cpu"` on another
                    self.device_literals.setdefault(name, set()).add("other")
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    low = tail.lower()
                    if "device" in low or low in {"dev", "accelerator"}:
                        kind = "cpu" if value.value in {"cpu", "meta"} else "gpu"
                        self.device_literals.setdefault(name, set()).add(kind)
                        if kind == "gpu" and value.value.startswith(ACCEL_STRINGS):
                            self.gpu_origins.append((node.lineno, f'{name} = "{value.value}"'))
                elif isinstance(value, ast.Call):
                    t = callee_tail(value)
                    if t == "DataLoader" or (t and "loader" in t.lower()):
                        self.loader_names.add(name)
                    elif t in {"DistributedDataParallel", "DDP", "DataParallel", "compile"} \
                            or MODEL_FACTORY_RE.search(qualname(value.func, self.aliases) or ""):
                        self.model_names.add(name)
                    elif t == "device" and value.args and isinstance(value.args[0], ast.Constant):
                        arg = value.args[0].value
                        kind = "cpu" if arg in {"cpu", "meta"} else "gpu"
                        self.device_literals.setdefault(name, set()).add(kind)
                    elif t in {"to", "cuda"} and isinstance(value.func, ast.Attribute):
                        inner = value.func.value
                        if (isinstance(inner, ast.Call) and (
                                (callee_tail(inner)[:1].isupper()
                                 and callee_tail(inner) not in {"DataLoader", "Tensor"})
                                or MODEL_FACTORY_RE.search(qualname(inner.func, self.aliases) or ""))) \
                                or dotted(inner) in self.model_names:
                            self.model_names.add(name)
                elif isinstance(value, ast.IfExp) and ("device" in tail.lower() or tail == "dev"):
                    for branch in (value.body, value.orelse):
                        if isinstance(branch, ast.Constant) and isinstance(branch.value, str):
                            kind = "cpu" if branch.value in {"cpu", "meta"} else "gpu"
                            self.device_literals.setdefault(name, set()).add(kind)
                            if kind == "gpu" and branch.value.startswith(ACCEL_STRINGS):
                                self.gpu_origins.append(
                                    (node.lineno, f'{name} = "{branch.value}" if ...'))
                if tail == "benchmark" and "cudnn" in (dotted(target) or "") + str(
                        self.aliases.get("cudnn", "")):
                    if (isinstance(value, ast.Constant) and value.value is True) or not isinstance(value, ast.Constant):
                        self.facts.setdefault("cudnn_benchmark_true", node.lineno)
                elif tail == "deterministic" and isinstance(value, ast.Constant) \
                        and value.value is True and "cudnn" in name:
                    self.facts.setdefault(_determinism_fact(owner), node.lineno)
                elif (tail == "allow_tf32" and "matmul" in name
                      and not _false_by_default(value, owner)) or (
                        tail == "fp32_precision" and isinstance(value, ast.Constant)
                        and value.value == "tf32"):
                    self.facts.setdefault("tf32_enabled", node.lineno)
                elif tail == "require_backward_grad_sync":
                    self.facts.setdefault("ddp_sync_control", node.lineno)

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

    def enclosing(self, node: ast.AST, types: tuple[type, ...]) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, types):
            cur = self.parents.get(cur)
        return cur

    def enclosing_function(self, node: ast.AST) -> FuncDef | None:
        if node in self.owner:
            return self.owner[node]
        found = self.enclosing(node, FUNCS)
        return found  # type: ignore[return-value]

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def inside(self, node: ast.AST, ancestor: ast.AST) -> bool:
        return any(a is ancestor for a in self.ancestors(node))

    def module_function(self, name: str) -> FuncDef | None:
        """The module-level (or nested, not a method) function called ``name``."""
        for fn in self.functions.get(name, ()):
            if fn not in self.class_of:
                return fn
        return None

    def visible_assigns(self, scope: FuncDef | None, name: str
                        ) -> list[ast.Assign | ast.AnnAssign]:
        """The assignments of ``name`` that ``scope`` sees: its own, else those of the
        nearest enclosing function (a closure) or of the module."""
        while True:
            assigns = self.scoped_assigns.get((scope, name))
            if assigns or scope is None:
                return assigns or []
            scope = self.owner.get(scope)

    def value_above(self, scope: FuncDef | None, name: str, line: int) -> ast.expr | None:
        """The value of the last assignment of ``name`` in ``scope`` above ``line``
        (`conv = nn.Conv2d(...)` ... `Sequential(conv, bn)`)."""
        before = [a for a in self.scoped_assigns.get((scope, name), ())
                  if a.lineno < line and a.value is not None]
        return max(before, key=lambda a: a.lineno).value if before else None

    def method(self, cls: ast.ClassDef, name: str) -> FuncDef | None:
        for fn in self.functions.get(name, ()):
            if self.class_of.get(fn) is cls:
                return fn
        return None

    def qualname_of(self, fn: FuncDef) -> str:
        cls = self.class_of.get(fn)
        return f"{cls.name}.{fn.name}" if cls is not None else fn.name


# Helpers that seed and make a run deterministic (often called only with a seed given).
SEED_FN_RE = re.compile(r"seed|determinis|reproduc", re.IGNORECASE)


def _determinism_fact(owner: FuncDef | None) -> str:
    """`cudnn.deterministic = True` asks for determinism -- inside a seeding helper only
    where the helper is called (`deterministic_fn:NAME`, matched with `calls:NAME`)."""
    if owner is not None and SEED_FN_RE.search(owner.name):
        return f"deterministic_fn:{owner.name}"
    return "deterministic"


_DEF_RE = re.compile(r"^([ \t]*)def[ \t]+(\w+)", re.MULTILINE)


def _determinism_fact_in_text(text: str, at: int) -> str:
    """:func:`_determinism_fact` for the light pass: the `def` the text at ``at`` is in
    (the nearest one above it, indented less)."""
    line_start = text.rfind("\n", 0, at) + 1
    indent = len(text[line_start:at]) - len(text[line_start:at].lstrip())
    name = None
    for m in _DEF_RE.finditer(text, 0, line_start):
        if len(m.group(1)) < indent:
            name = m.group(2)
        elif len(m.group(1)) == 0 and indent == 0:
            name = None
    if name is not None and SEED_FN_RE.search(name):
        return f"deterministic_fn:{name}"
    return "deterministic"


def _false_by_default(value: ast.expr, owner: FuncDef | None) -> bool:
    """``False``, or a parameter of the enclosing function that defaults to False
    (``torch.backends.cuda.matmul.allow_tf32 = allow_tf32`` in ``def
    training_loop(..., allow_tf32=False)``): a setting that stays off unless asked."""
    if isinstance(value, ast.Constant):
        return value.value is False
    return isinstance(value, ast.Name) and owner is not None \
        and param_default(owner, value.id) is False
