"""The program facts and accelerator evidence the index collects from a module: its
architecture (convolutions, matmuls, linear layers, embeddings, RNNs), its precision,
TF32 and cuDNN settings, determinism, DDP, and what can put its work on a GPU -- from
its calls, attributes, assignments and constants in the full pass, from its text in the
light pass.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    callee_tail,
    dotted,
    last_name,
    param_default,
    qualname,
    target_names,
)

if TYPE_CHECKING:
    from pitstop.lint.index import FuncDef

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
_CONV_GCN = frozenset({"GCNConv", "SAGEConv", "GATConv"})  # graph "convolutions" are matmuls
_HEAVY_CLASS_WORDS = ("Attention", "Transformer", "Attn")
# models built by name from a library the program does not show: transformer families
HEAVY_MODEL_RE = re.compile(r"GPT|Llama|LLaMA|Bert|BERT|Transformer|Mistral|Mixtral|Gemma|Qwen|"
                            r"Falcon|Bloom|ViT|ForCausalLM|ForMaskedLM|ForSeq2SeqLM|Attention")
ACCEL_STRINGS = ("cuda", "mps", "xpu", "hpu", "npu", "gpu")
_ACCEL_EXACT = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "gpu"})
# what follows "cuda:" in a template of a device string: `{}`, `{:d}`, `{0}`, `%d`
_DEVICE_INDEX_TEMPLATE = re.compile(r"\{[^{}]*\}|%[dis]")
_ACCEL_HEADS = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "gpu", "cuda:", "mps:", "xpu:"})


_MATMUL_CALLS = frozenset({"Linear", "LazyLinear", "matmul", "bmm", "baddbmm", "einsum",
                           "softmax", "scaled_dot_product_attention", "MultiheadAttention",
                           "linear", "mm"})


# `torch.float16: float,` -- a key of a table of dtypes, which looks a precision up
_DTYPE_KEY_RE = re.compile(r"\s*:(?!=)")


def _first_precision_setting(text: str, needles: tuple[str, ...]) -> int:
    """Where the text first names a lower precision other than as a key of a dtype table
    (`{torch.float16: float}`), or -1 (the light pass's form of the full pass's rule)."""
    best = -1
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            if not _DTYPE_KEY_RE.match(text, at + len(needle)):
                best = at if best < 0 else min(best, at)
                break
            at = text.find(needle, at + 1)
    return best


def _does_matmuls(cls: ast.ClassDef) -> bool:
    """Does an `*Attention*` class multiply matrices (Linear projections, matmul, softmax
    attention), or is it a convolutional gate (Attention U-Net's 1x1 convs)?"""
    for node in ast.walk(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and callee_tail(node) in _MATMUL_CALLS:
            return True
    return False


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


class IndexFacts:
    """The part of :class:`~pitstop.lint.index.ModuleIndex` that records facts and
    accelerator evidence as the pass meets the nodes that show them."""

    aliases: dict[str, str]
    owner: dict[ast.AST, FuncDef | None]
    facts: dict[str, int]
    arch_lines: dict[str, list[int]]
    gpu_origins: list[tuple[int, str]]
    cpu_device_lines: list[int]
    device_literals: dict[str, set[str]]
    model_names: set[str]
    loader_names: set[str]
    _heavy_calls: list[tuple[str, int]]
    _compared: set[int]
    _compared_setting: set[int]
    _seed_calls: list[ast.Call]

    def _text_facts(self, text: str) -> None:
        """The program facts and accelerator evidence of a module read in the light pass,
        found in its text."""
        for fact, needles in TEXT_FACTS.items():
            at = min((i for i in (text.find(n) for n in needles) if i >= 0), default=-1)
            if at >= 0 and fact == "reduced_precision":
                at = _first_precision_setting(text, needles)
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
        # `device="cuda"`, `set_default_device("cuda")`); also a template of one
        # (`"cuda:{}".format(i)`, `"cuda:%d" % i`, `f"cuda:{rank}"`)
        if v.__class__ is str and v[:4] in _ACCEL_HEADS:
            head, colon, index = v.partition(":")
            if v in _ACCEL_EXACT or (colon and head in {"cuda", "xpu", "mps"} and (
                    index.isdigit() or _DEVICE_INDEX_TEMPLATE.fullmatch(index) is not None)):
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
