"""Running the linter's passes on several processes: a fork pool whose workers collect
their garbage once per chunk, and a pause of the cyclic collector while linting (an AST
is a tree, freed by reference counting; its nodes only trigger collections that find
nothing)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

_WORKER = False  # this process is a pool worker


def _worker_start() -> None:
    """A pool worker collects its cyclic garbage once per chunk, itself (see
    :func:`collect_chunk`), not on the collector's schedule."""
    global _WORKER
    _WORKER = True
    gc.disable()


def collect_chunk() -> None:
    """In a pool worker, after a chunk: free the chunk's cycles, then freeze what is left
    (the worker's caches), so that the next chunk's collection looks only at what that
    chunk made. On the collector's own schedule, its full passes walked every cached
    result again and again (about a fifth of the workers' CPU time on torch's files)."""
    if _WORKER:
        gc.collect()
        gc.freeze()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while linting: an AST is a tree (no cycles,
    freed by reference counting), but its hundred thousand nodes keep triggering
    collections that find nothing -- about 14% of the CPU time on torch's files."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _pool(jobs: int):  # type: ignore[no-untyped-def]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    try:
        return multiprocessing.get_context(method).Pool(jobs, initializer=_worker_start)
    except OSError:  # no /dev/shm semaphores (some containers): lint in this process
        return None


def map_chunks(fn: Callable[[Any], list[Any]], items: list[Any], jobs: int,
         progress: Callable[[int], None] | None, *, spread: bool = False) -> list[Any]:
    """``fn`` over chunks of ``items`` on ``jobs`` processes (in this one when few, unless
    ``spread``: the items are big); the results in the order of ``items``."""
    if jobs <= 1 or len(items) < (2 if spread else 16):
        out: list[Any] = []
        for item in items:
            with gc_paused():
                out.extend(fn([item]))
            if progress:
                progress(1)
        return out
    # Biggest first, in small chunks: the pool balances the tail.
    size = max(1, min(32, len(items) // (jobs * 8)))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    pool = _pool(jobs)
    if pool is None:
        return map_chunks(fn, items, 1, progress)
    results: list[Any] = []
    try:
        # in order: a big module's pieces are merged first piece first
        for part in pool.imap(fn, chunks):
            results.extend(part)
            if progress:
                progress(len(part))
        # the workers end by themselves once the work is done: terminate() (signals sent
        # to idle workers) now and then left one blocked on the task queue's lock, and
        # the run waited for it forever
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return results
