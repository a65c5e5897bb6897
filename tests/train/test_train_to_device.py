"""to_device on nested batches; DevicePrefetcher on CPU."""

from __future__ import annotations

import torch
from _train_helpers import Pair, assert_same_structure, nested

from pitstop.train import DevicePrefetcher, to_device


def test_round_trip_keeps_structure_types_and_values() -> None:
    batch = nested()
    on_meta = to_device(batch, "meta")
    assert_same_structure(batch, on_meta, same_values=False)
    assert all(t.device.type == "meta" for t in (on_meta["pair"].image, on_meta["sample"].pixels,
                                                  on_meta["sample"].meta["mask"], on_meta["scalar"]))
    assert isinstance(on_meta["pair"], Pair)
    back = to_device(batch, torch.device("cpu"))
    assert_same_structure(batch, back, same_values=True)


def test_tensors_already_there_are_not_copied() -> None:
    batch = nested()
    back = to_device(batch, "cpu")
    assert back["pair"].image is batch["pair"].image


def test_prefetcher_on_cpu_passes_batches_through_in_order() -> None:
    data = [(torch.full((2,), float(i)), torch.tensor([i])) for i in range(5)]
    pre = DevicePrefetcher(data, "cpu")
    assert len(pre) == 5
    got = list(pre)
    assert [int(y) for _, y in got] == [0, 1, 2, 3, 4]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(data, got, strict=True))
    again = list(pre)  # iterable more than once (a new pass over the loader)
    assert [int(y) for _, y in again] == [0, 1, 2, 3, 4]


def test_packed_sequence_keeps_batch_sizes_on_the_cpu() -> None:
    from torch.nn.utils.rnn import pack_padded_sequence

    packed = pack_padded_sequence(torch.randn(3, 4, 2), torch.tensor([4, 2, 1]), batch_first=True)
    moved = to_device({"seq": packed}, "meta")["seq"]
    assert type(moved) is type(packed)
    assert moved.data.device.type == "meta" and moved.batch_sizes.device.type == "cpu"
