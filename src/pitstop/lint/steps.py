"""A training step recognised by its syntax alone: ``loss.backward()``,
``optimizer.step()`` and their kin, and the optimizer classes a program writes."""

from __future__ import annotations

import ast
import re

from pitstop.lint.astutil import OPTIM_RE, last_name, qualname


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
