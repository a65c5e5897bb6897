"""How one module describes its values to the others: a :class:`Describer` turns an
expression (in a function's scope) into a short string that the program resolves
across modules (:mod:`pitstop.lint.program`).

Values are described by short strings ("descriptors"), resolved across modules by
:mod:`pitstop.lint.program`:

``loader@L:C``  a DataLoader built at line L, column C of this module
``loader``      something loader-like of unknown origin
``batches``     an iterable of batches that is not a DataLoader (a generator over one)
``model``       an nn.Module
``device:gpu`` / ``device:cpu`` / ``device:any``  a device (``any``: chosen at run time)
``gpu`` / ``cpu``  a tensor known to be on an accelerator / on the host
``call:NAME``   what calling NAME returns (NAME as this module spells it)
``obj:NAME``    an instance of the class NAME
``attr:C.X``    attribute X of instances of class C of this module
``param:F.P``   parameter P of function F (what the callers pass)
``imp:NAME``    an imported module-level value
``global:NAME`` a module-level name of this module
``str:VALUE``   a string literal
``setting:NAME``  a command-line option or config field (`args.device`)
``tuple:D1<US>D2...``  a tuple of values (``return model, loader``); ``call:NAME#i`` is
                item i of what calling NAME returns
"""

from __future__ import annotations

import ast

from pitstop.lint.astutil import (
    DATAMODULE_LOADERS,
    LOADER_WRAPPERS,
    LOADERISH_RE,
    callee_tail,
    dotted,
    param_names,
    qualname,
)
from pitstop.lint.index import FuncDef, ModuleIndex
from pitstop.lint.index_facts import MODEL_FACTORY_RE
from pitstop.lint.loaders import dataloader_calls, loader_id
from pitstop.lint.settings import (
    options_owner,
)
from pitstop.lint.values_kinds import CREATORS

MAX_DEPTH = 5
TUPLE = "tuple:"  # a tuple display: its elements' descriptors, SEP-separated
SEP = "\x1f"
MODEL_WRAPPERS = frozenset({"DistributedDataParallel", "DDP", "DataParallel", "compile",
                            "FullyShardedDataParallel", "FSDP", "to", "cuda", "train", "eval",
                            "float", "half", "bfloat16", "requires_grad_", "to_empty"})
BATCH_WRAPPERS = LOADER_WRAPPERS | {"log_every", "iter", "chain", "repeat", "prefetch",
                                    "sample_data", "infinite_loader", "cycle", "tqdm_notebook",
                                    "maybe_tqdm", "Prefetcher", "DataPrefetcher"}


_CPU_DEVICES = frozenset({"str:cpu", "device:cpu"})


