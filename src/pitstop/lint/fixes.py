"""Applying fixes with libcst, so that formatting and comments survive.

Only files that get fixed are parsed with libcst (it is ~10x slower than ``ast``). Each
:class:`~pitstop.lint.model.Edit` names the node it changes by position and anchor; the
transformer below applies every edit whose node it meets. The result is re-parsed (ast
and libcst) before anyone writes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from pitstop.lint.model import Edit


class FixError(Exception):
    """A fix produced code that does not parse (a bug): the file is left untouched."""


def _expr(src: str) -> cst.BaseExpression:
    return cst.parse_expression(src)


def _tail(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _kw(name: str, value: str) -> cst.Arg:
    return cst.Arg(keyword=cst.Name(name), value=_expr(value),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _append_arg(args: Sequence[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """Append ``new``, keeping the call's comma style (trailing comma, one per line)."""
    out = list(args)
    if not out:
        return [new]
    last = out[-1]
    sep_ws: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
    if len(out) >= 2 and isinstance(out[-2].comma, cst.Comma):
        sep_ws = out[-2].comma.whitespace_after
    if isinstance(last.comma, cst.Comma):  # trailing comma: the new arg gets one too
        ws = last.comma.whitespace_after
        if isinstance(ws, cst.ParenthesizedWhitespace) and isinstance(
                sep_ws, cst.ParenthesizedWhitespace):
            # one argument per line: a comment after the old last argument stays there
            out[-1] = last.with_changes(comma=last.comma.with_changes(
                whitespace_after=ws.with_changes(last_line=sep_ws.last_line)))
            out.append(new.with_changes(comma=cst.Comma(whitespace_after=ws.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=()))))
        else:
            out[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep_ws))
            out.append(new.with_changes(comma=last.comma))
    else:
        # No trailing comma: whatever followed the old last argument (a newline and the
        # indentation of the closing parenthesis) now follows the new one.
        out[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep_ws),
                                    whitespace_after_arg=cst.SimpleWhitespace(""))
        out.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return out


def _remove_kw(args: Sequence[cst.Arg], name: str) -> list[cst.Arg]:
    out = list(args)
    for i, a in enumerate(out):
        if a.keyword is not None and a.keyword.value == name:
            removed = out.pop(i)
            if i == len(out) and out:  # it was the last: the new last takes its comma
                out[-1] = out[-1].with_changes(comma=removed.comma)
            return out
    return out


def _apply_call(node: cst.Call, edit: Edit) -> cst.BaseExpression:
    args = list(node.args)
    if edit.op == "kw_add":
        if any(a.keyword is not None and a.keyword.value == edit.name for a in args):
            return node
        return node.with_changes(args=_append_arg(args, _kw(edit.name, edit.value)))
    if edit.op == "kw_set":
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == edit.name:
                args[i] = a.with_changes(value=_expr(edit.value))
                return node.with_changes(args=args)
        return node.with_changes(args=_append_arg(args, _kw(edit.name, edit.value)))
    if edit.op == "kw_remove":
        return node.with_changes(args=_remove_kw(args, edit.name))
    if edit.op == "arg_set":
        if edit.index < len(args) and args[edit.index].keyword is None:
            args[edit.index] = args[edit.index].with_changes(value=_expr(edit.value))
        return node.with_changes(args=args)
    if edit.op == "replace_callee":
        new_args: list[cst.Arg] = []
        for i, a in enumerate(args):
            if a.keyword is None and a.star == "" and i < len(edit.names):
                a = a.with_changes(keyword=cst.Name(edit.names[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace("")))
            new_args.append(a)
        first = cst.Arg(value=_expr(edit.prepend))
        if new_args:
            first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return node.with_changes(func=_expr(edit.value), args=[first, *new_args])
    if edit.op == "unwrap_to_device":
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            inner = func.value
            return inner.with_changes(args=_append_arg(list(inner.args),
                                                       _kw(edit.name, edit.value)))
        return node
    return node


class _Transformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: Iterable[Edit]) -> None:
        super().__init__()
        self.by_pos: dict[tuple[int, int, str], list[Edit]] = {}
        self.inserts: list[str] = []
        for e in edits:
            if e.op == "insert_after_imports":
                if e.value not in self.inserts:
                    self.inserts.append(e.value)
            else:
                self.by_pos.setdefault((e.line, e.column, e.anchor), []).append(e)
        self.applied = 0

    def _key(self, node: cst.CSTNode, anchor: str) -> tuple[int, int, str]:
        pos = self.get_metadata(PositionProvider, node).start
        return (pos.line, pos.column, anchor)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        edits = self.by_pos.get(self._key(original.func, _tail(original.func)))
        if not edits:
            return updated
        result: cst.BaseExpression = updated
        for e in edits:
            if isinstance(result, cst.Call):
                result = _apply_call(result, e)
                self.applied += 1
        return result

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value not in {"True", "False"}:
            return updated
        edits = self.by_pos.get(self._key(original, original.value))
        if not edits:
            return updated
        self.applied += 1
        return updated.with_changes(value=edits[0].value)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.inserts:
            return updated
        body = list(updated.body)
        last_import = -1
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                    isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                last_import = i
        if last_import < 0:
            return updated
        present = {cst.Module(body=[s]).code.strip() for s in body}
        new = [cst.parse_statement(s + "\n") for s in sorted(self.inserts) if s not in present]
        self.applied += len(new)
        return updated.with_changes(body=[*body[: last_import + 1], *new, *body[last_import + 1:]])


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with ``edits`` applied; raises FixError if the result does not parse."""
    edits = list(edits)
    if not edits:
        return source
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    transformer = _Transformer(edits)
    new = wrapper.visit(transformer).code
    if new != source:
        try:
            ast.parse(new)
            cst.parse_module(new)
        except (SyntaxError, cst.ParserSyntaxError) as err:
            raise FixError(f"fix produced code that does not parse: {err}") from None
    return new
