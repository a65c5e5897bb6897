"""The names of the model option groups that ``--skip`` takes.

Kept free of torch: the command line checks ``--skip`` before it checks that torch
(and the tune extra) can be imported.
"""

from __future__ import annotations

SKIPPABLE = ("cudnn", "tf32", "precision", "layout", "optimizer", "batch-size", "compile")
