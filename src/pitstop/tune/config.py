"""The model config file ``pitstop-model.json``: what ``pitstop tune model`` chose.

The loader's config is ``pitstop.train.loader``'s own format (written with
:func:`pitstop.train.loader.save_config`, read by ``pitstop.train.loader()``). The
model's settings have no reader in ``pitstop.train`` (a model is built by the user's
code), so the file is read with :func:`read_model_config` and applied as the printed
snippet shows. Same layout as the loader's: ``{"pitstop": "model-config",
"version": 1, "settings": {...}, "measured": {...}}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MODEL_CONFIG_FILENAME = "pitstop-model.json"

MODEL_KEYS: dict[str, tuple[str, Any]] = {
    "batch_size": ("an integer >= 1",
                   lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
    "precision": ('"fp32", "bf16" or "fp16"', lambda v: v in ("fp32", "bf16", "fp16")),
    "tf32": ("true or false", lambda v: isinstance(v, bool)),
    "channels_last": ("true or false", lambda v: isinstance(v, bool)),
    "cudnn_benchmark": ("true or false", lambda v: isinstance(v, bool)),
    "optimizer_impl": ('"default", "for-loop", "foreach" or "fused"',
                       lambda v: v in ("default", "for-loop", "foreach", "fused")),
    "compile_mode": ('null, "default", "reduce-overhead" or "max-autotune"',
                     lambda v: v in (None, "default", "reduce-overhead", "max-autotune")),
}


def _check(settings: dict[str, Any], where: str) -> None:
    for key, value in settings.items():
        if key not in MODEL_KEYS:
            raise ValueError(f"{where}: unknown setting {key!r}; known: {', '.join(MODEL_KEYS)}")
        expected, check = MODEL_KEYS[key]
        if not check(value):
            raise ValueError(f"{where}: {key} must be {expected}, got {value!r}")


def save_model_config(path: str | os.PathLike[str], settings: dict[str, Any], *,
                      measured: dict[str, Any] | None = None) -> Path:
    """Write a model config atomically (settings validated first)."""
    from pitstop.fileio import atomic_write_json

    _check(settings, "model config")
    doc: dict[str, Any] = {"pitstop": "model-config", "version": 1, "settings": dict(settings)}
    if measured is not None:
        doc["measured"] = measured
    atomic_write_json(path, doc)
    return Path(path)


def read_model_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a model config file, validated (``ValueError`` naming the file)."""
    target = Path(path)
    try:
        doc = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"model config {target} cannot be read ({err})") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"model config {target} is not valid JSON (line {err.lineno}: "
                         f"{err.msg})") from err
    if not isinstance(doc, dict) or doc.get("pitstop") != "model-config" or \
            not isinstance(doc.get("settings"), dict):
        raise ValueError(f"model config {target} is not a pitstop model config (written by "
                         f"pitstop tune model --out)")
    _check(doc["settings"], f"model config {target}")
    return dict(doc["settings"])
