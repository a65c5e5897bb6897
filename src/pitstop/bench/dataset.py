"""The bench's images: a synthetic set of real JPEG files, or a user's ImageFolder.

The synthetic set is written once into a cache folder (``~/.cache/pitstop/bench``,
``$XDG_CACHE_HOME/pitstop/bench``, or ``--data DIR``) and reused by every later run.
It lives in a sub-folder named after everything that shapes it (count, classes, sizes,
quality, version), so changing the spec never reads stale files. A ``manifest.json``,
written last, lists every file with its size and BLAKE2 digest; on each run the files
are checked against it (a few tens of milliseconds) and the folder is rebuilt when
anything is missing, truncated or altered. The set is built in a temporary folder and
renamed into place, so an interrupted build or two runs racing (``torchrun`` ranks)
never leave a half-written cache.

Images are smooth random colour fields with grain, 192-288 px on a side: they
compress like photographs (tens of KB each), not like flat colour or pure noise, so
decoding them costs what decoding real pictures of that size costs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from pitstop.errors import UsageError
from pitstop.fileio import atomic_write_json

MANIFEST = "manifest.json"
FORMAT = "pitstop-bench-synthetic"
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff"})

ProgressFn = Callable[[int, int], None]


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/pitstop/bench``, else ``~/.cache/pitstop/bench``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pitstop" / "bench"


@dataclass(frozen=True)
class SyntheticSpec:
    """Everything that determines the synthetic image set (and so its folder name)."""

    num_images: int = 1024
    num_classes: int = 10
    min_side: int = 192
    max_side: int = 288
    quality: int = 90
    seed: int = 0
    version: int = 1

    @property
    def dirname(self) -> str:
        return (f"synthetic-v{self.version}-n{self.num_images}-c{self.num_classes}-"
                f"{self.min_side}to{self.max_side}px-q{self.quality}-s{self.seed}")

    def relpath(self, index: int) -> str:
        return f"class_{self.label(index):02d}/{index:06d}.jpg"

    def label(self, index: int) -> int:
        return index % self.num_classes


def synthetic_jpeg(spec: SyntheticSpec, index: int) -> bytes:
    """The JPEG bytes of image ``index``: the same bytes for the same spec, every time."""
    rng = np.random.default_rng([spec.seed, index])
    width = int(rng.integers(spec.min_side, spec.max_side + 1))
    height = int(rng.integers(spec.min_side, spec.max_side + 1))
    # Each class has its own tint, so the task is learnable (the loss goes down).
    tint = np.random.default_rng([spec.seed, 10_000 + spec.label(index)]).random(3)
    coarse = rng.random((max(2, height // 24), max(2, width // 24), 3)) * 0.6 + tint * 0.4
    smooth = Image.fromarray((coarse * 255).astype(np.uint8)).resize(
        (width, height), Image.Resampling.BICUBIC)
    pixels = np.asarray(smooth, dtype=np.float32) + rng.normal(0.0, 14.0, (height, width, 3))
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(
        out, format="JPEG", quality=spec.quality)
    return out.getvalue()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _write_one(args: tuple[SyntheticSpec, int, str]) -> dict[str, Any]:
    spec, index, folder = args
    data = synthetic_jpeg(spec, index)
    rel = spec.relpath(index)
    path = Path(folder) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"path": rel, "label": spec.label(index), "size": len(data), "blake2b": _digest(data)}


@dataclass
class CacheStatus:
    """What :func:`prepare_synthetic` found and did."""

    folder: Path
    created: bool = False
    rebuilt_because: str | None = None
    build_seconds: float = 0.0
    total_bytes: int = 0


def check_cache(folder: Path, spec: SyntheticSpec) -> str | None:
    """``None`` when ``folder`` holds exactly the set ``spec`` describes, else why not."""
    from pitstop.schema import BadJSON, parse_json, read_bounded

    manifest_path = folder / MANIFEST
    try:  # an entry is ~120 bytes: a bigger file is not the manifest of this set
        manifest = parse_json(read_bounded(manifest_path, (1 << 16) + 512 * spec.num_images))
    except FileNotFoundError:
        return "no manifest.json (an unfinished or foreign folder)"
    except (OSError, BadJSON) as err:
        return f"manifest.json unreadable ({err})"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return "manifest.json is not a pitstop bench manifest"
    if manifest.get("spec") != asdict(spec):
        return "manifest.json describes a different image set"
    files = manifest.get("files")
    if not isinstance(files, list) or len(files) != spec.num_images:
        return f"manifest lists {len(files) if isinstance(files, list) else 'no'} files, expected {spec.num_images}"
    for entry in files:
        try:
            rel, size, digest = entry["path"], int(entry["size"]), entry["blake2b"]
            data = (folder / rel).read_bytes()
        except FileNotFoundError:
            return f"{entry.get('path')} is missing"
        except (OSError, KeyError, TypeError, ValueError) as err:
            return f"bad manifest entry or unreadable file ({err})"
        if len(data) != size:
            return f"{rel} has {len(data)} bytes, expected {size} (truncated or altered)"
        if _digest(data) != digest:
            return f"{rel} content differs from the manifest (corrupted)"
    return None


def _build(spec: SyntheticSpec, tmp: Path, progress: ProgressFn | None) -> int:
    jobs = [(spec, i, str(tmp)) for i in range(spec.num_images)]
    entries: list[dict[str, Any]] = []
    processes = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else (os.cpu_count() or 1), 8)
    if processes > 1 and spec.num_images >= 256:
        with ProcessPoolExecutor(processes) as pool:
            for entry in pool.map(_write_one, jobs, chunksize=32):
                entries.append(entry)
                if progress:
                    progress(len(entries), spec.num_images)
    else:
        for job in jobs:
            entries.append(_write_one(job))
            if progress:
                progress(len(entries), spec.num_images)
    atomic_write_json(tmp / MANIFEST, {"format": FORMAT, "spec": asdict(spec), "files": entries})
    return sum(e["size"] for e in entries)


def prepare_synthetic(root: Path, spec: SyntheticSpec, *, progress: ProgressFn | None = None,
                      ) -> CacheStatus:
    """Make sure ``root/<spec.dirname>`` holds the synthetic set; build or rebuild it if not."""
    import time

    folder = root / spec.dirname
    status = CacheStatus(folder=folder)
    if folder.exists():
        problem = check_cache(folder, spec)
        if problem is None:
            status.total_bytes = sum(p.stat().st_size for p in folder.rglob("*.jpg"))
            return status
        status.rebuilt_because = problem
        # Move the bad folder aside first: the rename is atomic, the delete is not.
        graveyard = root / f".{spec.dirname}.corrupt-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.replace(folder, graveyard)
        shutil.rmtree(graveyard, ignore_errors=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create the bench cache folder {root}: {err.strerror}; "
                         f"pass --data DIR with a writable folder") from None
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.dirname}.building-", dir=root))
    try:
        status.total_bytes = _build(spec, tmp, progress)
        try:
            os.rename(tmp, folder)
        except OSError:
            # Another process (a torchrun rank, a second terminal) finished first: use theirs
            # if it is good, else ours replaces it.
            if check_cache(folder, spec) is not None:
                shutil.rmtree(folder, ignore_errors=True)
                os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    status.created = True
    status.build_seconds = time.perf_counter() - started
    return status


def scan_image_folder(root: Path) -> tuple[list[tuple[str, int]], list[str]]:
    """The ``(path, label)`` pairs and class names of an ImageFolder (``root/<class>/<image>``)."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    items: list[tuple[str, int]] = []
    for label, name in enumerate(classes):
        for dirpath, _dirs, files in os.walk(root / name, followlinks=True):
            for file in sorted(files):
                if Path(file).suffix.lower() in IMAGE_EXTENSIONS:
                    items.append((os.path.join(dirpath, file), label))
    return items, classes


