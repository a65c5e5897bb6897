"""pitstop.tune: measure loader and training-step settings on YOUR dataset and model.

    import pitstop.tune

    result = pitstop.tune.loader(dataset, 64, device="cuda", budget=60)
    print(result.settings)           # {"num_workers": 6, "prefetch_factor": 2, ...}
    result.save("pitstop-loader.json")   # what pitstop.train.loader() reads

    result = pitstop.tune.model(model, (inputs, targets), F.cross_entropy, steps=20_000)
    print(result.config)             # precision, channels_last, batch size, compile, ...

    both = pitstop.tune.tune(dataset, {"model": m, "batch": b, "loss_fn": f})
    print(both.expected, both.ideal)  # samples/s fed by the loader, and from device memory

Modules, by job: :mod:`.factory` (MODULE:FACTORY targets and what they return),
:mod:`.budget` (the time budget), :mod:`.measure` (timing a trial), :mod:`.memory`
(what a loader trial would hold), :mod:`.loader_trials` and :mod:`.model_trials`
(running one trial for real), :mod:`.search` (the loader search and the full grid),
:mod:`.batch_size` (the batch size search), :mod:`.loader_tune` and
:mod:`.model_tune` (the two tuners), :mod:`.both` (the two in one go), :mod:`.distributed` (rank agreement under
torchrun), :mod:`.report` (tables, snippets), :mod:`.config` (pitstop-model.json),
:mod:`.calibration` (datasets with known answers), :mod:`.bench_workload` (the bench's
dataset and model as factories), :mod:`.command` (the CLI).

Nothing here imports torch until a function is called, so ``pitstop --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pitstop.tune.both import BothResult
    from pitstop.tune.loader_tune import LoaderTuneResult
    from pitstop.tune.model_tune import ModelTuneResult

__all__ = ["loader", "model", "tune"]


def loader(dataset: Any, batch_size: int | None = None, **kwargs: Any) -> LoaderTuneResult:
    """Tune DataLoader settings; see :func:`pitstop.tune.loader_tune.tune_loader`."""
    from pitstop.tune.loader_tune import tune_loader

    return tune_loader(dataset, batch_size, **kwargs)


def model(model: Any, batch: Any = None, loss_fn: Any = None, **kwargs: Any) -> ModelTuneResult:
    """Tune training-step options; see :func:`pitstop.tune.model_tune.tune_model`."""
    from pitstop.tune.model_tune import tune_model

    return tune_model(model, batch, loss_fn, **kwargs)


def tune(dataset: Any, model: Any, **kwargs: Any) -> BothResult:
    """Tune the model, then the loader against the tuned step; see
    :func:`pitstop.tune.both.tune_both`."""
    from pitstop.tune.both import tune_both

    return tune_both(dataset, model, **kwargs)