class Describer:
    """Describes expressions of one module without looking at any other module."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self._loader_ids = {id(c): loader_id(c) for c in dataloader_calls(index)}
        self._names: dict[tuple[str, FuncDef | None], str | None] = {}

    def params(self, fn: FuncDef) -> list[str]:
        return param_names(fn)

    def describe(self, expr: ast.AST | None, scope: FuncDef | None, depth: int = 0) -> str | None:
        if expr is None or depth > MAX_DEPTH:
            return None
        index = self.index
        if isinstance(expr, ast.Constant):
            return f"str:{expr.value}" if isinstance(expr.value, str) else None
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scope, depth)
        if isinstance(expr, ast.Attribute):
            name = dotted(expr)
            if name is None:
                return None
            head = name.split(".", 1)[0]
            if head == "self" and scope is not None and name.count(".") == 1:
                cls = index.class_of.get(scope)
                if cls is not None:
                    return f"attr:{cls.name}.{expr.attr}"
            if head in index.aliases or head in index.import_locals:
                return f"imp:{name}"
            if options_owner(expr.value):
                return f"setting:{expr.attr}"  # `args.device`: what the option defaults to
            if expr.attr == "device":
                return "device:any"
            return None
        if isinstance(expr, ast.Call):
            template = _formatted_head(expr)
            if template is not None:
                return template
            return self._call(expr, scope, depth)
        if isinstance(expr, (ast.JoinedStr, ast.BinOp)):
            return _formatted_head(expr)
        if isinstance(expr, ast.Subscript) and dotted(expr.value) == "sys.modules" and \
                isinstance(expr.slice, ast.Name) and expr.slice.id == "__name__":
            return "mod:self"  # `d2l = sys.modules[__name__]`: the module itself
        if isinstance(expr, ast.IfExp):
            a = self.describe(expr.body, scope, depth + 1)
            b = self.describe(expr.orelse, scope, depth + 1)
            if a == b:
                return a
            for d in (a, b):
                if d and d.startswith(("device:gpu", "str:cuda", "str:mps", "str:xpu")):
                    return "device:gpu" if d.startswith("device") else d
            return a or b
        if isinstance(expr, (ast.Tuple, ast.List)) and 1 < len(expr.elts) <= 16:
            parts = [self.describe(e, scope, depth + 1) or "" for e in expr.elts]
            return TUPLE + SEP.join(parts) if any(parts) else None
        if isinstance(expr, ast.Subscript):  # `dataloaders["train"]`
            inner = self.describe(expr.value, scope, depth + 1)
            return inner if inner and inner.startswith(("loader", "model")) else None
        return None

    def _name(self, name: str, scope: FuncDef | None, depth: int) -> str | None:
        if depth > MAX_DEPTH:
            return None
        key = (name, scope)
        memo = self._names
        if key in memo:
            return memo[key]
        memo[key] = None  # a name assigned from itself (`x = x.to(d)`) ends here
        result = self._name_uncached(name, scope, depth)
        memo[key] = result
        return result

    def _name_uncached(self, name: str, scope: FuncDef | None, depth: int) -> str | None:
        index = self.index
        if scope is not None:
            values = index.scoped_assigns.get((scope, name))
            if values:
                return self._first(values, name, scope, depth)
            if name in self.params(scope):
                return f"param:{index.qualname_of(scope)}.{name}"
            outer = index.owner.get(scope)
            if outer is not None:  # a closure reads its enclosing function's names
                return self._name(name, outer, depth + 1)
        values = index.scoped_assigns.get((None, name))
        if values:
            if scope is not None:
                return f"global:{name}"
            return self._first(values, name, None, depth)
        if any(fn not in index.class_of and (index.owner.get(fn) is None or (
                scope is not None and index.owner.get(fn) is scope))
               for fn in index.functions.get(name, ())):
            # a function handed on as a value (`trainer.eval(evaluate, ...)`): a callback
            # (a top-level def, or one nested in this very function; not a method)
            return f"fn:{name}"
        if name in index.classes:
            return None
        if name in index.import_locals:
            return f"imp:{name}"
        return None

    def _first(self, assigns: list[ast.Assign | ast.AnnAssign], name: str, scope: FuncDef | None,
               depth: int) -> str | None:
        d = self._first_uncached(assigns, name, scope, depth)
        if d is not None and _loaderish(d) and not d.endswith("!gpu") and any(
                _places(a.value, name) for a in assigns[1:]):
            return d + "!gpu"  # `loader = DataLoader(...)`; later `loader = fabric.setup...(loader)`
        return d

    def _first_uncached(self, assigns: list[ast.Assign | ast.AnnAssign], name: str,
                        scope: FuncDef | None, depth: int) -> str | None:
        found: list[str | None] = []
        for a in assigns[:8]:
            if a.value is None:
                continue
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            for t in targets:
                if isinstance(t, (ast.Tuple, ast.List)) and dotted(t) is None:
                    if any(dotted(e) == name for e in t.elts):
                        found.append(self._unpacked(t, a.value, name, scope, depth))
                elif dotted(t) == name:
                    found.append(self.describe(a.value, scope, depth + 1))
            if found and found[0] is not None and found[0] not in _CPU_DEVICES:
                return found[0]
        known = [d for d in found if d is not None]
        if not known:
            return None
        if known[0] in _CPU_DEVICES and len(known) < len(found):
            # `if distributed: device = local_rank` / `else: device = "cpu"`: the CPU is
            # one path of several, not the device
            return "device:any"
        return next((d for d in known if d not in _CPU_DEVICES), known[0])

    def _unpacked(self, target: ast.Tuple | ast.List, value: ast.expr, name: str,
                  scope: FuncDef | None, depth: int) -> str | None:
        """`model, opt, loader = accelerator.prepare(model, opt, loader)`, `a, b = x, y`."""
        pos = next((i for i, e in enumerate(target.elts) if dotted(e) == name), None)
        if pos is None:
            return None
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            return self.describe(value.elts[pos], scope, depth + 1)
        if isinstance(value, ast.Call) and callee_tail(value) in {"prepare", "setup_dataloaders"} \
                and len(value.args) == len(target.elts):
            d = self.describe(value.args[pos], scope, depth + 1)
            return f"{d}!gpu" if _loaderish(d) else d
        if isinstance(value, ast.Call):
            d = self._call(value, scope, depth)
            if d and d.startswith("call:"):
                return f"{d}#{pos}"
        return None

    def _call(self, call: ast.Call, scope: FuncDef | None, depth: int) -> str | None:
        index = self.index
        func = call.func
        tail = callee_tail(call)
        lid = self._loader_ids.get(id(call))
        if lid is not None:
            return f"loader@{lid}"
        qn = qualname(func, index.aliases) or ""
        if tail == "device" and qn in {"torch.device", "device"}:
            arg = call.args[0] if call.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                return "device:cpu" if arg.value in {"cpu", "meta"} else "device:gpu"
            d = self.describe(arg, scope, depth + 1) if arg is not None else None
            if d in {"device:cpu", "str:cpu"}:
                return "device:cpu"
            return "device:any" if d is None or not d.startswith(("device:gpu", "str:cuda")) \
                else "device:gpu"
        if qn.startswith("torch.accelerator.") or qn in {"torch.cuda.current_device"}:
            return "device:gpu"
        if isinstance(func, ast.Attribute):
            inner = func.value
            if tail in MODEL_WRAPPERS and tail not in {"DDP", "compile"}:
                d = self.describe(inner, scope, depth + 1)
                if d and (d == "model" or d.startswith(("obj:", "call:", "attr:", "param:",
                                                         "global:", "imp:"))):
                    return d if tail not in {"to", "cuda"} or d != "model" else "model"
                if d is None and tail == "cuda" and _torch_tensor_chain(inner, index.aliases):
                    return "gpu"  # `std = torch.tensor(STD).view(3, 1, 1).cuda()`
                return d if d in {"gpu", "cpu"} else None
            if tail in {"prepare", "setup_dataloaders"} and len(call.args) == 1:
                d = self.describe(call.args[0], scope, depth + 1)
                placer = (dotted(func.value) or "").rsplit(".", 1)[-1].lower()
                if _loaderish(d) and ("accelerator" in placer or "fabric" in placer):
                    return f"{d}!gpu"
                return d
        if tail in {"DistributedDataParallel", "DDP", "DataParallel", "FullyShardedDataParallel",
                    "FSDP"} or (tail == "compile" and "torch" in qn):
            return "model"
        if MODEL_FACTORY_RE.search(qn):
            return "model"
        if tail in BATCH_WRAPPERS and call.args:
            d = self.describe(call.args[0], scope, depth + 1)
            if d and d.startswith(("loader", "batches", "param:", "attr:", "call:", "global:",
                                   "imp:")):
                return "batches" if d.startswith(("loader", "batches")) else f"wrap:{d}"
            first = dotted(call.args[0])
            if first and LOADERISH_RE.search(first.rsplit(".", 1)[-1]):
                return "loader"
            return None
        name = dotted(func)
        if name is None:
            return None
        return f"call:{self._callee(name, scope, depth + 1)}"

    def _callee(self, name: str, scope: FuncDef | None, depth: int = 0) -> str:
        """The callee's name with a local object's class substituted
        (`trainer.train` -> `Trainer.train` when `trainer = Trainer(...)`)."""
        head, _, rest = name.partition(".")
        if depth > MAX_DEPTH:
            return name
        if not rest:  # a bare name: a parameter or a local object called (`loss_scaler(...)`)
            d = self._name(name, scope, depth + 1) if name not in self.index.functions else None
            if d and d.startswith(("param:", "call:", "global:", "imp:", "attr:")):
                return f"val:{d}"
            return name
        if head == "self" and scope is not None and rest:
            cls = self.index.class_of.get(scope)
            if cls is not None:
                attr, _, more = rest.partition(".")
                if not more and self.index.method(cls, attr) is not None:
                    return f"{cls.name}.{attr}"
                return f"attr:{cls.name}.{attr}" + (f".{more}" if more else "")
        if rest:
            d = self._name(head, scope, depth + 1) if head != "self" else None
            if d and d.startswith("call:"):
                cls_name = d[5:]
                if cls_name.startswith("val:imp:") and len(
                        self.index.scoped_assigns.get((scope, head), ())) == 1:
                    # `trainer = Trainer(...)` with Trainer imported (one class: not
                    # `model = A(d) if x else B(d)` on branches)
                    cls_name = cls_name[8:]
                if "#" not in cls_name and cls_name.split(".")[-1][:1].isupper():
                    return f"{cls_name}.{rest}"
            if d and d.startswith(("param:", "attr:", "global:")):
                return f"{d}.{rest}"
        return name


def _loaderish(d: str | None) -> bool:
    """A descriptor of a loader: a DataLoader of the program, or a DataModule's
    `train_dataloader()` (`call:param:main.data.train_dataloader`)."""
    if not d:
        return False
    if d.startswith("loader"):
        return True
    return d.startswith("call:") and d.partition("#")[0].rsplit(".", 1)[-1] in DATAMODULE_LOADERS


def _places(value: ast.expr | None, name: str) -> bool:
    """Is ``value`` an accelerate/Fabric call that places the loader ``name`` on the
    device (`fabric.setup_dataloaders(train_loader, val_loader)`)?"""
    if not isinstance(value, ast.Call) or callee_tail(value) not in {"prepare",
                                                                     "setup_dataloaders"}:
        return False
    if not isinstance(value.func, ast.Attribute):
        return False
    placer = (dotted(value.func.value) or "").rsplit(".", 1)[-1].lower()
    return ("accelerator" in placer or "fabric" in placer) and any(
        dotted(a) == name for a in value.args)


def _torch_tensor_chain(node: ast.expr, aliases: dict[str, str]) -> bool:
    """Is ``node`` a tensor made by a torch creator, reshaped or sliced
    (`torch.tensor(std).view(3, 1, 1)`, `torch.zeros(n)[None]`)?"""
    for _ in range(8):
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                (qualname(node.func, aliases) or "").startswith("torch."):
            return node.func.attr in CREATORS
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value  # `.view(3, 1, 1)`, `.float()`, `.unsqueeze(0)`
        else:
            return False
    return False


def _formatted_head(expr: ast.expr) -> str | None:
    """`"cuda:{}".format(i)`, `"cuda:%d" % i`, `f"cuda:{i}"`: a string made from a
    template, described by the text before its first placeholder (`str:cuda:`), so that
    a device chosen this way is known to be an accelerator."""
    text = None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr == "format" and isinstance(expr.func.value, ast.Constant):
        text = expr.func.value.value
        cut = "{"
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) \
            and isinstance(expr.left, ast.Constant):
        text = expr.left.value
        cut = "%"
    elif isinstance(expr, ast.JoinedStr) and expr.values \
            and isinstance(expr.values[0], ast.Constant):
        text = expr.values[0].value
        cut = "{"
    if not isinstance(text, str):
        return None
    head = text.split(cut, 1)[0]
    return f"str:{head}" if head else None
