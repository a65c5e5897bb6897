"""The pure middle: captures → steps → facts → verdict, on hand-written captures."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pitstop.profile.analysis import (
    find_stragglers,
    phases_between,
    steps_from_capture,
    summarize_rank,
)
from pitstop.profile.attribution import attribute_other, call_site, site_category
from pitstop.profile.contention import contention_facts
from pitstop.profile.facts import build_facts
from pitstop.profile.probe import largest_input
from pitstop.profile.verdict import decide

MS = 1_000_000


def capture(**over: Any) -> dict[str, Any]:
    cap: dict[str, Any] = {"schema": 2, "pid": 100, "rank": None, "warmup": 1, "steps": 3,
                           "boundary": "optimizer", "start_ns": 0,
                           "boundaries": [10 * MS, 20 * MS, 30 * MS, 40 * MS],
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


def test_an_lbfgs_closure_inside_the_optimizer_step_is_forward_and_backward() -> None:
    # optimizer.step(closure) from 0 to 10 ms; the closure's forward 1-4, backward 4-8.
    cap = capture(warmup=0, steps=1, boundaries=[10 * MS], intervals={
        "optimizer": [[0, 10 * MS]], "forward": [[1 * MS, 4 * MS]], "backward": [[4 * MS, 8 * MS]]})
    phases = steps_from_capture(cap)[0].phases_ms
    assert phases["forward"] == 3.0 and phases["backward"] == 4.0 and phases["optimizer"] == 3.0


def test_dataloader_steps_start_at_each_batch() -> None:
    # schema 2: step 0 starts at the first batch (start_ns), each later batch ends a step.
    cap = capture(boundary="dataloader", start_ns=0, boundaries=[i * 5 * MS for i in range(1, 5)],
                  intervals={"data": [[i * 5 * MS, i * 5 * MS + MS] for i in range(6)]})
    steps = steps_from_capture(cap)
    assert len(steps) == 4 and all(abs(s.ms - 5.0) < 1e-9 for s in steps)
    assert all(s.phases_ms["data"] == 1.0 for s in steps)


def test_phases_between_an_arbitrary_window() -> None:
    cap = capture(intervals={"forward": [[0, 6 * MS]], "backward": [[6 * MS, 9 * MS]]})
    assert phases_between(cap, 2 * MS, 8 * MS) == {
        "data": 0.0, "collective": 0.0, "h2d": 0.0, "optimizer": 0.0, "backward": 2.0,
        "forward": 4.0, "other": 0.0}


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
           samples: list[dict[str, Any]] | None = None, cpu_count: int = 8) -> dict[str, Any]:
    if probe is not None:
        cap["probe"] = probe
        cap.setdefault("probe_step", 2)
    rank = summarize_rank(cap)
    return build_facts([cap], [rank], samples or [], cpu_count=cpu_count)


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
    # steps of 10 ms: forward 1-5, backward 5-9 ms; the probe covers step 2 (20-30 ms)
    return capture(warmup=3, steps=3, boundaries=[i * 10 * MS for i in range(1, 7)],
                   intervals={"forward": [[i * 10 * MS + MS, i * 10 * MS + 5 * MS] for i in range(6)],
                              "backward": [[i * 10 * MS + 5 * MS, i * 10 * MS + 9 * MS] for i in range(6)]})


def _probe(ops_us: float, tiny_us: float, matmul_us: float, *, ops: int = 40, conv_us: float = 0.0,
           overhead_us: float = 0.0) -> dict[str, Any]:
    half = {"ops": ops // 2, "ops_us": ops_us / 2, "tiny_ops_us": tiny_us / 2, "matmul_us": matmul_us / 2,
            "conv_us": conv_us / 2, "overhead_us": overhead_us / 2}
    return {"kind": "dispatch", "ops": ops, "phases": {"forward": half, "backward": dict(half)},
            "top": [], "sites": [], "start_ns": 20 * MS, "end_ns": 30 * MS, "budget_hit": None}


def test_verdict_host_memory_compute_from_probe() -> None:
    # compute in the probed step: 8 ms of forward+backward
    assert decide(_facts(_compute_cap(), _probe(6000, 5800, 0, ops=3000))).name == "host-bound"
    assert decide(_facts(_compute_cap(), _probe(7500, 0, 1000))).name == "memory-bound"
    v = decide(_facts(_compute_cap(), _probe(7500, 0, 7000)))
    assert v.name == "compute-bound"
    assert any("pitstop bench" in f.text for f in v.fixes)


def test_the_probes_own_cost_is_not_host_overhead() -> None:
    # 6.5 ms of big operators in 8 ms of compute, 1.5 ms of it the probe's own calls:
    # without them overhead is 0 %, with them counted it would be 19 %.
    facts = _facts(_compute_cap(), _probe(6500, 0, 6000, overhead_us=1500))
    assert facts["probe"]["host_overhead_share"] == 0.0


def test_channels_last_only_for_conv_nets_and_precision_quoted_from_the_ab() -> None:
    facts = _facts(_compute_cap(), _probe(7500, 0, 7000, conv_us=6000))
    facts["precision_ab"] = {"dtype": "bf16", "speedup": 1.31, "fp32_ms": 13.1, "low_ms": 10.0,
                             "what": "forward of the last batch"}
    v = decide(facts)
    texts = " ".join(f.text + " " + f.why for f in v.fixes)
    assert "channels_last" in texts and "measured 1.31x here" in texts
    assert "2-8" not in texts and "2–8" not in texts
    lstm = _facts(_compute_cap(), _probe(7500, 0, 7000))  # matmuls, no convolutions
    lstm["precision_ab"] = {"dtype": "bf16", "speedup": 0.72, "fp32_ms": 7.2, "low_ms": 10.0}
    v = decide(lstm)
    texts = " ".join(f.text + " " + f.why for f in v.fixes)
    assert "channels_last" not in texts and "autocast" not in texts
    assert any("measured 0.72x" in n for n in v.notes)


def _stack_cap(loop_line: int, sites: list[dict[str, Any]]) -> dict[str, Any]:
    """A step of 10 ms, 8 of them outside the hooked calls, sampled every ms."""
    main = {"file": "/src/train.py", "line": loop_line, "func": "main", "first": 30}
    frames = [main, {"file": "/src/train.py", "line": 12, "func": "get_batch", "first": 10},
              {"file": "/src/train.py", "line": 21, "func": "save_ckpt", "first": 20},
              {"file": "/venv/site-packages/torch/serialization.py", "line": 600, "func": "save", "first": 590}]
    chains = [{"user": [1, 0], "lib": None}, {"user": [2, 0], "lib": 3}]
    t = [i * MS + MS // 2 for i in range(40)]
    k = [0 if i % 10 < 6 else (1 if i % 10 < 8 else -5) for i in range(40)]
    return capture(warmup=0, steps=4, intervals={"forward": [[i * 10 * MS + 8 * MS, i * 10 * MS + 9 * MS] for i in range(4)],
                                                 "backward": [[i * 10 * MS + 9 * MS, (i + 1) * 10 * MS] for i in range(4)]},
                   loop_frames={"backward": [main]},
                   probe={"kind": "dispatch", "ops": 0, "phases": {}, "sites": sites,
                          "start_ns": 0, "end_ns": 0},
                   stacks={"t": t, "k": k, "chains": chains, "frames": frames, "interval_s": 0.001})


def test_stack_samples_name_the_input_function_and_checkpointing() -> None:
    made_inputs = [{"file": "/src/train.py", "line": 12, "func": "get_batch", "first": 10, "ops": 3,
                    "grad_ops": 0, "update_ops": 0, "produced_input": True,
                    "chain": [{"file": "/src/train.py", "line": 12, "func": "get_batch", "first": 10}]}]
    cap = _stack_cap(33, made_inputs)
    att = attribute_other(cap, [(s.start_ns, s.end_ns) for s in steps_from_capture(cap)])
    assert att is not None and att["other_samples"] == 32
    assert att["split"]["input"] == 0.75 and att["split"]["outside"] == 0.25
    assert att["sites"][0]["site"] == "get_batch (src/train.py:10)"
    facts = _facts(cap)
    v = decide(facts)
    assert v.name == "input-bound" and "get_batch (src/train.py:10)" in v.headline
    pf015 = next(f for f in v.findings if f.code == "PF015")
    assert pf015.location is not None and pf015.location.line == 10
    assert "PF014" in {f.code for f in v.findings}  # 20 % in save_ckpt (torch.save)
    # Without the probe's knowledge, "get_batch" is still an input by its name.
    assert decide(_facts(_stack_cap(33, []))).name == "input-bound"


def test_call_site_is_the_loops_callee_or_the_loop_line() -> None:
    loop = {"file": "/a.py", "func": "train", "first": 5, "line": 9}
    helper = {"file": "/a.py", "func": "batches", "first": 1, "line": 2}
    deep = {"file": "/b.py", "func": "decode", "first": 1, "line": 3}
    assert call_site([deep, helper, loop], None, [loop]) == (helper, False)
    assert call_site([loop], None, [loop]) == (loop, True)
    assert call_site([deep], None, [loop]) == (deep, False)
    # backward() is called in a step function the loop calls: a batch source the loop
    # calls is still the loop's callee.
    module = {"file": "/a.py", "func": "<module>", "first": 1, "line": 40}
    step_fn = {"file": "/a.py", "func": "train_step", "first": 20, "line": 25}
    source = {"file": "/a.py", "func": "random_training_set", "first": 12, "line": 14}
    assert call_site([deep, source, module], None, [step_fn, module]) == (source, False)
    assert call_site([step_fn, module], None, [step_fn, module]) == (step_fn, True)
    update = [{"file": "/a.py", "line": 9, "func": "train", "first": 5, "ops": 8, "grad_ops": 0,
               "update_ops": 8, "chain": [{"file": "/a.py", "line": 9, "func": "train", "first": 5}]}]
    assert site_category(loop, True, None, update)[0] == "optimizer"
    assert site_category({**loop, "line": 10}, True, None, update)[0] == "python"


def test_logging_line_is_outside(tmp_path: Path) -> None:
    src = tmp_path / "t.py"
    src.write_text("def main():\n    x = 1\n    print(f'loss {x}')\n")
    line = {"file": str(src), "func": "main", "first": 1, "line": 3}
    assert site_category(line, True, None, [])[0] == "outside"
    assert site_category({**line, "line": 2}, True, None, [])[0] == "python"


def test_contention_is_its_own_verdict_and_keeps_the_underlying_one() -> None:
    cap = _compute_cap()
    samples = [{"t": i / 1000, "cpu_pct": 99.0, "job_run_ns": i * 500_000, "job_wait_ns": i * 450_000,
                "foreign_cpu_cores": 1.1 if i % 5 == 0 else None,
                "foreign_top": [["stress-ng --cpu", 0.9], ["python other.py", 0.2]] if i % 5 == 0 else None}
               for i in range(0, 70)]
    facts = _facts(cap, _probe(7500, 0, 7000), samples=samples, cpu_count=2)
    assert facts["foreign_cpu_cores_mean"] == 1.1
    assert facts["job_runqueue_wait_share"] == pytest.approx(0.474, abs=0.01)
    v = decide(facts)
    assert v.name == "contention" and v.evidence["underlying"] == "compute-bound"
    assert "stress-ng --cpu (0.90 cores)" in v.headline and "PF013" in {f.code for f in v.findings}
    calm = [dict(s, job_wait_ns=0) for s in samples]  # the others run, but the job never waits
    assert decide(_facts(_compute_cap(), _probe(7500, 0, 7000), samples=calm, cpu_count=2)).name == "compute-bound"
    # The keys monitor feeds: absent means the rule stays silent.
    assert "foreign_cpu_cores_mean" not in contention_facts([{"t": 0.0}])


def test_decide_accepts_the_minimal_facts_a_live_monitor_builds() -> None:
    facts = {"ranks": 1, "step_ms_median": 10.0, "step_ms_p90": 11.0, "steps_measured": 20,
             "phase_share": {"data": 0.6, "collective": 0.0, "h2d": 0.0, "optimizer": 0.05,
                             "backward": 0.2, "forward": 0.1, "other": 0.05}}
    v = decide(copy.deepcopy(facts))
    assert v.name == "input-bound"
    facts["phase_share"].update(data=0.0, forward=0.4, backward=0.5)
    assert decide(facts).name == "compute-bound"


def test_no_steps_is_unknown_with_pf011_and_its_remedy_first() -> None:
    v = decide(build_facts([], [], []))
    assert v.name == "unknown" and [f.code for f in v.findings] == ["PF011"]
    assert "prof.step()" in v.fixes[0].text


def test_largest_input_handles_tensor_lists() -> None:
    assert largest_input([[4, 8], [8], []]) == 32
    assert largest_input([[[1024, 512], [1024]], [[3]]]) == 524288
    assert largest_input([]) is None


def test_host_overhead_uses_cpu_time_against_the_measured_steps() -> None:
    # The probed step's wall clock is inflated (another process took the core), its CPU
    # clock is not: 6 ms of real-work operators in CPU time against 8 ms of compute CPU
    # per measured step is 25 % overhead, whatever the wall times say.
    probe = _probe(7000, 5000, 1000)
    for ph in probe["phases"].values():
        ph.update({"cpu_ops_us": 3500.0, "cpu_tiny_ops_us": 500.0, "cpu_matmul_us": 2500.0,
                   "cpu_conv_us": 0.0, "cpu_gaps_us": 4000.0})
    cap = _compute_cap()
    cap["compute_cpu_ns"] = [8_000_000] * 6
    facts = _facts(cap, probe)
    assert facts["probe"]["time_basis"] == "main-thread CPU (measured steps)"
    assert facts["probe"]["host_overhead_share"] == 0.25
    assert facts["probe"]["matmul_share_of_op_time"] == round(5000 / 6000, 3)
    del cap["compute_cpu_ns"]  # no per-step CPU: the probed step's own gaps are the fallback
    facts = _facts(cap, probe)
    assert facts["probe"]["time_basis"] == "main-thread CPU (probed step)"
    assert facts["probe"]["host_overhead_share"] == round(1 - 6000 / 15000, 3)
