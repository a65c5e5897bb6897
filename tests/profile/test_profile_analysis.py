"""The pure middle: captures → steps → facts → verdict, on hand-written captures."""

from __future__ import annotations

from typing import Any

from pitstop.profile.analysis import find_stragglers, steps_from_capture, summarize_rank
from pitstop.profile.facts import build_facts
from pitstop.profile.probe import largest_input
from pitstop.profile.verdict import decide

MS = 1_000_000


def capture(**over: Any) -> dict[str, Any]:
    cap: dict[str, Any] = {"pid": 100, "rank": None, "warmup": 1, "steps": 3, "boundary": "optimizer",
                           "start_ns": 0, "boundaries": [10 * MS, 20 * MS, 30 * MS, 40 * MS],
                           "intervals": {"data": [], "forward": [], "backward": [], "optimizer": [],
                                         "h2d": [], "collective": []},
                           "worker_pids": [], "status": "complete"}
    cap.update(over)
    return cap


def test_phases_are_exclusive_and_nested_copies_win() -> None:
    cap = capture(intervals={
        "data": [[0, 4 * MS], [10 * MS, 16 * MS]],
        "forward": [[4 * MS, 7 * MS], [16 * MS, 18 * MS]],
        "h2d": [[4 * MS, 5 * MS]],  # a copy inside forward counts as h2d
        "backward": [[7 * MS, 9 * MS], [7 * MS, 9 * MS]],  # nested wrappers: counted once
        "optimizer": [[9 * MS, 10 * MS]],
    })
    steps = steps_from_capture(cap)
    assert [s.kind for s in steps] == ["warmup", "measured", "measured", "measured"]
    first = steps[0].phases_ms
    assert first == {"data": 4.0, "collective": 0.0, "h2d": 1.0, "optimizer": 1.0, "backward": 2.0,
                     "forward": 2.0, "other": 0.0}
    assert steps[1].phases_ms["data"] == 6.0 and steps[1].phases_ms["other"] == 2.0
    assert abs(sum(steps[1].phases_ms.values()) - steps[1].ms) < 1e-9


def test_dataloader_boundaries_without_optimizer() -> None:
    cap = capture(boundary="dataloader", boundaries=[],
                  intervals={"data": [[i * 5 * MS, i * 5 * MS + MS] for i in range(6)]})
    steps = steps_from_capture(cap)
    assert len(steps) == 4 and all(abs(s.ms - 5.0) < 1e-9 for s in steps)
    assert all(s.phases_ms["data"] == 1.0 for s in steps)


def _rank(rank: int, work_ms: float, n: int = 6, ddp: bool = True) -> dict[str, Any]:
    bounds = [(i + 1) * 100 * MS for i in range(n + 1)]
    data = [[b - 100 * MS, b - 100 * MS + int(work_ms * MS)] for b in bounds]
    back = [[b - 100 * MS + int(work_ms * MS), b - 1 * MS] for b in bounds]
    return capture(pid=rank + 10, rank=rank, warmup=1, steps=n, boundaries=bounds, ddp=ddp,
                   start_ns=0, intervals={"data": data, "backward": back})


def test_straggler_is_the_rank_with_more_own_work() -> None:
    ranks = [summarize_rank(_rank(0, 10)), summarize_rank(_rank(1, 40)), summarize_rank(_rank(2, 11))]
    found = find_stragglers(ranks)
    assert [s.rank for s in found] == [1]
    assert found[0].slower_share == 1.0
    assert not find_stragglers([summarize_rank(_rank(0, 10)), summarize_rank(_rank(1, 10.5))])


def _facts(cap: dict[str, Any], probe: dict[str, Any] | None = None,
           samples: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if probe is not None:
        cap["probe"] = probe
    rank = summarize_rank(cap)
    return build_facts([cap], [rank], samples or [], cpu_count=8)


def test_verdict_input_bound_vs_io_bound_from_loader_behaviour() -> None:
    cap = capture(warmup=0, intervals={"data": [[0, 8 * MS], [10 * MS, 18 * MS], [20 * MS, 28 * MS],
                                                [30 * MS, 38 * MS]]}, worker_pids=[7, 8])
    busy = [{"t": t / 1000, "procs": {"7": {"ppid": 100, "cpu": 0.95, "state": "running", "read_bps": 0},
                                      "8": {"ppid": 100, "cpu": 0.9, "state": "running", "read_bps": 0}}}
            for t in range(1, 40, 2)]
    v = decide(_facts(cap, samples=busy))
    assert v.name == "input-bound" and "PF001" in {f.code for f in v.findings}
    blocked = [{"t": t / 1000, "procs": {"7": {"ppid": 100, "cpu": 0.02, "state": "sleeping", "read_bps": 3e6},
                                         "8": {"ppid": 100, "cpu": 0.03, "state": "sleeping", "read_bps": 3e6}}}
               for t in range(1, 40, 2)]
    v = decide(_facts(dict(cap), samples=blocked))
    assert v.name == "io-bound" and {"PF001", "PF002"} <= {f.code for f in v.findings}
    iowait = [{"t": t / 1000, "iowait_pct": 35.0, "procs": {}} for t in range(1, 40, 2)]
    assert decide(_facts(dict(cap), samples=iowait)).name == "io-bound"


def _compute_cap() -> dict[str, Any]:
    return capture(warmup=3, steps=3, boundaries=[i * 10 * MS for i in range(1, 7)],
                   intervals={"forward": [[i * 10 * MS + MS, i * 10 * MS + 5 * MS] for i in range(6)],
                              "backward": [[i * 10 * MS + 5 * MS, i * 10 * MS + 9 * MS] for i in range(6)]})


def test_verdict_host_memory_compute_from_probe() -> None:
    host = {"ops": 3000, "ops_us": 6000.0, "tiny_ops_us": 5800.0, "matmul_us": 0.0, "kernels": 0,
            "kernel_us": 0.0, "kernel_matmul_us": 0.0, "top": []}
    assert decide(_facts(_compute_cap(), host)).name == "host-bound"
    memory = {**host, "ops": 40, "ops_us": 9000.0, "tiny_ops_us": 0.0, "matmul_us": 1000.0}
    assert decide(_facts(_compute_cap(), memory)).name == "memory-bound"
    compute = {**memory, "matmul_us": 8000.0}
    v = decide(_facts(_compute_cap(), compute))
    assert v.name == "compute-bound"
    assert any("pitstop bench" in f.text for f in v.fixes)


def test_no_steps_is_unknown_with_pf011() -> None:
    v = decide(build_facts([], [], []))
    assert v.name == "unknown" and [f.code for f in v.findings] == ["PF011"]


def test_largest_input_handles_tensor_lists() -> None:
    assert largest_input([[4, 8], [8], []]) == 32
    assert largest_input([[[1024, 512], [1024]], [[3]]]) == 524288
    assert largest_input([]) is None
