"""The kinds the value model gives expressions, and the names that decide them.

Kinds are short strings so that environments stay cheap to copy: ``gpu``, ``mask``,
``cpu``, ``model``, ``loader`` / ``loader@MODULE|ID`` (a DataLoader built at a known
place), ``obj@MODULE|Class``.
"""

from __future__ import annotations

import ast

from pitstop.lint.astutil import dotted

GPU = "gpu"  # a tensor on an accelerator
MASK = "mask"  # a boolean tensor on an accelerator
CPU = "cpu"  # certainly a host value (Python number, CPU tensor, numpy array)
MODEL = "model"  # a module (callable; its outputs are GPU tensors in a GPU program)
LOADER = "loader"  # a DataLoader or another iterable of batches

HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "size", "dim", "numel",
                          "ndimension", "element_size", "nelement", "get_device",
                          "data_ptr", "is_contiguous", "stride", "storage_offset", "__len__"})
# a tensor's storage and its byte counts: host objects and ints (not tensor uses of a
# parameter: a NumPy array has `nbytes` too)
STORAGE_METHODS = frozenset({"storage", "untyped_storage", "_typed_storage", "_size", "nbytes",
                             "itemsize"})
META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad",
                        "layout", "names", "is_leaf"})
MASK_METHODS = frozenset({"bool", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge",
                          "le", "logical_and", "logical_or", "logical_not", "isclose", "any",
                          "all", "isneginf", "isposinf", "signbit"})
# Methods that keep a boolean mask a mask (its shape or place changes, not its values).
MASK_KEEPING = frozenset({"unsqueeze", "expand", "expand_as", "view", "view_as", "reshape",
                          "squeeze", "permute", "transpose", "flatten", "repeat", "contiguous",
                          "t", "clone", "detach", "logical_not", "__invert__", "flip"})
MODEL_METHODS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers",
                           "modules", "children", "state_dict", "named_modules", "train",
                           "eval", "zero_grad", "apply", "register_forward_hook",
                           "load_state_dict", "requires_grad_"})
CREATORS = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                      "randint", "arange", "linspace", "eye", "zeros_like", "ones_like",
                      "empty_like", "full_like", "rand_like", "randn_like", "from_numpy",
                      "logspace", "randperm", "scalar_tensor"})
# Calls on tensors whose result is no tensor.
NOT_DERIVED = frozenset({"isinstance", "len", "print", "str", "repr", "format", "append", "extend",
                         "update", "add_scalar", "log", "info", "debug", "warning", "set_postfix",
                         "save", "dump", "id", "type", "hasattr", "getattr", "setattr",
                         "backward", "step", "zero_grad", "clip_grad_norm_", "clip_grad_value_",
                         "set_description", "write", "add_batch", "copy_", "record"})
TORCH_MASKS = frozenset({"isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
                         "logical_and", "logical_or", "logical_not", "isclose", "any", "all"})


# a dict whose values are loaders (`{"train": train_dl, "val": val_dl}`): an item is one
# of them (`dataloaders[phase]`), iterating it yields its keys; the loader's kind follows
DICT_OF_LOADERS = "dict-of:"
PLACED = "!gpu"  # a loader whose batches arrive on the accelerator (accelerate, Fabric)
# A value computed from GPU tensors by a function the analysis cannot see: probably a GPU
# tensor. Reading it on the host (`.item()`, `.cpu()`) syncs; formatting it may not.
DERIVED = "derived"
# a Python list that GPU tensors were appended to (`all_b.append(b[idx])`): not a tensor
# itself (`if all_b:` reads its length), but `torch.cat(all_b)` is a GPU tensor
GPU_LIST = "gpu-list"
# An optimizer's `self.param_groups`, and one group of it: `group["params"]` holds the
# model's parameters (on the GPU in a GPU program); its other entries are settings
PARAM_GROUPS = "param-groups"
PARAM_GROUP = "param-group"
# ... and its `self.state` (a dict keyed by parameter), one parameter's entry of it: its
# buffers (`exp_avg`) live with the parameter, its `step` count is a host number
PARAM_STATE = "param-state"
PARAM_STATE_ENTRY = "param-state-entry"
# An average meter (`AverageMeter().update(val, n)`) fed GPU tensors keeps its sums on the GPU:
# the walk notes it under the meter's name plus this suffix; these are its GPU reads
METER = "#meter"
METER_READS = frozenset({"avg", "val", "sum", "average", "mean", "global_avg", "median",
                         "value", "total"})
# Methods of an accelerator object that hand back what they are given (placed).
PLACERS = frozenset({"prepare", "setup_dataloaders", "prepare_data_loader"})
COLLECTIVES = frozenset({"gather", "all_gather", "gather_for_metrics", "reduce", "all_reduce",
                         "reduce_mean", "reduce_tensor", "pad_across_processes",
                         "all_reduce_mean", "sync_tensor", "reduce_value", "concat_all_gather",
                         "gather_tensor", "mean", "sum", "detach", "float"})


def meter_key(node: ast.AST) -> str | None:
    """The name a meter is noted under: `top1`, `self.meters.loss`, or a meter kept in a
    dict by a literal key (`train_meters["top1"]`)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        owner = dotted(node.value)
        return f"{owner}[{node.slice.value!r}]" if owner else None
    return dotted(node)


def is_loader_kind(k: str | None) -> bool:
    return k is not None and k.startswith(LOADER)


def loader_key(k: str | None) -> str | None:
    """``MODULE|ID`` of a known loader's kind (``loader@MODULE|ID``, placed or not), or
    ``ID`` alone for a loader of the module at hand (``loader@L:C``); None otherwise."""
    if k is None or not k.startswith(f"{LOADER}@"):
        return None
    return k[len(LOADER) + 1:].removesuffix(PLACED)


def loader_ref(k: str | None) -> tuple[str, str] | None:
    """(module, loader id) of a loader kind that names its module (``loader@MODULE|ID``)."""
    key = loader_key(k)
    if key is None or "|" not in key:
        return None
    module, _, lid = key.partition("|")
    return module, lid


def object_ref(k: str | None) -> tuple[str, str] | None:
    """(module, class) of an object or model kind whose class is known
    (``obj@MODULE|Class``, ``model@MODULE|Class``)."""
    if k is None or not k.startswith(("obj@", "model@")):
        return None
    module, _, cls = k.partition("@")[2].partition("|")
    return module, cls


def is_model(k: str | None) -> bool:
    """A module: ``model``, or ``model@MODULE|Class`` when its class is known."""
    return k is not None and k.startswith(MODEL)


def placed(k: str | None) -> bool:
    return k is not None and k.endswith(PLACED)
