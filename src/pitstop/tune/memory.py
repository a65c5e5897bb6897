"""Will a loader trial fit in memory? Checked before a trial starts, never after.

A DataLoader with ``w`` workers and ``prefetch_factor`` ``p`` keeps up to ``w x p``
batches in flight. Each one a worker makes is handed over through shared memory
(``/dev/shm``), and with ``pin_memory`` the main process makes a page-locked copy of
it. Every worker also holds its own private memory (its copy of the dataset's state,
decode buffers): measured on the first trial with workers (psutil USS), assumed
:data:`DEFAULT_WORKER_BYTES` until then.

Two limits, both from what the machine reports when the tune starts:

* the batches in flight must fit the bound ``pitstop.train.loader`` uses for its own
  prefetch depth (:func:`pitstop.train.loader.batch_memory_budget`: a share of free
  ``/dev/shm`` and of available RAM), so the tuner never picks what the loader would
  refuse;
* batches, pinned copies and the workers' private memory together must stay under
  :data:`RAM_LIMIT` of available RAM: a trial that would exhaust RAM is never started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pitstop.train.loader import MachineFacts, batch_memory_budget

DEFAULT_WORKER_BYTES = 64 * 2**20
RAM_LIMIT = 0.8


def mib(n: float) -> str:
    """Bytes for people: KiB below a MiB, MiB below a GiB, else GiB."""
    if n < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    return f"{n / 2**20:,.1f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


@dataclass(frozen=True)
class MemoryEstimate:
    """What one loader configuration is expected to hold, and whether that fits."""

    in_flight: int
    batch_bytes: int
    shm_bytes: int
    ram_bytes: int
    fits: bool
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {"batches_in_flight": self.in_flight, "batch_bytes": self.batch_bytes,
                "shm_bytes": self.shm_bytes, "ram_bytes": self.ram_bytes, "fits": self.fits,
                "why": self.why}


def estimate(*, workers: int, prefetch: int | None, pin_memory: bool, batch_bytes: int,
             worker_bytes: int, facts: MachineFacts) -> MemoryEstimate:
    """The memory a configuration needs against what ``facts`` says is free."""
    in_flight = workers * (prefetch or 0) if workers > 0 else 1
    shm = in_flight * batch_bytes if workers > 0 else 0
    pinned = in_flight * batch_bytes if pin_memory else 0
    ram = shm + pinned + workers * worker_bytes + (batch_bytes if workers == 0 else 0)
    if workers == 0:
        return MemoryEstimate(in_flight, batch_bytes, 0, ram, True,
                              "no worker processes: one batch at a time in this process")
    bound = batch_memory_budget(facts)
    if bound is not None and in_flight * batch_bytes > bound[0]:
        return MemoryEstimate(in_flight, batch_bytes, shm, ram, False,
                              f"{in_flight} batches in flight x {mib(batch_bytes)} = "
                              f"{mib(in_flight * batch_bytes)} > {bound[1]}")
    if facts.ram_available is not None and ram > facts.ram_available * RAM_LIMIT:
        return MemoryEstimate(in_flight, batch_bytes, shm, ram, False,
                              f"{mib(ram)} (batches{', pinned copies' if pin_memory else ''} and "
                              f"{workers} worker(s) x {mib(worker_bytes)}) > "
                              f"{int(RAM_LIMIT * 100)}% of available RAM "
                              f"({mib(facts.ram_available)})")
    where = bound[1] if bound is not None else "no memory figures readable"
    return MemoryEstimate(in_flight, batch_bytes, shm, ram, True,
                          f"{in_flight} x {mib(batch_bytes)} in flight fits {where}")
