"""Reading training code written for an older Python, line for line.

Much public research code still in use was written for Python 2 or for PyTorch before
0.4: `print loss.data[0]`, `except IOError, e:`, `x.cuda(async=True)`. Such a file does
not parse on today's Python, and a linter that gives up on it misses every finding in
it. Here it is read as it was meant: each construct that stops the parse is rewritten
into today's form *on its own line* (a statement that spans lines stays on those lines),
so that every finding keeps the line the user sees. The rewritten text is used for
analysis only, never written back, and the file gets a warning that it does not run on
this Python.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

# `x.cuda(async=True)`: PyTorch before 0.4 called non_blocking `async`, a keyword since
# Python 3.7; swapped for a name of the same length, so that every column stays too
LEGACY_ASYNC_RE = re.compile(r"\basync(?=\s*=(?!=))")
LEGACY_ASYNC = "ASYNC"

# `print x`, `print`, `print >>f, x` (not `print(x)`, `print (x)`, `print = f`)
_PRINT_RE = re.compile(r"^(\s*)(print|exec)\b(?=\s*$|\s*>>|\s*[^\s(=.,)\]:;])")
# the same after a compound statement's colon on one line (`if x: print y`)
_INLINE_PRINT_RE = re.compile(r"^(\s*[^#\n]*?:\s*)(print|exec)\b(?=\s*>>|\s*[^\s(=.,)\]:;])")
_EXCEPT_RE = re.compile(r"^(\s*except\s+)([^:#]+?)\s*,\s*([A-Za-z_]\w*)\s*:")
_RAISE_RE = re.compile(r"^(\s*raise\s+)([\w.]+)\s*,\s*(.+?)\s*$")
_OCTAL_RE = re.compile(r"(?<![\w.])0([0-7]+)\b")
_LONG_RE = re.compile(r"(?<![\w.])(\d+)[lL]\b")
_UR_RE = re.compile(r"(?<![\w])[uU][rR](?=['\"])")
_BACKTICK_RE = re.compile(r"`([^`\n]+)`")

# at most this many failing lines are rewritten before the file is given up on: a file
# in another language must not cost a parse per line
_MAX_REPAIRS = 400


@dataclass(frozen=True)
class LegacyRead:
    """A file read as older Python: the text that parses, and where it was rewritten."""

    text: str
    first_line: int
    kinds: tuple[str, ...]  # what was rewritten: "print statement", "async=", ...

    def describe(self) -> str:
        """The warning shown for the file (one line)."""
        if self.kinds == ("async=",):
            return ("passes `async=`, a keyword since Python 3.7 (PyTorch before 0.4 named "
                    "`non_blocking` so): this file does not run on this Python; rename it "
                    "`non_blocking=`. Linted as if it were.")
        return (f"written for Python 2 ({', '.join(self.kinds)}): this file does not run "
                "on this Python. Linted as if it were ported, line for line; not fixed.")


def _statement_end(lines: list[str], start: int) -> int:
    """Index of the last physical line of the logical line that starts at ``start``."""
    depth = 0
    readline = iter(lines[start:]).__next__
    try:
        for tok in tokenize.generate_tokens(readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or (
                    tok.type == tokenize.NL and depth <= 0):
                return start + tok.start[0] - 1
    except (tokenize.TokenError, IndentationError, StopIteration, SyntaxError):
        pass
    return start


def _split_comment(line: str) -> tuple[str, str]:
    """(code, trailing comment and newline) of one physical line."""
    newline = line[len(line.rstrip("\r\n")):]
    body = line[: len(line) - len(newline)]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(body + "\n").readline):
            if tok.type == tokenize.COMMENT:
                code = body[: tok.start[1]].rstrip()
                return code, body[len(code):] + newline
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return body.rstrip(), newline


def _semicolon(line: str, start: int) -> int | None:
    """The column of the first `;` at bracket depth 0 in ``line`` after ``start``."""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line[start:] + "\n").readline):
            if tok.type == tokenize.OP:
                if tok.string in "([{":
                    depth += 1
                elif tok.string in ")]}":
                    depth -= 1
                elif tok.string == ";" and depth == 0:
                    return start + tok.start[1]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return None


def _wrap_statement(lines: list[str], i: int, match: re.Match[str]) -> str | None:
    """`print a, b` -> `print(a, b)` over the statement's lines; its kind, or None."""
    name = match.group(2)
    semi = _semicolon(lines[i], match.end())
    if semi is not None:  # `print "a"; x = 1`: the statement ends at the `;`
        first = lines[i]
        lines[i] = first[:match.end()] + "(" + first[match.end():semi].strip() + ")" + \
            first[semi:]
        return f"{name} statement"
    end = _statement_end(lines, i)
    first = lines[i]
    rest = first[match.end():]
    stripped = rest.lstrip()
    target = ""
    if name == "print" and stripped.startswith(">>"):  # print >>f, x
        after = stripped[2:]
        head, _, tail = after.partition(",")
        target, rest = head.strip(), tail
    if not rest.strip():  # `print >>f` alone, or a bare `print`
        rest = first[len(first.rstrip("\r\n")):]
    lines[i] = first[:match.end()] + "(" + (rest.lstrip(" \t") if i == end else rest)
    code, trailer = _split_comment(lines[end])
    if name == "print" and code.rstrip().endswith(",") and not code.rstrip().endswith("(,"):
        code = code.rstrip()[:-1] + ", end=' '"  # print x, : no newline
    if target:
        code += f", file={target}" if code.rstrip()[-1:] != "(" else f"file={target}"
    lines[end] = code + ")" + trailer
    return f"{name} statement"


