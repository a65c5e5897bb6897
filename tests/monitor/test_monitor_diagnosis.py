"""The verdict line on windows of snapshots: the facts a monitor can see, judged by
pitstop profile's own decide() (the four shapes of the issue, and what must not be judged)."""

from __future__ import annotations

from typing import Any

from pitstop.monitor.diagnosis import diagnose, monitor_facts
from pitstop.profile.verdict import VERDICTS, decide

PID = 1234


def proc(pid: int, role: str, *, on: float, runq: float = 0.0, state: str = "sleeping",
         trainer: int | None = None, gpu_mem: int | None = None, cpus: int = 8,
         read_bps: float = 0) -> dict[str, Any]:
    return {"pid": pid, "ppid": trainer or 1, "nspid": None, "name": "python", "cmdline": "python train.py",
            "role": role, "trainer": trainer, "state": state, "threads": 4, "rss_bytes": 2**30,
            "cpu_cores": on, "read_bps": read_bps, "cpus_allowed": cpus,
            "main_thread": {"on_cpu_share": on, "runqueue_share": runq}, "container": None,
            "gpus": [] if gpu_mem is None else [{"index": 0, "memory_bytes": gpu_mem,
                                                 "sm_util_pct": None, "mem_util_pct": None}]}


def snap(t: float, procs: list[dict[str, Any]], *, util: float | None = None,
         sm: float | None = None, iowait: float = 0.0, disk_busy: float = 5.0) -> dict[str, Any]:
    gpus = []
    if util is not None:
        gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "utilization_gpu_pct": util,
                 "memory_used_bytes": 2**34, "memory_total_bytes": 2**36,
                 "gpm": None if sm is None else {"sm_active_pct": sm}}]
    return {"t": t, "cpu": {"count": 8, "busy_pct": 50.0, "iowait_pct": iowait, "per_core_pct": [50.0] * 8},
            "disks": [{"name": "nvme0n1", "read_bps": 1e8, "write_bps": 0, "busy_pct": disk_busy},
                      {"name": "sda", "read_bps": 0, "write_bps": 0, "busy_pct": 0.0}],
            "gpus": gpus, "processes": procs, "verdicts": []}


def window(make: Any, n: int = 10) -> list[dict[str, Any]]:
    return [make(float(i)) for i in range(n)]


def workers(k: int, on: float, state: str = "running", read_bps: float = 0) -> list[dict[str, Any]]:
    return [proc(PID + 1 + i, "worker", on=on, state=state, trainer=PID, read_bps=read_bps)
            for i in range(k)]


def test_busy_gpu_is_compute_bound() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.99, gpu_mem=2**34), *workers(8, 0.2, "sleeping")],
                              util=100, sm=97))
    v = diagnose(w)[0]
    assert v["verdict"] == "compute-bound"
    assert v["line"].startswith("GPU 0 busy 97 % (PID 1234) → compute-bound")


def test_idle_gpu_with_saturated_workers_is_input_bound() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.3, gpu_mem=2**34), *workers(8, 0.98)],
                              util=60, sm=45))
    v = diagnose(w)[0]
    assert v["verdict"] == "input-bound"
    assert v["line"].startswith("GPU 0 idle 55 % while the 8 loader workers of PID 1234 use 7.8 of 8 "
                                "cores → input-bound: ")
    facts = monitor_facts(w, PID)
    assert facts is not None and facts["phase_share"]["data"] == 0.55  # capped by the GPU's idle share


def test_idle_gpu_idle_workers_busy_main_is_host_bound() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=1.0, gpu_mem=2**34), *workers(4, 0.02)],
                              util=35, sm=20))
    v = diagnose(w)[0]
    assert v["verdict"] == "host-bound"
    assert ("GPU 0 idle 80 %, workers idle, main process (PID 1234) at 100 % of one core → "
            "host-bound or per-step sync: run `pitstop profile") in v["line"]


