"""A corpus of realistic training scripts (image classification, language model, GAN,
DDP with accumulation, evaluation, a package whose flags live in another module), each
with the findings a careful reviewer expects listed beside it (``<script>.expected``,
written by hand as ``line CODE``). The test reports precision and recall over the whole
corpus and fails on any false positive and on any miss not listed in KNOWN_MISSES."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lint_helpers import CORPUS, lint

PRECISION_FLOOR = 0.95
RECALL_FLOOR = 0.95
# Misses we know of and could not fix (see docs/lint.md, Limits): any other miss, and any
# false positive at all, fails the test even while the floors still hold -- a floor alone
# would let one new false alarm through.
KNOWN_MISSES: set[tuple[str, int, str]] = set()


def _expected() -> Counter[tuple[str, int, str]]:
    want: Counter[tuple[str, int, str]] = Counter()
    for exp in CORPUS.rglob("*.expected"):
        rel = exp.with_suffix(".py").relative_to(CORPUS).as_posix()
        for line in exp.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                n, code = line.split()
                want[(rel, int(n), code)] += 1
    return want


def test_corpus_precision_and_recall() -> None:
    run = lint([CORPUS])
    assert not run.all_diagnostics, run.all_diagnostics
    got: Counter[tuple[str, int, str]] = Counter(
        (Path(f.path).resolve().relative_to(CORPUS).as_posix(), f.line, f.code)
        for f in run.findings)
    want = _expected()
    tp = sum((got & want).values())
    precision = tp / max(1, sum(got.values()))
    recall = tp / max(1, sum(want.values()))
    false_pos = sorted((got - want).elements())
    missed = sorted((want - got).elements())
    print(f"\ncorpus: {sum(want.values())} expected, {sum(got.values())} reported, {tp} correct; "
          f"precision {precision:.3f}, recall {recall:.3f}")
    print("false positives:", false_pos)
    print("missed:", missed)
    assert precision >= PRECISION_FLOOR, false_pos
    assert recall >= RECALL_FLOOR, missed
    assert not false_pos, false_pos
    assert set(missed) == KNOWN_MISSES, missed


def test_corpus_covers_every_scenario() -> None:
    names = {p.parent.name for p in CORPUS.rglob("*.py")}
    assert {"image_classification", "language_model", "gan", "ddp_accumulation",
            "evaluation", "nanogpt", "imagenet_meter", "hf_manual_loop", "lightning_module",
            "dcgan", "tqdm_progress", "eval_accuracy", "cpu_only", "trainer", "accelerate_loop",
            "ddp_rank0_logging", "segmentation_timing", "timm_style", "vae"} <= names
