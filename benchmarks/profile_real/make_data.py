"""Synthetic data for the real-script corpus: what each script reads, with the shape and
format it expects, written into the script's extracted work tree (never into this repo).

Each maker takes the work tree and returns the paths it wrote. Seeds are fixed, so every
run trains on the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

__all__ = ["MAKERS"]

_WORDS = [f"w{i}" for i in range(2000)]


def ptb_like_text(root: Path) -> list[Path]:
    """A Penn-Treebank-shaped text file: ~120 000 words in lines of 5-30 words over a
    Zipf-like vocabulary of 2000 words (yunjey language_model reads data/train.txt)."""
    rng = random.Random(0)
    out = root / "tutorials/02-intermediate/language_model/data/train.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]
    lines = []
    total = 0
    while total < 120_000:
        n = rng.randint(5, 30)
        lines.append(" ".join(rng.choices(_WORDS, weights, k=n)))
        total += n
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [out]


def char_text(root: Path) -> list[Path]:
    """Plain English-like text, 400 kB (aroidzap char-rnn reads --dataset data/input.txt)."""
    rng = random.Random(1)
    syllables = ["the", "and", "ing", "er", "on", "at", "en", "th", "ou", "is", "an", "re"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(3000)]
    text = []
    size = 0
    while size < 400_000:
        sentence = " ".join(rng.choices(words, k=rng.randint(4, 16))).capitalize() + ". "
        text.append(sentence)
        size += len(sentence)
    out = root / "data" / "input.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(text), encoding="utf-8")
    return [out]


def burgers_shock_mat(root: Path) -> list[Path]:
    """The Burgers' equation solution grid the PINN notebook loads with scipy.io.loadmat:
    t (100x1), x (256x1), usol (256x100), here a smooth travelling-shock stand-in."""
    import numpy as np
    import scipy.io

    t = np.linspace(0, 0.99, 100)[:, None]
    x = np.linspace(-1, 1, 256)[:, None]
    usol = -np.tanh((x - 0.2 * t.T) / (0.05 + 0.5 * (1 - t.T))) * np.exp(-t.T)
    out = root / "Burgers Equation" / "data" / "burgers_shock.mat"
    out.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(str(out), {"t": t, "x": x, "usol": usol})
    return [out]


MAKERS: dict[str, Callable[[Path], list[Path]]] = {
    "ptb_like_text": ptb_like_text,
    "char_text": char_text,
    "burgers_shock_mat": burgers_shock_mat,
}
