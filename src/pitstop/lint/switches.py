"""Switch arguments: what a call passes for a boolean parameter of its callee, as the
module summary records it (``CallSite.on``) -- off (a False/None/0 literal), on, or
decided by an option's default or by the caller's own parameter -- so that the program
can tell whether a flag that defaults to off is ever turned on."""

from __future__ import annotations

import ast

from pitstop.lint.astutil import callee_tail, param_default, param_names
from pitstop.lint.index import FuncDef, ModuleIndex
from pitstop.lint.settings import option_name, options_owner


def off_literal(node: ast.AST | None) -> bool:
    """`False`, `None`, `0`: an argument that leaves a switch off."""
    return isinstance(node, ast.Constant) and node.value in (False, None, 0) \
        and not isinstance(node.value, str)


def off_value(index: ModuleIndex, scope: FuncDef | None, node: ast.AST) -> bool:
    """An off literal, or a name every assignment of which (in the function, else at
    the top of the module) is one: `focal_loss = False` ... `Loss(focal_loss=focal_loss)`."""
    if off_literal(node):
        return True
    if not isinstance(node, ast.Name):
        return False
    for owner in (scope, None):
        assigns = index.scoped_assigns.get((owner, node.id))
        if assigns:
            return all(off_literal(a.value) for a in assigns)
        if owner is None:
            break
    return False


# Positional arguments of a function call that may be a switch (`train(model, True)`,
# `run(loader, args.fp16)`); a constructor's count whatever they are.
SWITCH_LIKE = (ast.Constant, ast.Name, ast.Attribute, ast.BoolOp, ast.UnaryOp, ast.Compare)


def switch_of(index: ModuleIndex, scope: FuncDef | None, node: ast.AST, depth: int = 0
            ) -> str | None:
    """What a switch argument is: None when off (a False/None/0 literal), "setting:X" when
    an option decides it (`args.fsdp`, `getattr(args, "fsdp", False) and ...`),
    "param:F.p" when the caller's own parameter with an off default does, else "" (on)."""
    if isinstance(node, ast.Name):  # (the same names come back call after call)
        memo: dict[tuple[int, str], str | None] = index.__dict__.setdefault("_switch_memo", {})
        key = (id(scope), node.id)
        if key not in memo:
            memo[key] = None  # (a name assigned from itself ends here)
            memo[key] = _switch_uncached(index, scope, node, depth)
        return memo[key]
    return _switch_uncached(index, scope, node, depth)


def _switch_uncached(index: ModuleIndex, scope: FuncDef | None, node: ast.AST, depth: int
                     ) -> str | None:
    if off_value(index, scope, node):
        return None
    if depth > 3:
        return ""
    option = option_name(node)
    if option is not None:
        return f"setting:{option}"
    if isinstance(node, ast.Call) and callee_tail(node) == "getattr" and len(node.args) >= 2 \
            and options_owner(node.args[0]) and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str):
        # (`getattr(args, "fsdp", False)`: off too where no option of that name exists)
        off = len(node.args) == 3 and off_literal(node.args[2])
        return f"setting{'?' if off else ''}:{node.args[1].value}"
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        parts = [switch_of(index, scope, v, depth + 1) for v in node.values]
        if None in parts:
            return None
        return next((p for p in parts if p), "")  # (off whenever that part is)
    if isinstance(node, ast.Name):
        if scope is not None and node.id in param_names(scope):
            # (on by default: on; else as the caller's callers pass it)
            default = param_default(scope, node.id)
            return f"param:{index.qualname_of(scope)}.{node.id}" \
                if default in (False, None, 0, "?") else ""
        # (`vision_dset = opt.vision_dset` in the function, or at the top of a script)
        assigns = index.visible_assigns(scope, node.id)
        if len(assigns) == 1 and assigns[0].value is not None:
            return switch_of(index, scope, assigns[0].value, depth + 1)
    return ""
