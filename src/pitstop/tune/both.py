"""``pitstop tune`` with a dataset and a model: the model first, then the loader against
the tuned step, and the figure that sums them up (expected samples/s against the ideal).

The model gets :data:`MODEL_SHARE` of the budget; what it leaves goes to the loader.
The loader is tuned at the batch size the model search chose, with every trial
running the tuned step, so "fed" means fed for the step that will really run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pitstop.tune.factory import as_dataset_target, as_model_target
from pitstop.tune.loader_tune import LoaderTuneResult, tune_loader
from pitstop.tune.model_trials import BuiltStep, StepConsumer
from pitstop.tune.model_tune import ModelTuneResult, tune_model
from pitstop.tune.progress import Reporter

MODEL_SHARE = 0.6


@dataclass
class BothResult:
    model: ModelTuneResult
    loader: LoaderTuneResult | None

    @property
    def interrupted(self) -> bool:
        return self.model.interrupted or (self.loader is not None and self.loader.interrupted)

    @property
    def expected(self) -> float | None:
        """Samples/s of the tuned step fed by the tuned loader."""
        c = self.loader.choice if self.loader is not None else None
        return c.effective if c is not None else None

    @property
    def ideal(self) -> float | None:
        """Samples/s of the tuned step on a batch already on the device."""
        if self.loader is not None and self.loader.step_rate is not None:
            return self.loader.step_rate
        return self.model.rate


def tune_both(dataset: Any, model: Any, *, budget: float = 180.0,
              device: str | torch.device = "auto", steps: int = 1000,
              tolerance: float | None = None, batch_size: int | None = None,
              reporter: Reporter | None = None, named: str = "dataset",
              model_named: str = "model", skip: tuple[str, ...] = (),
              **loader_kwargs: Any) -> BothResult:
    """Tune ``model`` (a model factory's output), then ``dataset``'s loader against it."""
    dataset_target = as_dataset_target(dataset, named=named)
    target = as_model_target(model, named=model_named)
    extra: dict[str, Any] = {} if tolerance is None else {"tolerance": tolerance}
    model_result = tune_model(target, device=device, budget=budget * MODEL_SHARE, steps=steps,
                              batch_size=batch_size, reporter=reporter, named=model_named,
                              skip=skip, **extra)
    cfg = model_result.config
    if cfg is None or model_result.interrupted:
        return BothResult(model_result, None)
    consumer = StepConsumer(BuiltStep(target, cfg, torch.device(model_result.device)),
                            cfg.batch_size)
    try:
        loader_result = tune_loader(dataset_target, cfg.batch_size, device=model_result.device,
                                    budget=max(1.0, budget - model_result.seconds),
                                    reporter=reporter, named=named, model_named=model_named,
                                    step_consumer=consumer, **loader_kwargs)
    finally:
        consumer.close()
    return BothResult(model_result, loader_result)
