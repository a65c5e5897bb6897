"""Models and losses among expressions: whether a callee is a model (`model(x)`,
`self.net.forward(x)`), whether a value is a module rather than a tensor, which of a
model's methods compute on their inputs, and which callees apply a loss."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from pitstop.lint.astutil import (
    LOSS_RE,
    MODEL_EXACT,
    MODEL_RE,
    callee_tail,
    dotted,
    last_name,
    qualname,
)
from pitstop.lint.index_facts import MODEL_FACTORY_RE
from pitstop.lint.values_kinds import CPU, GPU, LOADER, MASK, MODEL, MODEL_METHODS, is_model

if TYPE_CHECKING:
    from pitstop.lint.context import ModuleContext
    from pitstop.lint.walk import State

# `build_model(cfg)`, `create_network()`, `get_backbone(...)`: functions that make a model
BUILDER_RE = re.compile(r"^(build|create|get|make|load|init|setup|construct|instantiate|unwrap|"
                        r"wrap|prepare)_?"
                        r"(model|net|network|backbone|generator|discriminator|classifier|"
                        r"encoder|decoder|unet|transformer|policy)s?$", re.IGNORECASE)


# Model methods that compute on their inputs: what they return is the model's output
COMPUTING_METHOD_RE = re.compile(r"loss|forward|predict|infer|decode|encode|logit|score|"
                                 r"compute|calc|embed|sample|generate|output", re.IGNORECASE)


class ModelRecognition:
    """The part of :class:`~pitstop.lint.values.ValueModel` that recognises models."""

    ctx: ModuleContext

    if TYPE_CHECKING:  # the rest of the value model, which this part asks
        def kind(self, node: ast.AST, st: State) -> str | None: ...
        def _program_kind(self, node: ast.Call, st: State) -> str | None: ...

    # ------------------------------------------------------------------ models
    def is_model_callee(self, func: ast.AST, st: State) -> bool:
        ctx = self.ctx
        if isinstance(func, ast.Attribute) and (func.attr == "forward"
                                                or func.attr.startswith("forward_")):
            func = func.value  # `model.forward(x)`, `model.forward_emb(...)`: the model called
        if isinstance(func, ast.Subscript) and isinstance(func.slice, ast.Constant) \
                and isinstance(func.slice.value, str):
            func = func.value  # `self.model["generator"](x)`: one of a dict of models
            if dotted(func) == "self":
                return False
        name = dotted(func)
        if name is None:
            return False
        if is_model(st.env.get(name)) or name in ctx.index.model_names:
            return True
        k = st.env.get(name)
        if k is not None and (k in (GPU, MASK, CPU) or k.startswith(("obj@", LOADER))):
            return False  # a known value that is not a model
        if name == "self" and st.func is not None:
            cls = ctx.index.class_of.get(st.func)
            return cls is not None and (cls.name in ctx.index.module_classes or
                                        ctx.program.class_is(ctx.key, cls.name, "module"))
        tail = name.rsplit(".", 1)[-1]
        return bool(MODEL_RE.search(tail.lower())) or tail in MODEL_EXACT

    def looks_like_module(self, node: ast.AST, st: State) -> bool:
        """``Net()``, ``resnet50()``, ``model``: something that is a module, not a tensor."""
        if isinstance(node, ast.Call):
            tail = callee_tail(node)
            if class_name(tail) and tail not in {"Tensor", "DataLoader"}:
                return True
            if tail in {"to", "cuda", "half", "float", "bfloat16"} and isinstance(
                    node.func, ast.Attribute):
                return self.looks_like_module(node.func.value, st)
            if MODEL_FACTORY_RE.search(qualname(node.func, self.ctx.aliases) or "") or \
                    BUILDER_RE.search(tail):
                return True
            return is_model(self._program_kind(node, st))
        if isinstance(node, (ast.Name, ast.Attribute)):
            return is_model(st.env.get(dotted(node) or "")) or self.is_model_callee(node, st)
        return False

    def module_kind(self, node: ast.AST, st: State, moved: ast.AST) -> str:
        """The kind of a module moved with `.to()`/`.cuda()`: its class kept when known."""
        k = self.kind(node, st)
        if is_model(k):
            return k  # type: ignore[return-value]
        if isinstance(node, ast.Call):
            prog = self._program_kind(node, st)
            if is_model(prog):
                return prog  # type: ignore[return-value]
        return MODEL

    def _model_method(self, call: ast.Call, st: State) -> bool:
        """A method of a model of a GPU program that computes on its inputs
        (`model.calculate_loss(x)`; not `model.get_step()`, a host counter)."""
        return self.ctx.gpu_program and isinstance(call.func, ast.Attribute) \
            and call.func.attr not in MODEL_METHODS and bool(call.args) \
            and COMPUTING_METHOD_RE.search(call.func.attr) is not None \
            and self.is_model_callee(call.func.value, st)


def class_name(name: str) -> bool:
    """Is ``name`` spelled as a class (`Net`, `MaskTransformer`, `ResNet_3D`), not as a
    constant (`MODELS`) or a function with a capital first word (`GAN_training_function`)?"""
    return name[:1].isupper() and not name.isupper() and re.search(r"_[a-z]", name) is None


def _loss_callee(func: ast.expr) -> bool:
    """A loss applied: `criterion(out, y)`, `self.l1_loss(...)`, one of a dict of losses
    (`criterion["cce"](out, y)`), or its forward called by name (`loss.forward(y, t)`)."""
    if isinstance(func, ast.Subscript) or (
            isinstance(func, ast.Attribute) and func.attr in {"forward", "__call__"}):
        func = func.value
    name = last_name(func)
    return name is not None and LOSS_RE.search(name) is not None