def _repair_clause(lines: list[str], i: int) -> str | None:
    """`except E, e:` -> `except E as e:`, `raise E, msg` -> `raise E(msg)` on line ``i``."""
    line = lines[i]
    if (m := _EXCEPT_RE.match(line)) is not None:
        lines[i] = f"{m.group(1)}{m.group(2)} as {m.group(3)}:{line[m.end():]}"
        return "`except E, e:`"
    code, trailer = _split_comment(line)  # (a `#` inside the message is no comment)
    if (m := _RAISE_RE.match(code)) is not None:
        lines[i] = f"{m.group(1)}{m.group(2)}({m.group(3)}){trailer}"
        return "`raise E, msg`"
    return None


def _repair_line(lines: list[str], i: int) -> str | None:
    """Rewrite the older construct that starts on line ``i``; its kind, or None."""
    line = lines[i]
    if (m := _PRINT_RE.match(line) or _INLINE_PRINT_RE.match(line)) is not None:
        return _wrap_statement(lines, i, m)
    kind = _repair_clause(lines, i)
    if kind is not None:
        return kind
    code, trailer = _split_comment(line)
    new = code
    if LEGACY_ASYNC_RE.search(new):
        new = LEGACY_ASYNC_RE.sub(LEGACY_ASYNC, new)
        if new != code:
            lines[i] = new + trailer
            return "async="
    new = _OCTAL_RE.sub(r"0o\1", new)
    new = _LONG_RE.sub(r"\1", new)
    new = _UR_RE.sub("r", new)
    new = new.replace("<>", "!=")
    new = _BACKTICK_RE.sub(r"repr(\1)", new)
    if new != code:
        lines[i] = new + trailer
        return "Python 2 literal or operator"
    return None


