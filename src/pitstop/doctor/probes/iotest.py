"""``--io``: random reads under the data path, the way DataLoader workers read a dataset.

Reads existing files (never writes to them). Only when the data path holds too little
to read from does it create one temp file beside the data, read it, and remove it.
O_DIRECT bypasses the page cache where the filesystem allows it; elsewhere the pages
of the file are dropped first with ``posix_fadvise(DONTNEED)`` and the result says
that the cache may still have helped.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import random

from pitstop.doctor.probes import ProbeContext

BLOCK_SIZES = (4096, 131072)
MIN_BYTES = 64 << 20  # below this much existing data, measure a temp file of this size
SCAN_SECONDS = 0.5
MAX_FILES = 5000


def _candidate_files(root: str, deadline: float) -> list[tuple[str, int]]:
    files: list[tuple[str, int]] = []
    stack = [root]
    while stack and len(files) < MAX_FILES and time.monotonic() < deadline:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            size = entry.stat(follow_symlinks=False).st_size
                            if size >= 4096:
                                files.append((entry.path, size))
                    except OSError:
                        continue
        except OSError:
            continue
    return files


def _open(path: str) -> tuple[int, bool]:
    flag = getattr(os, "O_DIRECT", 0)
    if flag:
        try:
            return os.open(path, os.O_RDONLY | flag), True
        except OSError:
            pass
    fd = os.open(path, os.O_RDONLY)
    with contextlib.suppress(OSError, AttributeError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd, False


def measure(files: list[tuple[str, int]], block: int, seconds: float,
            rng: random.Random) -> dict[str, Any]:
    """Queue-depth-1 random reads of ``block`` bytes at aligned offsets for ``seconds``."""
    import mmap

    usable = [(p, s) for p, s in files if s >= block]
    if not usable:
        return {"error": f"no file of at least {block} bytes"}
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT requires
    fds: dict[str, tuple[int, bool]] = {}
    reads = 0
    nbytes = 0
    direct_all = True
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            path, size = usable[rng.randrange(len(usable))]
            if path not in fds:
                if len(fds) > 256:
                    for fd, _ in fds.values():
                        os.close(fd)
                    fds.clear()
                fds[path] = _open(path)
            fd, direct = fds[path]
            direct_all &= direct
            offset = rng.randrange(0, max(1, size - block + 1)) // 4096 * 4096
            try:
                n = os.preadv(fd, [buf], offset)
            except OSError:
                # O_DIRECT can refuse a read near the end of a file; count nothing.
                continue
            reads += 1
            nbytes += n
        elapsed = time.perf_counter() - t0
    finally:
        for fd, _ in fds.values():
            os.close(fd)
        buf.close()
    return {
        "block_bytes": block,
        "reads": reads,
        "seconds": round(elapsed, 3),
        "iops": round(reads / elapsed, 1) if elapsed else None,
        "mb_per_s": round(nbytes / elapsed / 1e6, 1) if elapsed else None,
        "o_direct": direct_all,
        "queue_depth": 1,
    }


def _temp_file(directory: str) -> tuple[str, int | None]:
    """A 64 MiB file of random bytes in ``directory`` that has no name there: the path to
    read it by and the descriptor that keeps it alive (``None``: a named file that the
    caller removes).

    O_TMPFILE makes the file without a name; where the filesystem lacks it, a named temp
    file is unlinked right after it is made. Either way nothing is left in the user's
    folder, not even after SIGKILL: the kernel frees the file when the descriptor
    closes. Only without /proc (no way to reopen the descriptor for O_DIRECT) does a
    named file stay until the measurement ends.
    """
    import tempfile

    fd: int | None = None
    if hasattr(os, "O_TMPFILE"):
        with contextlib.suppress(OSError):  # EOPNOTSUPP, EISDIR (old kernels), EINVAL
            fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
    name = None
    if fd is None:
        fd, name = tempfile.mkstemp(prefix=".pitstop-io-", suffix=".tmp", dir=directory)
    try:
        chunk = os.urandom(1 << 20)
        for _ in range(MIN_BYTES >> 20):
            os.write(fd, chunk)
        os.fsync(fd)
        reopen = f"/proc/self/fd/{fd}"
        if name is None and not os.path.exists(reopen):
            raise OSError("cannot reopen an O_TMPFILE file without /proc")
    except BaseException:
        os.close(fd)
        if name is not None:
            with contextlib.suppress(OSError):
                os.unlink(name)
        raise
    if not os.path.exists(reopen):  # a named file, read by its name, removed by the caller
        os.close(fd)
        assert name is not None  # an O_TMPFILE file without /proc raised above
        return name, None
    if name is not None:
        os.unlink(name)
    return reopen, fd


def run_io_test(data_path: str, seconds: float,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure 4 KiB and 128 KiB random reads under ``data_path`` (bounded to ``seconds``)."""
    directory = data_path if os.path.isdir(data_path) else os.path.dirname(data_path)
    files = _candidate_files(directory, time.monotonic() + SCAN_SECONDS)
    total = sum(s for _, s in files)
    temp = None
    keep_alive: int | None = None
    out: dict[str, Any] = {"measured": True, "files_sampled": len(files), "bytes_sampled": total}
    try:
        if total < MIN_BYTES:
            if progress:
                progress("writing a 64 MiB temp file (removed afterwards)")
            try:
                path, keep_alive = _temp_file(directory)
            except OSError as err:
                if not files:
                    return {"measured": False, "error": f"no readable files under {directory} "
                            f"and cannot create a temp file there: {err}"}
            else:
                temp = path if keep_alive is None else None
                files = [(path, MIN_BYTES)]
                out["temp_file"] = True
        import random

        rng = random.Random(0)
        per = max(0.2, seconds / len(BLOCK_SIZES))
        results = []
        for block in BLOCK_SIZES:
            if progress:
                progress(f"random {block // 1024} KiB reads for {per:.1f} s")
            results.append(measure(files, block, per, rng))
        out["results"] = results
    finally:  # also on Ctrl-C and SIGTERM (pitstop.signals)
        if keep_alive is not None:
            os.close(keep_alive)
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    return out


def probe(ctx: ProbeContext) -> dict[str, Any]:
    if not ctx.measure_io:
        return {"measured": False, "reason": "not measured (run with --io)"}
    if not ctx.live:
        rec = ctx.recorded("io")
        if rec is None:
            return {"measured": False, "reason": "no io recording in this sysroot"}
        return dict(rec)
    return run_io_test(ctx.data_path, ctx.io_seconds)
