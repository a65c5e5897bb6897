"""``TrainStep``: one call = one optimizer step, done the fast and correct way.

Per call it splits the batch into micro-batches (``accumulate``), runs each forward
under ``torch.autocast`` for the chosen precision, scales each micro-loss by its
share of the batch (``1/accumulate`` for equal splits, so the gradients equal those
of the whole batch), skips DDP's/FSDP's gradient all-reduce on all but the last
micro-step, scales the loss with a ``GradScaler`` for fp16 only (and unscales before
clipping), steps the optimizer and the scheduler, and frees the gradients
(``zero_grad(set_to_none=True)``). The loss comes back as a detached device tensor:
reading it (``.item()``) is a host-device sync, so do that only when logging.

Nothing in a call waits for the device unless the configuration needs it: with fp16
and an ordinary optimizer the GradScaler reads its inf check on the host to decide
whether to step (a fused optimizer, ``fused=True`` on Adam/AdamW/SGD, takes that
decision on the device instead, so fp16 is sync-free with one), and
``microbatch="auto"`` under DDP reads one agreement flag per step.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F

from pitstop.train import microbatch as mb
from pitstop.train.precision import DTYPES, PRECISIONS, choose_precision
from pitstop.train.prefetch import iter_tensors

log = logging.getLogger("pitstop.train")

Precision = Literal["auto", "bf16", "fp16", "fp32"]


def _unwrap_compiled(model: torch.nn.Module) -> torch.nn.Module:
    """The module under ``torch.compile``'s wrapper (whose class hides DDP/FSDP)."""
    return getattr(model, "_orig_mod", model)


def _is_ddp(model: torch.nn.Module) -> bool:
    return isinstance(_unwrap_compiled(model), torch.nn.parallel.DistributedDataParallel)


def _is_fsdp(model: torch.nn.Module) -> bool:
    # FSDP1 (FullyShardedDataParallel) has no_sync(); FSDP2 (fully_shard) modules have
    # set_requires_gradient_sync(). Checked by name so that torch builds without
    # distributed support still import this module.
    cls_names = {c.__name__ for c in type(_unwrap_compiled(model)).__mro__}
    return bool(cls_names & {"FullyShardedDataParallel", "FSDPModule"})


