"""Small helpers over the standard ``ast``: import aliases, dotted names, argument lookup."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

# Names that say "this object is a model" when nothing better is known.
MODEL_RE = re.compile(
    r"^_*(model|models|net|network|module|ddp_model|raw_model|encoder|decoder|generator|"
    r"discriminator|netg|netd|gen|disc|critic|backbone|classifier|teacher|student|policy|"
    r"actor|vae|unet|gpt|bert|transformer|resnet|cnn|mlp|lm|ema_model)(_\w+)?$|_model$|_net$"
)
MODEL_EXACT = frozenset({"G", "D", "netG", "netD"})
LOSS_RE = re.compile(r"loss|criterion|^crit", re.IGNORECASE)
OPTIM_RE = re.compile(r"optim|^opt($|_)|_opt$|^opt[A-Z]|scaler", re.IGNORECASE)
LOADERISH_RE = re.compile(r"loader|^dl$|^dl_|_dl$|batches|batch_iter|data_iter|train_iter|val_iter|"
                          r"^(dev|valid|test|eval)_iter(ator)?$", re.IGNORECASE)
# the loader methods of a Lightning DataModule: `data.train_dataloader()` is a DataLoader
DATAMODULE_LOADERS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader",
                                "predict_dataloader"})
LOADER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip", "islice", "trange", "track",
                             "progress", "cycle", "ProgressBar", "auto"})

TORCH_DTYPES = frozenset({
    "float", "float16", "float32", "float64", "half", "bfloat16", "double", "int", "int8",
    "int16", "int32", "int64", "long", "uint8", "bool", "complex64", "complex128", "short",
    "float8_e4m3fn", "float8_e5m2", "channels_last", "contiguous_format",
})


def collect_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully qualified name for every import in the module (any depth)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".", 1)[0]
                    aliases.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


_NAME, _ATTR = ast.Name, ast.Attribute


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (no alias resolution)."""
    t = node.__class__
    if t is _NAME:
        return node.id  # type: ignore[attr-defined]
    if t is not _ATTR:
        return None
    value = node.value  # type: ignore[attr-defined]
    if value.__class__ is _NAME:  # the common `self.model`, `torch.cuda`
        return f"{value.id}.{node.attr}"  # type: ignore[attr-defined]
    inner = dotted(value)
    return None if inner is None else f"{inner}.{node.attr}"  # type: ignore[attr-defined]


def qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The dotted name with its first part resolved through the module's imports."""
    name = dotted(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


def last_name(node: ast.AST) -> str | None:
    """The last component of a Name/Attribute (``self.model`` -> ``model``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def super_method(call: ast.Call) -> str | None:
    """The method a `super().m(...)` (or `super(Cls, self).m(...)`) call runs: ``m``."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
        return func.attr
    return None


def super_callees(cls: ast.ClassDef, method: str) -> list[str]:
    """`Base.m` for each base of ``cls`` as the module spells it: where `super().m()`
    in a method of ``cls`` may lead."""
    return [f"{b}.{method}" for b in (dotted(x) for x in cls.bases) if b]


def is_partial(call: ast.Call, aliases: dict[str, str]) -> bool:
    """`functools.partial(f, ...)` (also `partial` imported by name)."""
    return qualname(call.func, aliases) in {"functools.partial", "partial"}


def callee_tail(call: ast.Call) -> str:
    return last_name(call.func) or ""


def kwarg(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name or (name == "non_blocking" and kw.arg == "ASYNC"):
            return kw  # (`ASYNC`: pre-0.4 `async=True`, as the parser reads it)
    return None


def has_star_kwargs(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args)


def arg_or_kw(call: ast.Call, index: int, name: str) -> ast.expr | None:
    """The argument bound to parameter ``name`` (positional ``index`` or keyword)."""
    kw = kwarg(call, name)
    if kw is not None:
        return kw.value
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
        return call.args[index]
    return None


def is_const(node: ast.AST | None, value: object) -> bool:
    """Is ``node`` the literal ``value`` (``True`` is not ``1`` here)?"""
    if not isinstance(node, ast.Constant):
        return False
    if isinstance(value, bool) or value is None:
        return node.value is value
    return not isinstance(node.value, bool) and node.value == value


def target_names(target: ast.AST) -> Iterator[str]:
    """Dotted names bound by an assignment/for target (tuples unpacked)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from target_names(elt)
    elif isinstance(target, ast.Starred):
        yield from target_names(target.value)
    else:
        name = dotted(target)
        if name is not None:
            yield name


def root_name(node: ast.AST) -> str | None:
    """``batch`` for ``batch["x"][0].foo``: the name a subscript/attribute chain starts at."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# Tensor methods that keep the data where it is (a batch reshaped is still the batch).
_SAME_DATA = frozenset({"reshape", "view", "float", "half", "long", "int", "bool", "double",
                        "permute", "transpose", "contiguous", "squeeze", "unsqueeze", "flatten",
                        "type", "clone", "detach", "items", "values", "pin_memory", "expand",
                        "repeat", "narrow", "split", "chunk", "t", "numpy"})


def data_root(node: ast.AST) -> str | None:
    """Like :func:`root_name`, also through methods that keep the data in place:
    ``images`` for ``images.reshape(n, -1)``, ``batch`` for ``batch.items()``."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _SAME_DATA:
            node = node.func.value
        elif isinstance(node, ast.Call) and node.args and callee_tail(node) == "Variable":
            node = node.args[0]  # the pre-0.4 wrapper: the same tensor
        else:
            break
    return node.id if isinstance(node, ast.Name) else None


def unwrap_iterable(node: ast.expr) -> list[ast.expr]:
    """The loaders inside ``enumerate(tqdm(loader))`` / ``zip(a, b)``."""
    if isinstance(node, ast.Call):
        tail = callee_tail(node)
        if tail in LOADER_WRAPPERS:
            out: list[ast.expr] = []
            for a in node.args:
                out.extend(unwrap_iterable(a))
            return out
    return [node]


# Fields that never hold a child node worth visiting (operators, contexts, names).
_NO_CHILD = frozenset({"ctx", "op", "ops", "type_comment", "kind", "type_ignores", "id",
                       "attr", "name", "names", "arg", "asname", "module", "level",
                       "conversion", "is_async", "simple", "kwd_attrs", "tag", "rest"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: ast.AST) -> list[ast.AST]:
    """The child nodes of ``node`` (as ``ast.iter_child_nodes``, without operator and
    context nodes, and faster: the fields of each node type are looked up once)."""
    t = node.__class__
    fields = _FIELDS.get(t)
    if fields is None:
        fields = _FIELDS[t] = () if t is ast.Constant else tuple(
            f for f in t._fields if f not in _NO_CHILD)
    out: list[ast.AST] = []
    for f in fields:
        v = getattr(node, f, None)
        if v is None:
            continue
        if v.__class__ is list:
            out.extend(x for x in v if x is not None)
        elif isinstance(v, ast.AST):
            out.append(v)
    return out


def iter_shallow(stmts: list[ast.stmt], *, into_loops: bool) -> Iterator[ast.AST]:
    """Every node under ``stmts`` without entering nested function/class definitions
    (and, unless ``into_loops``, nested loops)."""
    skip: tuple[type, ...] = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    if not into_loops:
        skip += (ast.For, ast.AsyncFor, ast.While)
    stack: list[ast.AST] = [s for s in reversed(stmts) if not isinstance(s, skip)]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        yield node
        for child in children(node):
            if not isinstance(child, skip):
                push(child)


def param_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    """Every named parameter of ``fn`` (positional and keyword-only; not `*args`/`**kw`)."""
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]


def move_target(call: ast.Call) -> ast.expr | None:
    """Where `x.to(...)` moves ``x``: its `device=` or first argument (a device, a dtype or
    another tensor), or None."""
    dev = kwarg(call, "device")
    return dev.value if dev is not None else (call.args[0] if call.args else None)


def param_default(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> object:
    """The literal default of parameter ``name`` of ``fn`` (``"?"``: none, or not a literal)."""
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(positional, defaults, strict=True):
        if a.arg == name and isinstance(d, ast.Constant):
            return d.value
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if a.arg == name and isinstance(d, ast.Constant):
            return d.value
    return "?"


def is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    t = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) \
        and t.left.id == "__name__" and len(t.comparators) == 1 \
        and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__"


# A class with one of these iterates its own way (a prefetcher, a loader that keeps its
# workers, an infinite sampler).
ITERATION_METHODS = frozenset({"__iter__", "__next__"})
