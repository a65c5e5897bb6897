"""Click parameter types shared by the commands: numbers that are finite and in range.

click's ``FloatRange`` lets ``nan`` through any bound (every comparison with nan is
false) and ``inf`` through a lower one; a ``--compile-timeout nan`` then means "no
bound" without anyone asking for it. :class:`FiniteFloatRange` refuses both as a usage
error (exit 2), like any other out-of-range value.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FiniteFloatRange"]


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that accepts finite numbers only."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