def _expand_indent_tabs(text: str) -> str:
    """Python 2 read a tab in indentation as up to 8 columns; Python 3 refuses the mix."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.lstrip(" \t")
        out.append(line[: len(line) - len(body)].expandtabs(8) + body)
    return "".join(out)


def _print_statement_lines(text: str) -> list[int]:
    """0-based lines where a logical line starts with a `print`/`exec` statement, as the
    tokenizer sees them (so never inside a string)."""
    found = []
    at_start = True
    prev = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.COMMENT):
                at_start = at_start or tok.type == tokenize.NEWLINE
                prev = None
                continue
            if prev is not None:
                if not (tok.type == tokenize.OP and tok.string in "(=.,)]:;"):
                    found.append(prev.start[0] - 1)
                prev = None
            if at_start and tok.type == tokenize.NAME and tok.string in ("print", "exec"):
                prev = tok
            at_start = False
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    if prev is not None:  # `print` as the file's last token
        found.append(prev.start[0] - 1)
    return found


def _repair_all(lines: list[str], text: str, kinds: list[str]) -> int | None:
    """The rewrites that Python 2 code needs everywhere at once (a parse per line of a
    file with 200 print statements would cost 200 parses). The first line rewritten
    (1-based), or None."""
    first: int | None = None
    if LEGACY_ASYNC_RE.search(text):
        for i, line in enumerate(lines):
            code, trailer = _split_comment(line)
            if LEGACY_ASYNC_RE.search(code):
                lines[i] = LEGACY_ASYNC_RE.sub(LEGACY_ASYNC, code) + trailer
                first = min(first or i + 1, i + 1)
                if "async=" not in kinds:
                    kinds.append("async=")
    for i in _print_statement_lines(text):
        if i < len(lines) and (m := _PRINT_RE.match(lines[i])) is not None:
            kind = _wrap_statement(lines, i, m)
            first = min(first or i + 1, i + 1)
            if kind is not None and kind not in kinds:
                kinds.append(kind)
    # `except E, e:` and `raise E, msg` on every line at once (one parse each would be
    # quadratic in a file with hundreds of them)
    for i, line in enumerate(lines):
        if "except" in line or "raise" in line:
            old = line
            kind = _repair_clause(lines, i)
            if kind is not None and lines[i] != old:
                first = min(first or i + 1, i + 1)
                if kind not in kinds:
                    kinds.append(kind)
    return first


_CACHE: dict[str, LegacyRead | None] = {}
# texts that :func:`parse` read as they are (a file is parsed before it is asked about)
_PARSED: set[int] = set()


def read_legacy(text: str) -> LegacyRead | None:
    """``text`` read as older Python when it does not parse as it is and the rewrites
    above make it parse; None when it parses already or cannot be read either way."""
    if hash(text) in _PARSED:
        return None
    if text in _CACHE:
        return _CACHE[text]
    if len(_CACHE) > 64:
        _CACHE.clear()
    found = _read_legacy(text)
    _CACHE[text] = found
    return found


def _read_legacy(text: str) -> LegacyRead | None:
    try:
        ast.parse(text, type_comments=False)
        return None
    except SyntaxError as err:
        failing = err
    except (ValueError, RecursionError, MemoryError):
        return None
    lines = text.splitlines(keepends=True)
    kinds: list[str] = []
    first = min(failing.lineno or 1, _repair_all(lines, text, kinds) or 1 << 30)
    if kinds:
        try:
            ast.parse("".join(lines), type_comments=False)
            return LegacyRead("".join(lines), first, tuple(kinds))
        except SyntaxError as err:
            failing = err
        except (ValueError, RecursionError, MemoryError):
            return None
    tries: dict[int, int] = {}
    for _ in range(_MAX_REPAIRS):
        lineno = failing.lineno or 0
        tries[lineno] = tries.get(lineno, 0) + 1
        if tries[lineno] > 3:  # a line that keeps failing is no older Python
            return None
        kind = None
        if isinstance(failing, TabError) and "indentation tabs" not in kinds:
            lines = _expand_indent_tabs("".join(lines)).splitlines(keepends=True)
            kind = "indentation tabs"
        elif 1 <= lineno <= len(lines):
            kind = _repair_line(lines, lineno - 1)
            if kind is None and lineno >= 2:  # an error reported after the construct
                kind = _repair_line(lines, lineno - 2)
                lineno -= 1
        if kind is None:
            return None
        if kind not in kinds:
            kinds.append(kind)
        first = min(first, lineno)
        try:
            ast.parse("".join(lines), type_comments=False)
        except SyntaxError as err:
            failing = err
            continue
        except (ValueError, RecursionError, MemoryError):
            return None
        return LegacyRead("".join(lines), first or 1, tuple(kinds))
    return None


def parse(text: str, path: str) -> ast.Module:
    """The module's tree; code written for Python 2 or passing pre-3.7 `async=` is read
    as it was meant (see :func:`read_legacy`). Raises the original SyntaxError when it
    cannot be read either way."""
    try:
        tree = ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as err:
        legacy = read_legacy(text)
        if legacy is None:
            raise err from None
        return ast.parse(legacy.text, filename=path, type_comments=False)
    if len(_PARSED) > 4096:
        _PARSED.clear()
    _PARSED.add(hash(text))
    return tree
