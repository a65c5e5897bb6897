"""The device model: can this program run on an accelerator, and where does its device
come from?

A program is linted as GPU code when some path can put its work on an accelerator:
``torch.accelerator.*``, ``torch.device(x)`` with a non-literal ``x``, a ``cuda`` /
``mps`` / ``xpu`` device string, an argparse option whose default or choices name one,
``.cuda()``, Accelerate's ``Accelerator()``, an NCCL process group, or a helper (in any
module of the program) that returns such a device. ``device = "cpu"`` alone is not. The
answer carries its origin (``train.py:12 (torch.accelerator)``), which every GPU-only
finding quotes as evidence. ``--device gpu|cpu`` (or ``device = ...`` in
``[tool.pitstop.lint]``) overrides it.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import TORCH_DTYPES, callee_tail, dotted, kwarg, qualname
from pitstop.lint.index import FuncDef
from pitstop.lint.program import Origin
from pitstop.lint.settings import options_owner

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext

GPU = "gpu"
CPU = "cpu"
DTYPE = "dtype"
MAYBE = "maybe"  # a device whose value the code does not show (a parameter named device)
ACCEL_PREFIXES = ("cuda", "mps", "xpu", "hpu", "npu")
# The legacy typed tensors of the CUDA backend: `torch.cuda.FloatTensor(np_array)` copies
# host data to the GPU, `x.type(torch.cuda.FloatTensor)` moves `x` there.
GPU_TENSOR_TYPE_RE = re.compile(r"^torch\.cuda\.[A-Z][a-z]*Tensor$")
DEVICEISH = frozenset({"dev", "rank", "local_rank", "gpu", "gpu_id", "cuda", "accelerator",
                       "device_id", "ddp_local_rank", "gpu_ids", "device_ids", "target_device"})


class DeviceModel:
    """Devices of one module, with the program's answer when the module has none."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self._origin: Origin | bool | None = False  # False: not computed yet

    # ------------------------------------------------------------------ the program
    @property
    def origin(self) -> Origin | None:
        """Where the program gets an accelerator from; None: CPUs only."""
        if self._origin is False:
            self._origin = self._find_origin()
        return self._origin  # type: ignore[return-value]

    def _find_origin(self) -> Origin | None:
        ctx = self.ctx
        found = ctx.program.device_origin(ctx.key)
        if found is not None or ctx.program.device != "auto":
            return found
        # No spelled-out accelerator anywhere: a `.to(device)` / `device=` whose device
        # the code does not show still may be one (a library function's parameter).
        index = ctx.index
        for call in index.calls_by_tail.get("to", ()):
            k = self.kind(call.args[0], index.owner.get(call)) if call.args else None
            if k in (MAYBE, GPU):
                verb = "may be" if k == MAYBE else "is"
                return Origin(ctx.path, call.lineno, f"`{ast.unparse(call.args[0])}` in "
                              f"`.to({ast.unparse(call.args[0])})` {verb} an accelerator")
        for call in index.calls:
            dev = kwarg(call, "device")
            k = self.kind(dev.value, index.owner.get(call)) if dev is not None else None
            if dev is not None and k in (MAYBE, GPU):
                verb = "may be" if k == MAYBE else "is"
                return Origin(ctx.path, call.lineno, f"`device={ast.unparse(dev.value)}` {verb} "
                              "an accelerator")
        return None

    # ------------------------------------------------------------------ expressions
    def kind(self, node: ast.AST | None, scope: FuncDef | bool | None = False) -> str | None:
        """GPU / CPU / MAYBE for an expression used as a device, DTYPE for a dtype.
        ``scope``: the function the expression is in (found from the node if not given)."""
        if node is None:
            return None
        ctx = self.ctx
        if scope is False or scope is True:
            scope = ctx.scope_of(node)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                if v in {"cpu", "meta"}:
                    return CPU
                if v.startswith(ACCEL_PREFIXES) or v == "gpu":
                    return GPU
                return None
            if isinstance(v, int) and not isinstance(v, bool):
                return GPU  # a CUDA device index
            return None
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            if isinstance(first, ast.Constant) and str(first.value).startswith(ACCEL_PREFIXES):
                return GPU
            return None
        if isinstance(node, ast.Call):
            tail = callee_tail(node)
            qn = qualname(node.func, ctx.aliases) or ""
            if tail == "device" and (qn.startswith("torch.") or qn == "device"):
                type_kw = kwarg(node, "type")
                arg = node.args[0] if node.args else (type_kw.value if type_kw else None)
                k = self.kind(arg, scope) if arg is not None else None
                if k == CPU:
                    return CPU
                return GPU if k == GPU else MAYBE
            if qn.startswith("torch.accelerator.") or tail in {"current_device", "get_device"}:
                return GPU
            if tail == "device_count":
                return None
            return self._resolved(ctx.describer.describe(node, scope))
        if isinstance(node, ast.IfExp):
            a, b = self.kind(node.body, scope), self.kind(node.orelse, scope)
            if GPU in (a, b):
                return GPU
            if MAYBE in (a, b):
                return MAYBE
            return a or b
        if isinstance(node, (ast.Name, ast.Attribute)):
            return self._named(node, scope)
        return None

    def _named(self, node: ast.Name | ast.Attribute, scope: FuncDef | None) -> str | None:
        ctx = self.ctx
        name = dotted(node) or ""
        tail = name.rsplit(".", 1)[-1]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and ctx.aliases.get(node.value.id) == "torch" and tail in TORCH_DTYPES:
            return DTYPE
        low = tail.lower()
        if "dtype" in low or low in {"ptdtype", "precision"}:
            return DTYPE
        if isinstance(node, ast.Attribute) and options_owner(node.value):
            st = ctx.program.setting(node.attr)
            if st is not None:
                vals = [v for v in st.values() if isinstance(v, str)]
                if any(v.lower().startswith(ACCEL_PREFIXES) or v.lower() in {"gpu", "auto"}
                       for v in vals):
                    return GPU
                if vals and all(v.lower() in {"cpu", "meta"} for v in vals):
                    return CPU
        literals = ctx.index.device_literals.get(name)
        if literals == {CPU}:
            return CPU
        if literals and GPU in literals:
            return GPU
        deviceish = "device" in low or low in DEVICEISH
        d = ctx.describer.describe(node, scope)
        k = self._resolved(d)
        if k is not None:
            return k
        if isinstance(node, ast.Attribute) and node.attr == "device":
            return MAYBE  # `x.device`, `model.device`, `accelerator.device`
        return MAYBE if deviceish else None

    def _resolved(self, d: str | None) -> str | None:
        if d is None:
            return None
        if d == "device:gpu" or d.startswith(("str:cuda", "str:mps", "str:xpu")):
            return GPU
        if d in {"device:cpu", "str:cpu", "str:meta"}:
            return CPU
        if d == "device:any":
            return MAYBE
        r = self.ctx.program.resolve(self.ctx.key, d)
        if r is None:
            return None
        if r.kind == "device":
            return {"gpu": GPU, "cpu": CPU}.get(r.name, MAYBE)
        if r.kind == "str":
            if r.name.startswith(ACCEL_PREFIXES):
                return GPU
            if r.name in {"cpu", "meta"}:
                return CPU
        return None

    def gpu_tensor_type(self, node: ast.AST | None, depth: int = 0) -> bool:
        """Is ``node`` a CUDA tensor type: ``torch.cuda.FloatTensor``, or a name assigned
        one on some path (``Tensor = torch.cuda.FloatTensor if cuda else
        torch.FloatTensor``, the idiom of many GAN scripts)?"""
        if node is None or depth > 3:
            return False
        ctx = self.ctx
        if isinstance(node, ast.Attribute):
            return bool(GPU_TENSOR_TYPE_RE.match(qualname(node, ctx.aliases) or ""))
        if isinstance(node, ast.IfExp):
            return self.gpu_tensor_type(node.body, depth + 1) or \
                self.gpu_tensor_type(node.orelse, depth + 1)
        if isinstance(node, ast.Name):
            return any(self.gpu_tensor_type(a.value, depth + 1)
                       for a in ctx.index.visible_assigns(ctx.scope_of(node), node.id)
                       if a.value is not None)
        return False

    def is_gpu(self, node: ast.AST | None, scope: FuncDef | bool | None = False) -> bool:
        """Does a device expression name an accelerator (a MAYBE counts in a GPU program)?"""
        k = self.kind(node, scope)
        return k == GPU or (k == MAYBE and self.origin is not None)