def _measurable(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module whose forward ``precision="auto"`` may time on its own: DDP's inner
    module (DDP's forward broadcasts buffers, a collective the other ranks would not
    join), nothing under FSDP (its forward all-gathers the parameters)."""
    if _is_fsdp(model):
        return None
    inner = _unwrap_compiled(model)
    return inner.module if _is_ddp(model) else inner  # type: ignore[return-value]


@contextlib.contextmanager
def _without_grad_sync(model: torch.nn.Module) -> Iterator[None]:
    """Accumulate gradients locally: no all-reduce / reduce-scatter in this backward."""
    model = _unwrap_compiled(model)
    set_sync = getattr(model, "set_requires_gradient_sync", None)
    if callable(set_sync):  # FSDP2
        set_sync(False)
        try:
            yield
        finally:
            set_sync(True)
        return
    with model.no_sync():  # type: ignore[operator]
        yield


class _StepCounter:
    """Optimizer step post-hook: counts ``optimizer.step()`` calls and keeps the inf
    flag a GradScaler hands to a fused optimizer (``optimizer.found_inf``, set only
    for the duration of that step), with which the optimizer skips on the device."""

    def __init__(self) -> None:
        self.calls = 0
        self.found_inf: torch.Tensor | None = None

    def __call__(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.calls += 1
        found_inf = getattr(optimizer, "found_inf", None)
        self.found_inf = found_inf if isinstance(found_inf, torch.Tensor) else None


class TrainStep:
    """One optimizer step per call over a whole batch.

    Args:
        model: the model (plain, DDP-wrapped, FSDP-wrapped or compiled), on its device.
        optimizer: an optimizer built over ``model``'s parameters.
        loss_fn: ``loss_fn(outputs, targets)`` (or ``loss_fn(outputs)`` when targets is
            None), returning a mean-reduced scalar loss.
        precision: ``"auto"`` (see :mod:`pitstop.train.precision`), ``"bf16"``,
            ``"fp16"`` (CUDA, unless ``allow_fp16_on_cpu``; with a GradScaler; pass a
            fused optimizer to keep the scaler's inf check on the device) or ``"fp32"``.
        accumulate: micro-batches per step. The batch is split along its first
            dimension; the effective batch is the whole batch.
        clip_grad_norm: clip the global gradient norm to this value (after unscaling).
        scheduler: an LR scheduler stepped after each optimizer step that was taken
            (after every call with fp16 and a fused optimizer, which skips on the device).
        microbatch: ``"auto"`` halves the micro-batch on out-of-memory (all ranks
            agree under DDP) and retries, keeping the effective batch.
        allow_fp16_on_cpu: run ``precision="fp16"`` (float16 autocast and a
            ``GradScaler("cpu")``) on a CPU instead of refusing it. It is slow there and
            buys nothing for real training; it exists to test or study the fp16 path on
            a machine without a GPU.

    A call ``step(inputs, targets)`` passes ``inputs`` to the model as ``model(inputs)``
    for a tensor, ``model(*inputs)`` for a tuple/list and ``model(**inputs)`` for a
    dict. It returns the batch's mean loss as a detached device tensor.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *,
                 loss_fn: Callable[..., torch.Tensor] = F.cross_entropy,
                 precision: Precision = "auto", accumulate: int = 1,
                 clip_grad_norm: float | None = None, scheduler: Any = None,
                 microbatch: Literal["auto"] | None = None,
                 allow_fp16_on_cpu: bool = False) -> None:
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"optimizer must be a torch.optim.Optimizer, got "
                             f"{type(optimizer).__name__}: build one from model.parameters()")
        if isinstance(accumulate, bool) or not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(f"accumulate must be an integer >= 1 (micro-batches per optimizer "
                             f"step), got {accumulate!r}: use accumulate=1 for no accumulation")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, "
                             f"got {precision!r}")
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            raise ValueError("ReduceLROnPlateau steps on a validation metric, which TrainStep does "
                             "not see: leave scheduler=None and call scheduler.step(val_loss) "
                             "yourself after each evaluation")
        if microbatch not in (None, "auto"):
            raise ValueError(f"microbatch must be None or 'auto', got {microbatch!r}")
        if clip_grad_norm is not None and not clip_grad_norm > 0:
            raise ValueError(f"clip_grad_norm must be a positive number or None, got "
                             f"{clip_grad_norm!r}")

        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters (requires_grad=True): "
                             "unfreeze some before training")
        in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if not any(id(p) in in_optimizer for p in self.params):
            raise ValueError("the optimizer holds none of the model's trainable parameters: "
                             "build it from this model after moving/wrapping it, e.g. "
                             "torch.optim.AdamW(model.parameters())")

        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.accumulate = accumulate
        self.clip_grad_norm = clip_grad_norm
        self.scheduler = scheduler
        self.microbatch = microbatch
        self.device = self.params[0].device
        self._probe = self.params[0]

        if precision == "auto":
            choice = choose_precision(self.device, model=_measurable(model))
            self.precision, self.precision_reason = choice.precision, choice.why
        else:
            self.precision, self.precision_reason = precision, "requested"
        if self.precision == "fp16" and self.device.type == "cpu" and not allow_fp16_on_cpu:
            raise ValueError("precision='fp16' needs a CUDA GPU (on CPU fp16 is slow and loss "
                             "scaling buys nothing): use precision='bf16' on a CPU with "
                             "avx512_bf16/amx_bf16, else 'fp32' (or 'auto' to pick); "
                             "allow_fp16_on_cpu=True runs it anyway, to test the fp16 path")
        self.dtype = DTYPES[self.precision]
        self.scaler: torch.amp.GradScaler | None = (
            torch.amp.GradScaler(self.device.type) if self.precision == "fp16" else None)

        self._sync_aware = _is_ddp(model) or _is_fsdp(model)
        if microbatch == "auto" and _is_fsdp(model):
            raise ValueError("microbatch='auto' supports one process or DDP, not FSDP: pick "
                             "a fixed accumulate= that fits memory")

        #: current micro-batch size (samples); None before the first call
        self.micro_batch_size: int | None = None
        #: the total gradient norm before clipping, as a device tensor (when clipping)
        self.last_grad_norm: torch.Tensor | None = None
        self._counter = _StepCounter()
        self._hook = optimizer.register_step_post_hook(self._counter)
        self._started = False
        # Step counts known on the host: optimizer.step() calls made, and steps the
        # GradScaler skipped by not calling it. A fused optimizer skips on the device
        # instead: those skips are summed on the device and read only when asked for.
        self._step_calls = 0
        self._host_skips = 0
        self._device_skips: torch.Tensor | None = None
        self._last_skipped: bool | torch.Tensor = False

    # ------------------------------------------------------------------ call

    def __call__(self, inputs: Any, targets: Any = None) -> torch.Tensor:
        """Forward, backward and optimizer step over the batch; returns the mean loss."""
        self._check_batch(inputs, targets)
        if not self._started:
            # Gradients left over from before (e.g. a sanity-check backward) would be
            # added to the first step's.
            self.optimizer.zero_grad(set_to_none=True)
            self._started = True
        n = mb.batch_size_of(inputs)
        if self.microbatch == "auto":
            loss = self._auto_micro(inputs, targets, n)
        else:
            micro = math.ceil(n / self.accumulate)
            self.micro_batch_size = micro
            loss = self._micro_steps(inputs, targets, n, micro, sync_last=True)
        self._optimizer_step()
        return loss

    def _check_batch(self, inputs: Any, targets: Any) -> None:
        """The first tensor of inputs and of targets must be on the model's device."""
        model_device = self._probe.device
        for what, part in (("batch", inputs), ("targets", targets)):
            first = next(iter_tensors(part), None)
            if first is None:
                if what == "batch":
                    raise ValueError("the inputs hold no tensor: pass a tensor, or a "
                                     "tuple/list/dict of tensors")
                continue
            if first.device != model_device:
                raise ValueError(f"the {what} is on {first.device} but the model is on "
                                 f"{model_device}: move the batch with "
                                 f"pitstop.train.to_device(batch, {str(model_device)!r}) or "
                                 f"iterate DevicePrefetcher(loader, {str(model_device)!r})")

    def _forward_loss(self, inputs: Any, targets: Any) -> torch.Tensor:
        if isinstance(inputs, torch.Tensor):
            outputs = self.model(inputs)
        elif isinstance(inputs, Mapping):
            outputs = self.model(**inputs)
        elif isinstance(inputs, (tuple, list)):
            outputs = self.model(*inputs)
        else:
            outputs = self.model(inputs)
        return self.loss_fn(outputs) if targets is None else self.loss_fn(outputs, targets)

    def _micro_steps(self, inputs: Any, targets: Any, n: int, micro: int, *,
                     sync_last: bool) -> torch.Tensor:
        """Forward+backward of every micro-batch; gradients accumulate in ``.grad``."""
        autocast = (torch.autocast(self.device.type, dtype=self.dtype)
                    if self.precision != "fp32" else contextlib.nullcontext())
        if micro >= n:  # one micro-step: the common case, kept lean
            if self._sync_aware and not sync_last:
                with _without_grad_sync(self.model):
                    return self._one(inputs, targets, 1.0, autocast)
            return self._one(inputs, targets, 1.0, autocast)
        total: torch.Tensor | None = None
        k = mb.count_micro_steps(n, micro)
        parts: Any
        if isinstance(inputs, torch.Tensor) and isinstance(targets, torch.Tensor) \
                and inputs.shape[0] == targets.shape[0] == n:
            # Plain (x, y) tensors: split directly, no walk over a nested structure.
            parts = (((x, y), x.shape[0] / n)
                     for x, y in zip(inputs.split(micro), targets.split(micro), strict=True))
        else:
            parts = mb.micro_batches((inputs, targets), n, micro)
        for i, ((x, y), weight) in enumerate(parts):
            sync = sync_last and i == k - 1
            if self._sync_aware and not sync:
                with _without_grad_sync(self.model):
                    part = self._one(x, y, weight, autocast)
            else:
                part = self._one(x, y, weight, autocast)
            total = part if total is None else total + part
        assert total is not None
        return total

    def _one(self, x: Any, y: Any, weight: float,
             autocast: contextlib.AbstractContextManager[Any]) -> torch.Tensor:
        with autocast:
            loss = self._forward_loss(x, y)
        if weight != 1.0:
            loss = loss * weight
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        return loss.detach()

    def _auto_micro(self, inputs: Any, targets: Any, n: int) -> torch.Tensor:
        micro = min(n, self.micro_batch_size or math.ceil(n / self.accumulate))
        ddp = _unwrap_compiled(self.model)
        group = getattr(ddp, "process_group", None) if _is_ddp(self.model) else None
        distributed = group is not None and dist.is_initialized() and dist.get_world_size(group) > 1
        while True:
            self.micro_batch_size = micro
            oom = False
            loss: torch.Tensor | None = None
            try:
                # Under DDP no micro-step syncs: a rank that ran out of memory would
                # leave the others waiting in the gradient all-reduce forever.
                loss = self._micro_steps(inputs, targets, n, micro, sync_last=not distributed)
            except RuntimeError as exc:  # torch.OutOfMemoryError is one
                if not mb.is_out_of_memory(exc):
                    raise
                oom = True
            if distributed:
                flag_device = self.device if dist.get_backend(group) == "nccl" else torch.device("cpu")
                oom, micro = mb.agree_on_oom(oom, micro, group, flag_device)
            if not oom:
                if distributed:
                    mb.all_reduce_gradients(self.params, group)
                    if getattr(ddp, "broadcast_buffers", False):
                        mb.broadcast_buffers(ddp, group)
                assert loss is not None
                return loss
            # Drop what the failed attempt left: partial gradients (the GradScaler keeps
            # no per-step state before unscale_, which comes after the micro-steps).
            loss = None
            self.optimizer.zero_grad(set_to_none=True)
            if self.device.type == "cuda":
                # Only on the out-of-memory retry path, not per step: give the
                # failed attempt's cached blocks back before the smaller retry.
                torch.cuda.empty_cache()  # noqa: LT001
            if micro <= 1:
                raise torch.OutOfMemoryError(
                    f"pitstop.train.TrainStep: out of memory on {self.device} even with "
                    f"micro-batches of 1 sample (batch of {n}): the model, its gradients, "
                    f"optimizer state and one sample's activations do not fit. Use a smaller "
                    f"model or sample, activation checkpointing, or shard the model (FSDP).")
            new = max(1, micro // 2)
            log.warning("pitstop.train: out of memory at micro-batch %d%s; retrying with %d "
                        "(%d micro-steps per batch of %d)", micro,
                        " (on at least one rank)" if distributed else "", new,
                        mb.count_micro_steps(n, new), n)
            micro = new

    def _optimizer_step(self) -> None:
        calls_before = self._counter.calls
        self._counter.found_inf = None
        if self.scaler is not None:
            if self.clip_grad_norm is not None:
                self.scaler.unscale_(self.optimizer)
                self.last_grad_norm = self._clip()
            self.scaler.step(self.optimizer)  # skips the step on inf/nan gradients
            self.scaler.update()
        else:
            if self.clip_grad_norm is not None:
                self.last_grad_norm = self._clip()
            self.optimizer.step()
        if self._counter.calls == calls_before:
            # The GradScaler read its inf check on the host and did not call step().
            self._host_skips += 1
            self._last_skipped = True
            log.info("pitstop.train: optimizer step skipped by the GradScaler (inf/nan "
                     "gradients; loss scale lowered); %d skipped on the host so far",
                     self._host_skips)
        else:
            self._step_calls += 1
            found_inf = self._counter.found_inf
            if found_inf is None:
                self._last_skipped = False
            else:
                # A fused optimizer got the inf flag and skipped (or not) on the device:
                # count it there; reading the count later is the only sync.
                flag = found_inf.detach().reshape(()).float()
                self._last_skipped = flag
                self._device_skips = (flag.clone() if self._device_skips is None
                                      else self._device_skips.add_(flag))
            # Under a fused optimizer a skip is not known on the host without a sync,
            # so the scheduler advances on such a step too.
            if self.scheduler is not None:
                self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _clip(self) -> torch.Tensor:
        assert self.clip_grad_norm is not None
        fsdp_clip = getattr(_unwrap_compiled(self.model), "clip_grad_norm_", None)
        if callable(fsdp_clip):  # FSDP1 shards gradients: its own method computes the global norm
            return fsdp_clip(self.clip_grad_norm)
        return torch.nn.utils.clip_grad_norm_(self.params, self.clip_grad_norm)

    def _device_skip_count(self) -> int:
        return 0 if self._device_skips is None else int(self._device_skips.item())

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps taken (not skipped by the fp16 GradScaler).

        With a fused optimizer under fp16 this reads a count kept on the device: a
        host-device sync, so read it when logging, not every step."""
        return self._step_calls - self._device_skip_count()

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps the fp16 GradScaler skipped (inf/nan gradients).

        With a fused optimizer under fp16 this reads a count kept on the device: a
        host-device sync, so read it when logging, not every step."""
        return self._host_skips + self._device_skip_count()

    @property
    def last_step_skipped(self) -> bool:
        """Whether the GradScaler skipped the most recent optimizer step (a sync with a
        fused optimizer under fp16, where the skip is decided on the device)."""
        last = self._last_skipped
        return bool(last.item()) if isinstance(last, torch.Tensor) else last

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to resume this step exactly: the GradScaler's scale
        and growth tracker, the micro-batch size found, and the step counters."""
        return {"precision": self.precision, "micro_batch_size": self.micro_batch_size,
                "optimizer_steps": self.optimizer_steps, "skipped_steps": self.skipped_steps,
                "scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (the precision must match)."""
        if state.get("precision") != self.precision:
            raise ValueError(f"checkpoint was saved with precision={state.get('precision')!r}, "
                             f"this TrainStep uses {self.precision!r}: pass "
                             f"precision={state.get('precision')!r} to resume it")
        if self.microbatch == "auto":
            self.micro_batch_size = state.get("micro_batch_size")
        self._step_calls = int(state.get("optimizer_steps", 0))
        self._host_skips = int(state.get("skipped_steps", 0))
        self._device_skips = None
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])

    def __repr__(self) -> str:
        return (f"TrainStep(precision={self.precision!r} ({self.precision_reason}), "
                f"accumulate={self.accumulate}, micro_batch_size={self.micro_batch_size}, "
                f"clip_grad_norm={self.clip_grad_norm}, microbatch={self.microbatch!r}, "
                f"steps={self.optimizer_steps}, skipped={self.skipped_steps})")

    def close(self) -> None:
        """Remove the optimizer hook this step registered (optional; for long-lived optimizers)."""
        self._hook.remove()
