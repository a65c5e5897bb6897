"""Moving batches to the device: :func:`to_device` and :class:`DevicePrefetcher`.

``to_device`` walks the nested containers a DataLoader yields (tuples, lists, dicts,
namedtuples, dataclasses) and moves every tensor. It asks for ``non_blocking=True``
only when the source tensor is in pinned (page-locked) host memory: from pageable
memory a "non-blocking" copy is staged through a pinned buffer by the driver anyway
and is no faster, and for device-to-host copies it would hand back a tensor whose
contents are not yet written (see PyTorch's "A guide on good usage of non_blocking
and pin_memory()").

``DevicePrefetcher`` overlaps the host-to-device copy of batch n+1 with the compute
of batch n: the copy is issued on a side CUDA stream, the compute stream waits for
it (``wait_stream``) before using the batch, and every copied tensor is marked as
used by the compute stream (``record_stream``) so the caching allocator does not
hand its memory to a later copy while the compute is still reading it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

import torch
from torch.nn.utils.rnn import PackedSequence

T = TypeVar("T")


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` becomes ``cuda`` when a GPU is usable, else ``cpu``; anything else is parsed."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device {device!r} is not a torch device: use 'cpu', 'cuda', "
                         f"'cuda:1' or 'auto'") from exc


def _move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if t.device == device:
        return t
    # is_pinned() is only meaningful (and only cheap) for host tensors going to an accelerator.
    non_blocking = t.device.type == "cpu" and device.type != "cpu" and t.is_pinned()
    return t.to(device, non_blocking=non_blocking)


def _is_namedtuple(obj: object) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def map_tensors(batch: Any, fn: Any) -> Any:
    """Apply ``fn`` to every tensor in a nested batch, keeping the container types."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, PackedSequence):
        # Its batch_sizes must stay on the CPU; only the data (and indices) move.
        return PackedSequence(
            fn(batch.data), batch.batch_sizes,
            None if batch.sorted_indices is None else fn(batch.sorted_indices),
            None if batch.unsorted_indices is None else fn(batch.unsorted_indices))
    if _is_namedtuple(batch):
        return type(batch)(*(map_tensors(v, fn) for v in batch))
    if isinstance(batch, (list, tuple)):
        items = [map_tensors(v, fn) for v in batch]
        try:
            return type(batch)(items)
        except TypeError:  # a list/tuple subclass with its own constructor signature
            return list(items) if isinstance(batch, list) else tuple(items)
    if isinstance(batch, Mapping):
        moved = {k: map_tensors(v, fn) for k, v in batch.items()}
        try:
            return type(batch)(moved)  # type: ignore[call-arg]
        except TypeError:
            return moved
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {f.name: map_tensors(getattr(batch, f.name), fn)
                   for f in dataclasses.fields(batch) if f.init}
        return dataclasses.replace(batch, **changes)
    return batch


def iter_tensors(batch: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nested batch, depth first, in container order."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            yield from iter_tensors(v)
    elif isinstance(batch, Mapping):
        for v in batch.values():
            yield from iter_tensors(v)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for f in dataclasses.fields(batch):
            yield from iter_tensors(getattr(batch, f.name))


def to_device(batch: T, device: str | torch.device) -> T:
    """Move every tensor in ``batch`` to ``device``; the structure comes back unchanged.

    Tensors already on ``device`` are returned as they are (no copy); non-tensor
    leaves (strings, numbers, None) are passed through. The copy is non-blocking
    only when the source tensor is pinned.
    """
    target = resolve_device(device)
    return map_tensors(batch, lambda t: _move(t, target))


class DevicePrefetcher(Iterable[Any]):
    """Iterate ``loader`` with each batch already on ``device``.

    On CUDA the next batch is copied on a side stream while the current one is being
    used; pin the loader's memory (``pitstop.train.loader`` does so for CUDA targets)
    or the copies cannot overlap with compute. On any other device this is
    ``to_device`` applied to each batch, nothing more.

    A batch handed out may be used freely on the current stream; it must not be used
    on *other* streams without the user synchronizing them, as for any tensor.
    """

    def __init__(self, loader: Iterable[Any], device: str | torch.device) -> None:
        self.loader = loader
        self.device = resolve_device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.device.type != "cuda":
            for batch in self.loader:
                yield to_device(batch, self.device)
            return
        yield from self._iter_cuda()

    def _iter_cuda(self) -> Iterator[Any]:
        side = torch.cuda.Stream(device=self.device)
        it = iter(self.loader)

        def issue() -> Any:
            try:
                host_batch = next(it)
            except StopIteration:
                return _END
            with torch.cuda.stream(side):
                return to_device(host_batch, self.device)

        pending = issue()
        while pending is not _END:
            compute = torch.cuda.current_stream(self.device)
            # The compute stream must not read the batch before its copy has finished.
            compute.wait_stream(side)
            for t in iter_tensors(pending):
                if t.device.type == "cuda":
                    # Memory allocated on `side` is now also in use by `compute`: tell the
                    # caching allocator, or it may recycle it for a later copy too early.
                    t.record_stream(compute)
            current = pending
            pending = issue()  # the next copy runs on `side` while `current` is computed
            yield current


_END = object()
