"""to_device on nested batches; DevicePrefetcher on CPU."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import torch

from pitstop.train import DevicePrefetcher, to_device

Pair = namedtuple("Pair", ["image", "label"])


@dataclass
class Sample:
    pixels: torch.Tensor
    meta: dict[str, object]
    note: str = "x"
    cache: list[int] = field(default_factory=list, init=False)


def nested() -> dict[str, object]:
    return {
        "pair": Pair(torch.randn(2, 3), torch.tensor([1, 2])),
        "list": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), "text", 3, None)],
        "sample": Sample(torch.rand(4), {"mask": torch.ones(4, dtype=torch.bool), "id": 7}),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
    }


def assert_same_structure(a: object, b: object, *, same_values: bool) -> None:
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.shape == b.shape and a.dtype == b.dtype
        if same_values:
            assert torch.equal(a.cpu(), b.cpu())
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            assert_same_structure(a[k], b[k], same_values=same_values)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same_structure(x, y, same_values=same_values)
    elif isinstance(a, Sample):
        assert isinstance(b, Sample)
        assert_same_structure(a.pixels, b.pixels, same_values=same_values)
        assert_same_structure(a.meta, b.meta, same_values=same_values)
        assert a.note == b.note
    else:
        assert a == b


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
    assert list(pre) == got or len(list(pre)) == 5  # iterable more than once


def test_packed_sequence_keeps_batch_sizes_on_the_cpu() -> None:
    from torch.nn.utils.rnn import pack_padded_sequence

    packed = pack_padded_sequence(torch.randn(3, 4, 2), torch.tensor([4, 2, 1]), batch_first=True)
    moved = to_device({"seq": packed}, "meta")["seq"]
    assert type(moved) is type(packed)
    assert moved.data.device.type == "meta" and moved.batch_sizes.device.type == "cpu"
