"""Notebooks: the code cells of an ``.ipynb`` linted as one module, findings mapped back
to (cell, line). IPython magics and shell escapes become blank lines first."""

from __future__ import annotations

import json
from dataclasses import dataclass


class NotebookError(ValueError):
    """The file is not a readable Jupyter notebook."""


@dataclass(frozen=True)
class Notebook:
    text: str  # the code cells joined, magics blanked
    # for each line of ``text`` (0-based), the 1-based (cell number, line in cell)
    line_map: tuple[tuple[int, int], ...]
    cells: tuple[tuple[int, str], ...]  # (cell number, source) of the code cells


def _cell_source(cell: dict[str, object]) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(str(s) for s in src)
    return str(src)


def _blank_magics(src: str) -> str:
    out = []
    for line in src.split("\n"):
        stripped = line.lstrip()
        out.append("" if stripped.startswith(("%", "!", "?")) else line)
    return "\n".join(out)


def load_notebook(data: bytes) -> Notebook:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise NotebookError(f"not a valid notebook (JSON): {err}") from None
    except RecursionError:  # a 100 000-deep array: not a notebook, and no bug of ours
        raise NotebookError("not a valid notebook (JSON nested too deep)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise NotebookError("not a Jupyter notebook: no list of cells")
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    cells: list[tuple[int, str]] = []
    for number, cell in enumerate(doc["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = _cell_source(cell)
        cells.append((number, src))
        for i, line in enumerate(_blank_magics(src).split("\n"), start=1):
            lines.append(line)
            line_map.append((number, i))
        lines.append("")  # a cell boundary never joins two statements
        line_map.append((number, len(src.split("\n")) + 1))
    return Notebook("\n".join(lines) + "\n", tuple(line_map), tuple(cells))