@dataclass
class DataSource:
    """The images the bench reads, and where they came from (for the report)."""

    kind: str  # "synthetic" or "imagefolder"
    folder: Path
    items: list[tuple[str, int]]
    num_classes: int
    cache: CacheStatus | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "folder": str(self.folder),
                               "images": len(self.items), "classes": self.num_classes}
        if self.cache is not None:
            out["cache"] = {"created": self.cache.created,
                            "rebuilt_because": self.cache.rebuilt_because,
                            "build_seconds": round(self.cache.build_seconds, 3),
                            "bytes": self.cache.total_bytes}
        return out


def _is_cache_root(path: Path) -> bool:
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    return not entries or any(p.name.startswith("synthetic-v") for p in entries)


def open_data(data_dir: Path | None, spec: SyntheticSpec, *, progress: ProgressFn | None = None,
              ) -> DataSource:
    """Resolve ``--data``: nothing (the default cache), a cache folder, or a user's ImageFolder."""
    root = default_cache_root() if data_dir is None else data_dir
    if data_dir is not None and data_dir.exists() and not data_dir.is_dir():
        raise UsageError(f"--data {data_dir}: not a folder; pass an ImageFolder "
                         f"(DIR/<class>/<image>.jpg) or an empty folder for the synthetic set")
    if _is_cache_root(root):
        status = prepare_synthetic(root, spec, progress=progress)
        items = [(str(status.folder / spec.relpath(i)), spec.label(i))
                 for i in range(spec.num_images)]
        notes = []
        if status.rebuilt_because:
            notes.append(f"cache was rebuilt: {status.rebuilt_because}")
        return DataSource("synthetic", status.folder, items, spec.num_classes, status, notes)
    items, classes = scan_image_folder(root)
    if not items:
        raise UsageError(f"--data {root}: no images found; expected an ImageFolder layout "
                         f"(DIR/<class>/<image>.jpg, extensions {', '.join(sorted(IMAGE_EXTENSIONS))}) "
                         f"or an empty folder for the synthetic set")
    return DataSource("imagefolder", root, items, len(classes))


