"""One-line reasons for failures, as the tables and error messages print them."""

from __future__ import annotations


def first_line(err: BaseException) -> str:
    """``Type: first line``; for an error re-raised from a DataLoader worker (whose
    message carries the worker's traceback) also the original error's last line."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    if len(lines) > 1 and any("Traceback" in line for line in lines):
        text += f" ({lines[-1]})"
    return text
