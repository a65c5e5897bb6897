"""What loading one item of a Dataset class costs: whether its ``__getitem__`` (and the
methods of the class it calls) reads, decodes or transforms data, or only indexes tensors
already in memory. Read by the module summary (``ClassSummary.trivial_items``)."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import dotted, qualname
from pitstop.lint.index import FuncDef, ModuleIndex

# tensor methods that cost nothing next to loading an item (`self.features[idx].float()`)
CHEAP_ITEM_METHODS = frozenset({"float", "long", "int", "half", "double", "bool", "byte",
                                "clone", "view", "reshape", "unsqueeze", "squeeze", "permute",
                                "contiguous", "flatten", "t"})


# What loading an item costs: reading or decoding a file, running transforms, tokenising,
# Python loops over its parts. Anything else __getitem__ calls (torch.tensor, np.array, a
# slice of a tensor in memory) is cheap next to the process hops workers would add.
LOOP_NODES = (ast.For, ast.While, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)
LOADING_RE = re.compile(r"open|read|load|decode|imread|transform|augment|jitter|resize|"
                        r"token|encode|mask|pad|"
                        r"crop|wav|audio|image|img|frame|video|fetch|download|get_item|"
                        r"__getitem__|parse|process|sample_from|collate", re.IGNORECASE)
LOADING_LIBS = ("PIL.", "cv2.", "librosa.", "torchaudio.", "soundfile.", "imageio.", "h5py.",
                "json.", "pickle.", "numpy.load", "numpy.fromfile", "lmdb.", "skimage.",
                "torchvision.io.", "decord.", "av.", "scipy.io.", "pandas.read")


CHEAP_BUILTINS = frozenset({"len", "int", "float", "str", "bool", "list", "tuple", "dict", "set",
                            "range", "min", "max", "abs", "round", "zip", "enumerate", "sorted",
                            "isinstance", "getattr", "hasattr", "slice", "sum", "any", "all",
                            "reversed", "map", "iter", "next", "super", "type"})
CHEAP_LIBS = ("torch.", "numpy.", "math.", "random.", "builtins.")


# Storage an index reads from disk (`self.data = h5py.File(p)["data"]`, a memory map): a
# Dataset holding one loads each item when it is indexed.
LAZY_STORES = ("h5py.", "lmdb.", "zarr.", "numpy.memmap", "tables.open_file")


def _opens_lazily(index: ModuleIndex, cls: ast.ClassDef) -> bool:
    init = index.method(cls, "__init__")
    if init is None:
        return False
    for n in ast.walk(init):
        if isinstance(n, ast.Call):
            qn = qualname(n.func, index.aliases) or ""
            if qn.startswith(LAZY_STORES) or (qn == "numpy.load" and any(
                    k.arg == "mmap_mode" for k in n.keywords)):
                return True
    return False


def _item_nodes(index: ModuleIndex, cls: ast.ClassDef, getitem: FuncDef | None) -> list[ast.AST]:
    """The nodes of __getitem__ and of the methods of the class it calls (`self._load(i)`)."""
    if getitem is None:
        return []
    out: list[ast.AST] = []
    todo, seen = [getitem], {getitem}
    while todo and len(seen) < 8:
        fn = todo.pop()
        stack: list[ast.AST] = list(fn.body)
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Raise):
                continue  # (`raise ValueError(f"bad split {name}")`: no item is built)
            stack.extend(ast.iter_child_nodes(n))
            out.append(n)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                m = index.method(cls, n.func.attr)
                if m is not None and m not in seen:
                    seen.add(m)
                    todo.append(m)
    return out


def _loads(call: ast.Call, index: ModuleIndex, cls: ast.ClassDef) -> bool:
    """Does this call read, decode or transform data (not a method of the class: its body
    is looked at instead)?"""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "self" and index.method(cls, func.attr) is not None:
        return False  # a method of its own, walked by _item_nodes
    name = dotted(func) or ""
    if LOADING_RE.search(name.rsplit(".", 1)[-1]) or (
            isinstance(func, ast.Attribute) and LOADING_RE.search(dotted(func.value) or "")):
        return True
    qn = qualname(func, index.aliases) or ""
    if qn.startswith(LOADING_LIBS) or name == "open":
        return True
    if isinstance(func, ast.Name):
        # a helper of the program or of a package (`compute_fbank(path)`): costly unless
        # a builtin or a torch / NumPy constructor
        return func.id not in CHEAP_BUILTINS and not qn.startswith(CHEAP_LIBS)
    # `self.aug(image=x)`: a callable object the dataset holds (a transform)
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id == "self"


def _cheap_method(call: ast.Call) -> bool:
    """A dtype/shape method of an attribute's item (`self.x[i].float()`): no loading."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in CHEAP_ITEM_METHODS:
        return False
    inner = func.value
    while isinstance(inner, (ast.Subscript, ast.Attribute)):
        inner = inner.value
    return isinstance(inner, ast.Name) and inner.id == "self" and not any(
        isinstance(a, ast.Call) for a in call.args)


def item_costs(index: ModuleIndex, cls: ast.ClassDef) -> tuple[bool, bool]:
    """(trivial, plain) of a Dataset class: its items cost nothing to load (no call that
    reads or transforms, no loop, no lazily opened store); and, ``plain``, they are not
    even slices of held data (no call, no indexing: prompt strings, indices)."""
    getitem = index.method(cls, "__getitem__")
    nodes = _item_nodes(index, cls, getitem)
    trivial = getitem is not None and not any(
        (isinstance(n, ast.Call) and _loads(n, index, cls)) or isinstance(n, LOOP_NODES)
        for n in nodes) and not _opens_lazily(index, cls)
    plain = trivial and not any(isinstance(n, ast.Call) and not _cheap_method(n)
                                for n in nodes) and not any(
        isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) for n in nodes)
    return trivial, plain