class ImageDataset(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """``(path, label)`` pairs -> ``(transform(decoded image), label)``.

    An image that cannot be decoded (truncated, not an image) is reported once on
    stderr and replaced by the next readable one, so one bad file in a user's folder
    does not end the run.
    """

    def __init__(self, items: Sequence[tuple[str, int]],
                 transform: Callable[[Image.Image], torch.Tensor]) -> None:
        if not items:
            raise ValueError("ImageDataset needs at least one image")
        self.items = list(items)
        self.transform = transform
        self._reported: set[str] = set()

    def __len__(self) -> int:
        return len(self.items)

    def load(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.items[index]
        with Image.open(path) as image:
            image.load()
            return self.transform(image), label

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        for offset in range(len(self.items)):
            candidate = (index + offset) % len(self.items)
            try:
                return self.load(candidate)
            except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as err:
                path = self.items[candidate][0]
                if path not in self._reported:
                    self._reported.add(path)
                    print(f"pitstop bench: skipping unreadable image {path}: {err}",
                          file=sys.stderr, flush=True)
        raise RuntimeError("no readable image in the dataset")


class RepeatedView(torch.utils.data.Dataset[Any]):
    """``length`` samples drawn from ``base`` in order, wrapping around.

    Sized so that one epoch covers a whole measurement: the loader's workers start
    once, before the warm-up, and no epoch boundary falls inside the timed steps.
    """

    def __init__(self, base: torch.utils.data.Dataset[Any], length: int) -> None:
        self.base = base
        self.base_len = len(base)  # type: ignore[arg-type]
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self.length:
            raise IndexError(index)
        return self.base[index % self.base_len]
