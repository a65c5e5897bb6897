"""Under ``torchrun``: every rank runs the same model trials and takes the same decisions.

Each decision of the model search (a trial failed or ran out of memory, which rate is
faster, whether the budget affords another trial or repeat, whether a loss drifted)
is taken on numbers reduced over all ranks first: a failure or out-of-memory error on
any rank is everyone's, the slowest rank's rate is the group's (a data-parallel step
waits for it), the largest elapsed time is the clock. The ranks therefore walk the
same path through the search and end with one answer.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from pitstop.bench.distributed import DistInfo, Group, device_for

_OPS = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "sum": dist.ReduceOp.SUM}


class RankAgreement:
    """The process group (the bench's: NCCL or gloo, plus gloo for host values)."""

    def __init__(self, info: DistInfo, device: torch.device) -> None:
        self.info = info
        self.device = device_for(info, device)
        self.group = Group(info, self.device)

    def reduce(self, values: list[float], op: str) -> list[float]:
        """``values`` reduced element-wise over all ranks with ``op`` (max, min, sum)."""
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=_OPS[op], group=self.group.host)
        return [float(v) for v in t.tolist()]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a rank that failed: nothing to wait for
            self.group.barrier()
        self.group.close()

    def __repr__(self) -> str:
        return f"RankAgreement(rank {self.info.rank} of {self.info.world_size})"


__all__ = ["DistInfo", "RankAgreement"]