def test_iowait_and_workers_in_disk_sleep_is_io_bound() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.1, gpu_mem=2**34),
                                  *workers(4, 0.1, "disk-sleep", read_bps=3e7)],
                              util=30, sm=25, iowait=40.0, disk_busy=95.0))
    v = diagnose(w)[0]
    assert v["verdict"] == "io-bound"
    assert v["line"].startswith("iowait 40 % on nvme0n1 → io-bound: ")


def test_cpu_training_waiting_for_its_workers_is_input_bound() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.05, cpus=2), *workers(2, 0.97)]))
    v = diagnose(w)[0]
    assert v["verdict"] == "input-bound"
    assert "PID 1234 waits for data 95 % of the time while its 2 loader workers use 1.9 of 2 cores" in v["line"]


def test_main_blocked_while_workers_idle_is_not_input_bound() -> None:
    # A DDP rank waiting in a gloo collective: blocked, but its loader has nothing to do.
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.2), *workers(2, 0.05, "sleeping")]))
    assert diagnose(w)[0]["verdict"] != "input-bound"


def test_idle_torch_process_is_not_judged_and_gpus_are_reported() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.01)], util=97, sm=90))
    lines = diagnose(w)
    assert [v["line"] for v in lines] == ["GPU 0 busy 90 %, no training process seen using it"]
    no_gpu = diagnose(window(lambda t: snap(t, [])))
    assert no_gpu[0]["line"].startswith("no training process seen (host CPU 50 %")


def test_the_names_are_profiles_and_the_facts_are_decides_input() -> None:
    w = window(lambda t: snap(t, [proc(PID, "training", on=0.3, gpu_mem=2**34), *workers(8, 0.98)],
                              util=60, sm=45))
    facts = monitor_facts(w, PID)
    assert facts is not None
    assert decide(facts).name == diagnose(w)[0]["verdict"]
    for v in diagnose(w):
        assert v["verdict"] in VERDICTS


def test_first_sample_without_rates_waits() -> None:
    s = snap(0.0, [proc(PID, "training", on=0.5)])
    s["processes"][0]["main_thread"] = None
    assert diagnose([s])[0]["line"] == "PID 1234: measuring (needs two samples)"


def _polling(wchan: str | None) -> dict[str, Any]:
    p = proc(PID, "training", on=0.02)
    p["main_thread"]["wchan"] = wchan
    return p


def test_a_loop_polling_its_loader_while_the_workers_sleep_is_input_bound() -> None:
    """Workers asleep on network reads use no CPU; the main thread asleep in poll()
    (a DataLoader's wait on its result queue) is the sign that the loop waits for them."""
    w = window(lambda t: snap(t, [_polling("poll_schedule_timeout.constprop.0"),
                                  *workers(2, 0.01, "sleeping")]))
    v = diagnose(w)[0]
    assert v["verdict"] == "input-bound" and v["facts"]["main_fd_wait_share"] == 1.0
    assert v["line"].startswith("PID 1234 waits for data 98 % of the time while its 2 loader "
                                "workers wait too (0.0 of 8 cores busy")
    # Asleep on a futex (a lock, a CUDA sync, a collective): not the loader, no verdict.
    other = diagnose(window(lambda t: snap(t, [_polling("futex_wait_queue"),
                                               *workers(2, 0.01, "sleeping")])))[0]
    assert other["verdict"] == "unknown"
    assert "its loader workers idle too" in other["line"]
    # A kernel that hides wchan ("0"): the estimate falls back to the workers' activity.
    hidden = diagnose(window(lambda t: snap(t, [_polling(None), *workers(2, 0.01, "sleeping")])))[0]
    assert hidden["verdict"] == "unknown" and hidden["facts"]["main_fd_wait_share"] is None


def test_a_process_followed_with_pid_comes_first() -> None:
    busy = proc(PID + 100, "training", on=0.99)
    mine = dict(proc(PID, "training", on=0.02), followed=True)
    order = [v["pid"] for v in diagnose(window(lambda t: snap(t, [busy, mine])))]
    assert order[0] == PID
    unfollowed = diagnose(window(lambda t: snap(t, [busy, proc(PID, "training", on=0.3)])))
    assert unfollowed[0]["pid"] == PID + 100
