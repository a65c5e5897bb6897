"""LT005 cudnn-benchmark: a convolutional GPU training program without the cuDNN autotuner.

Image convolutions run on fixed-size crops as a rule; 1-d convolutions in a program with
recurrent layers or token embeddings run over sequences of varying length, where the
autotuner would time its algorithms again for every new length (left out); 1-d
convolutions over point sets or fixed windows keep the advice."""

from __future__ import annotations

import ast

from pitstop.lint.context import ANY, ModuleContext
from pitstop.lint.model import UNSAFE, Edit, Fix
from pitstop.lint.rules._program import first_gpu_train_loop, insert_after_imports
from pitstop.lint.settings import options_owner

CODE = "LT005"


def _determinism_on_by_default(ctx: ModuleContext) -> bool:
    """`cudnn.deterministic = args.torch_deterministic` with that option defaulting to
    True: the program asks for determinism unless told otherwise."""
    for assign in ctx.assigns:
        value = assign.value
        if not (isinstance(value, ast.Attribute) and options_owner(value.value)):
            continue
        if any(isinstance(t, ast.Attribute) and t.attr == "deterministic"
               and "cudnn" in ast.unparse(t) for t in assign.targets):
            setting = ctx.program.setting(value.attr)
            if setting is not None and setting.default is True:
                return True
    return False


def check(ctx: ModuleContext) -> None:
    if not ctx.gpu_program or "deterministic" in ctx.facts or _determinism_on_by_default(ctx):
        return
    explicit_false = False
    for assign in ctx.assigns:
        value = assign.value
        for t in assign.targets:
            if isinstance(t, ast.Attribute) and t.attr == "benchmark" and "cudnn" in ast.unparse(t) \
                    and isinstance(value, ast.Constant) and value.value is False:
                if ctx.loops.under_opt_in(assign):
                    continue  # `if deterministic:` (off by default): reproducibility on request
                explicit_false = True
                line = value.lineno
                ctx.report(
                    CODE, assign,
                    "`cudnn.benchmark = False` in a convolutional GPU training program: cuDNN "
                    "uses heuristics instead of timing its algorithms once per input shape, "
                    "often leaving 10-30% of convolution speed unused.",
                    fix=Fix(UNSAFE, "set it to True",
                            (Edit("replace_literal", line, ctx.char_column(line, value.col_offset),
                                  "False", value="True"),)),
                    condition=ANY.join(("+image_conv -deterministic",
                                        "+has_conv -has_rnn -has_embedding -deterministic")),
                )
    loop = first_gpu_train_loop(ctx)
    if loop is None or explicit_false or "cudnn_benchmark_true" in ctx.facts:
        return
    ctx.report(
        CODE, loop,
        "convolutional GPU training program that never sets `torch.backends.cudnn.benchmark = "
        "True`: with fixed input sizes cuDNN would time its algorithms once and pick the "
        "fastest, often 10-30% faster convolutions.",
        fix=insert_after_imports(ctx, "torch.backends.cudnn.benchmark = True",
                    "turn the cuDNN autotuner on after the imports"),
        condition=ANY.join(("+image_conv -cudnn_benchmark_true -deterministic",
                            "+has_conv -has_rnn -has_embedding -cudnn_benchmark_true -deterministic")),
    )
