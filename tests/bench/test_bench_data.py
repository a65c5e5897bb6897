"""The synthetic JPEG cache, the user ImageFolder path, and the transforms."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pytest
import torch
from _bench_helpers import TINY_SPEC
from PIL import Image

from pitstop.bench.dataset import (
    ImageDataset,
    RepeatedView,
    SyntheticSpec,
    check_cache,
    open_data,
    prepare_synthetic,
    synthetic_jpeg,
)
from pitstop.bench.transforms import TrainTransform, random_crop_box
from pitstop.errors import UsageError


def _jpeg_paths(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.jpg"))


def test_synthetic_images_are_real_deterministic_jpegs() -> None:
    spec = SyntheticSpec(num_images=4, min_side=40, max_side=60)
    a, b = synthetic_jpeg(spec, 2), synthetic_jpeg(spec, 2)
    assert a == b
    assert a != synthetic_jpeg(spec, 3)
    with Image.open(io.BytesIO(a)) as image:
        assert image.format == "JPEG"
        assert 40 <= image.width <= 60 and 40 <= image.height <= 60
        image.load()


def test_cache_is_built_once_then_reused(tmp_path: Path) -> None:
    first = prepare_synthetic(tmp_path, TINY_SPEC)
    assert first.created and first.rebuilt_because is None
    files = _jpeg_paths(first.folder)
    assert len(files) == TINY_SPEC.num_images
    stamps = {p: p.stat().st_mtime_ns for p in files}
    second = prepare_synthetic(tmp_path, TINY_SPEC)
    assert not second.created and second.folder == first.folder
    assert {p: p.stat().st_mtime_ns for p in _jpeg_paths(second.folder)} == stamps
    # no temporary build folders left behind
    assert [p.name for p in tmp_path.iterdir()] == [TINY_SPEC.dirname]


def test_truncated_jpeg_is_detected_and_the_cache_rebuilt(tmp_path: Path) -> None:
    folder = prepare_synthetic(tmp_path, TINY_SPEC).folder
    victim = _jpeg_paths(folder)[5]
    good = victim.read_bytes()
    victim.write_bytes(good[: len(good) // 3])
    problem = check_cache(folder, TINY_SPEC)
    assert problem is not None and "truncated" in problem
    status = prepare_synthetic(tmp_path, TINY_SPEC)
    assert status.created and status.rebuilt_because == problem
    assert victim.read_bytes() == good
    assert check_cache(folder, TINY_SPEC) is None


@pytest.mark.parametrize("damage", ["flip-bytes", "delete-file", "delete-manifest", "bad-manifest",
                                    "deep-manifest", "huge-manifest"])
def test_other_corruption_is_detected(tmp_path: Path, damage: str) -> None:
    folder = prepare_synthetic(tmp_path, TINY_SPEC).folder
    victim = _jpeg_paths(folder)[0]
    if damage == "flip-bytes":
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
    elif damage == "delete-file":
        victim.unlink()
    elif damage == "delete-manifest":
        (folder / "manifest.json").unlink()
    elif damage == "deep-manifest":  # was a RecursionError out of `pitstop bench --data`
        (folder / "manifest.json").write_text("[" * 20_000 + "]" * 20_000)
    elif damage == "huge-manifest":  # never read whole into memory
        (folder / "manifest.json").write_text(" " * (4 << 20) + "{}")
    else:
        (folder / "manifest.json").write_text("{not json")
    assert check_cache(folder, TINY_SPEC) is not None
    assert prepare_synthetic(tmp_path, TINY_SPEC).rebuilt_because is not None
    assert check_cache(folder, TINY_SPEC) is None


def _image_folder(root: Path, *, truncate_one: bool = False) -> Path:
    for label in ("cats", "dogs"):
        (root / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (50 + i, 40), (40 * i, 100, 200)).save(root / label / f"{i}.jpg")
    if truncate_one:
        bad = root / "cats" / "1.jpg"
        bad.write_bytes(bad.read_bytes()[:60])
    return root


def test_user_image_folder_is_read_not_written(tmp_path: Path) -> None:
    root = _image_folder(tmp_path / "mine")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    source = open_data(root, TINY_SPEC)
    assert source.kind == "imagefolder" and source.num_classes == 2 and len(source.items) == 6
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert {label for _, label in source.items} == {0, 1}


def test_truncated_user_image_is_skipped_not_fatal(tmp_path: Path,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    root = _image_folder(tmp_path / "mine", truncate_one=True)
    source = open_data(root, TINY_SPEC)
    dataset = ImageDataset(source.items, TrainTransform(16))
    bad_index = next(i for i, (p, _) in enumerate(source.items) if p.endswith("cats/1.jpg"))
    image, label = dataset[bad_index]
    assert image.shape == (3, 16, 16)
    assert label == source.items[bad_index + 1][1]  # the next readable image stands in
    assert "skipping unreadable image" in capfd.readouterr().err
    assert all(dataset[i][0].shape == (3, 16, 16) for i in range(len(dataset)))


def test_data_option_rejects_what_is_neither_cache_nor_imagefolder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UsageError, match="no images found"):
        open_data(tmp_path, TINY_SPEC)
    with pytest.raises(UsageError, match="not a folder"):
        open_data(tmp_path / "notes.txt", TINY_SPEC)


def test_empty_data_folder_gets_the_synthetic_set(tmp_path: Path) -> None:
    source = open_data(tmp_path, TINY_SPEC)
    assert source.kind == "synthetic" and len(source.items) == TINY_SPEC.num_images
    assert all(os.path.exists(p) for p, _ in source.items)


def test_repeated_view_covers_the_measurement_and_wraps() -> None:
    base = list(range(5))
    view = RepeatedView(base, 12)  # type: ignore[arg-type]
    assert len(view) == 12
    assert [view[i] for i in range(12)] == base * 2 + base[:2]
    with pytest.raises(IndexError):
        view[12]


def test_transform_output_is_normalised_float_at_the_crop_size() -> None:
    image = Image.new("L", (70, 50), 128)  # grey, not RGB: must be converted
    out = TrainTransform(24)(image)
    assert out.shape == (3, 24, 24) and out.dtype == torch.float32 and out.is_contiguous()
    # grey 128 normalised with ImageNet statistics: (128/255 - mean) / std per channel
    expected = torch.tensor([(128 / 255 - m) / s for m, s in
                             zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), strict=True)])
    assert torch.allclose(out.mean(dim=(1, 2)), expected, atol=1e-4)


def test_transform_randomness_follows_the_seed() -> None:
    image = Image.frombytes("RGB", (64, 48), bytes(range(256)) * 36)
    random.seed(1)
    a = TrainTransform(16)(image)
    random.seed(1)
    b = TrainTransform(16)(image)
    c = TrainTransform(16)(image)
    assert torch.equal(a, b) and not torch.equal(b, c)


def test_crop_boxes_stay_inside_the_image() -> None:
    random.seed(0)
    for _ in range(200):
        left, top, right, bottom = random_crop_box(64, 40)
        assert 0 <= left < right <= 64 and 0 <= top < bottom <= 40
