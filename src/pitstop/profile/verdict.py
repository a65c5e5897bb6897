"""The verdict: facts in, one bottleneck name, its evidence, ranked fixes and findings out.

Rules, first match wins (the thresholds are module constants, documented in docs/profile.md):

1. **input-bound** when the loop waits for data ≥ :data:`INPUT_SHARE` of step time;
   **io-bound** when, in addition, storage is the reason: iowait ≥ :data:`IOWAIT_PCT`,
   or the busiest disk ≥ :data:`DISK_BUSY_PCT` busy, or the loader processes are in
   uninterruptible disk sleep ≥ :data:`LOADER_DISK_WAIT_SHARE` of samples, or they read
   ≥ :data:`LOADER_READ_BPS` while running < :data:`LOADER_RUNNING_SHARE` of the time
   and using < :data:`LOADER_BUSY_CORES` core (blocked on reads, not computing).
2. **host-bound** when the operator probe finds host overhead (time between operators
   plus operators under 20 µs) ≥ :data:`HOST_OVERHEAD_SHARE` of compute time; on CUDA
   also when kernels run < :data:`GPU_BUSY_SHARE` of the compute time.
3. **memory-bound** when operators that mostly move bytes (all but matmul/conv/attention)
   take ≥ 1 − :data:`MATMUL_SHARE` of operator time.
4. **compute-bound** when forward + backward + optimizer ≥ 50 % of the step.
5. **unknown** otherwise (say, most time is in none of the hooked calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pitstop.findings import Finding, Location, Remedy, Severity

__all__ = ["VERDICTS", "Fix", "Verdict", "decide"]

VERDICTS = ("input-bound", "io-bound", "host-bound", "compute-bound", "memory-bound", "unknown")

INPUT_SHARE = 0.30
INPUT_WARN_SHARE = 0.10
IOWAIT_PCT = 10.0
DISK_BUSY_PCT = 70.0
HOST_OVERHEAD_SHARE = 0.50
GPU_BUSY_SHARE = 0.50
MATMUL_SHARE = 0.35
COMPUTE_SHARE = 0.50
OTHER_SHARE = 0.30
H2D_SHARE = 0.10
UNSTABLE_RATIO = 1.5
LOADER_DISK_WAIT_SHARE = 0.30
LOADER_READ_BPS = 1e6
LOADER_RUNNING_SHARE = 0.50
LOADER_BUSY_CORES = 0.50

#: Every threshold by name, as profile.json's ``evidence.thresholds`` carries them.
THRESHOLDS: dict[str, float] = {
    "input_share": INPUT_SHARE, "input_warn_share": INPUT_WARN_SHARE,
    "iowait_pct": IOWAIT_PCT, "disk_busy_pct": DISK_BUSY_PCT,
    "loader_disk_wait_share": LOADER_DISK_WAIT_SHARE, "loader_read_bps": LOADER_READ_BPS,
    "loader_running_share": LOADER_RUNNING_SHARE, "loader_busy_cores": LOADER_BUSY_CORES,
    "host_overhead_share": HOST_OVERHEAD_SHARE, "gpu_busy_share": GPU_BUSY_SHARE,
    "matmul_share": MATMUL_SHARE, "compute_share": COMPUTE_SHARE,
}


@dataclass(frozen=True)
class Fix:
    """One thing to do, with why it should help and where to read more."""

    text: str
    why: str
    refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "why": self.why, "refs": list(self.refs)}


@dataclass
class Verdict:
    name: str
    headline: str
    evidence: dict[str, Any]
    fixes: list[Fix]
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.name, "headline": self.headline, "evidence": self.evidence,
                "fixes": [f.to_dict() for f in self.fixes]}


def lint_ref(name: str, category: str) -> str:
    """The lint rule for a pattern: its code when ``pitstop lint`` registers one by that
    name, else the rule category (codes are looked up, never hard-coded here)."""
    try:
        from pitstop.findings import all_docs

        for doc in all_docs():
            if doc.code.startswith("LT") and doc.name == name:
                return f"pitstop lint {doc.code} {doc.name}"
    except Exception:
        pass
    return f"pitstop lint: {category} rules"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def _mb(bps: float | None) -> str:
    return "n/a" if bps is None else f"{bps / 1e6:.1f} MB/s"


LOADER_REMEDY = Remedy.code("pitstop.train.loader(dataset, batch_size, shuffle=True)",
                            note="workers, prefetch and pinning chosen for this machine; "
                                 "`pitstop lint` flags loader anti-patterns")

BENCH = Fix("Run `pitstop bench` to see what each knob buys on this machine",
            "the ladder measures loader, precision and compile options on a reference "
            "workload side by side", ("pitstop bench",))


def _io_reasons(f: dict[str, Any]) -> list[str]:
    reasons = []
    if (f.get("iowait_pct_mean") or 0) >= IOWAIT_PCT:
        reasons.append(f"CPU iowait {f['iowait_pct_mean']:.0f} %")
    if (f.get("disk_busy_pct_mean") or 0) >= DISK_BUSY_PCT:
        reasons.append(f"busiest disk {f['disk_busy_pct_mean']:.0f} % busy")
    if (f.get("loader_disk_wait_share") or 0) >= LOADER_DISK_WAIT_SHARE:
        reasons.append(f"loader processes in disk wait {_pct(f['loader_disk_wait_share'])} of samples")
    running = f.get("loader_running_share")
    if ((f.get("loader_read_bps_mean") or 0) >= LOADER_READ_BPS and running is not None
            and running < LOADER_RUNNING_SHARE
            and (f.get("loader_cpu_cores_mean") or 0) < LOADER_BUSY_CORES):
        reasons.append(f"loader reads {_mb(f['loader_read_bps_mean'])} but runs only "
                       f"{_pct(running)} of the time (blocked on reads)")
    return reasons


def _input_fixes(f: dict[str, Any], io: bool) -> list[Fix]:
    fixes = []
    cores = f.get("cpu_count") or 0
    if io:
        fixes.append(Fix("Check the dataset's storage: `pitstop doctor --data PATH`",
                         "names a network filesystem, a spinning disk or slow random reads",
                         ("pitstop doctor",)))
        fixes.append(Fix("Move the data closer: local NVMe or /dev/shm; pack small files into "
                         "large shards read sequentially",
                         "the loader is waiting for bytes, not for CPU", ("PF002",)))
        fixes.append(Fix("Raise read-ahead: `pitstop system apply --only readahead --data PATH`",
                         "sequential reads get larger and fewer", ("pitstop system",)))
    if f.get("workers", 0) == 0:
        fixes.append(Fix(f"Load in worker processes: DataLoader(num_workers={max(2, cores - 1)}, "
                         "persistent_workers=True, pin_memory=True on CUDA)",
                         "batches are produced in the training process itself (0 workers), "
                         "so loading and training never overlap",
                         (lint_ref("dataloader-no-workers", "loader-workers"),)))
    elif (f.get("loader_cpu_cores_mean") or 0) >= 0.7 and not io:
        fixes.append(Fix("Make each sample cheaper: decode/augment less in __getitem__, cache "
                         "pre-processed tensors, or add workers if cores are free",
                         f"the {f['workers']} workers are busy computing "
                         f"({f['loader_cpu_cores_mean']:.2f} cores each)", ("PF001",)))
    else:
        fixes.append(Fix("Add workers / raise prefetch_factor",
                         f"{f.get('workers')} workers cannot keep up", ("PF001",)))
    fixes.append(Fix("Let pitstop.train.loader(dataset, batch_size, shuffle=True) pick workers, "
                     "prefetch and pinning for this machine",
                     "settings computed from this machine's cores, memory and sample size",
                     ("pitstop.train.loader",)))
    return fixes


def decide(f: dict[str, Any]) -> Verdict:
    """The bottleneck named by the facts (see the module docstring for the rules)."""
    if not f.get("ranks"):
        return Verdict("unknown", "no training step was seen", {}, [BENCH],
                       [Finding("PF011", "No training step was seen", Severity.WARNING,
                                {"optimizer_steps": 0, "dataloader_batches": 0},
                                Remedy.advice("Use the API (prof.step()) or check that the "
                                              "script trains"))])
    share = f["phase_share"]
    data = share["data"]
    compute = share["forward"] + share["backward"] + share["optimizer"]
    probe = f.get("probe") or {}
    ev: dict[str, Any] = {
        "step_ms_median": f["step_ms_median"],
        "data_wait_share": round(data, 3),
        "compute_share": round(compute, 3),
        "thresholds": THRESHOLDS,
    }
    findings: list[Finding] = []
    cuda = f.get("device") == "cuda"

    # 1. input / io
    io_reasons = _io_reasons(f)
    if data >= INPUT_SHARE:
        io = bool(io_reasons)
        name = "io-bound" if io else "input-bound"
        ev.update({k: f.get(k) for k in ("loader", "workers", "loader_cpu_cores_mean",
                                         "loader_running_share", "loader_read_bps_mean",
                                         "iowait_pct_mean", "disk_busy_pct_mean",
                                         "loader_disk_wait_share")})
        ev["io_reasons"] = io_reasons
        per_rank = f.get("per_rank") or []
        where = ""
        if len(per_rank) > 1:
            where = " (" + ", ".join(f"rank {r['rank']}: {_pct(r['phase_share']['data'])}"
                                     for r in per_rank) + ")"
        head = (f"the loop waits for data {_pct(data)} of each step{where}"
                + (f"; storage is the limit ({'; '.join(io_reasons)})" if io else ""))
        findings.append(Finding("PF001", "The training loop waits for the DataLoader",
                                Severity.PROBLEM, {"data_wait_share": round(data, 3),
                                                   "data_wait_ms_per_step": round(data * f["step_ms_median"], 2),
                                                   "workers": f.get("workers")},
                                LOADER_REMEDY))
        if io:
            findings.append(Finding("PF002", "Reading the data from storage limits the loader",
                                    Severity.PROBLEM, {"reasons": io_reasons},
                                    Remedy.pitstop("pitstop doctor --data PATH")))
        verdict = Verdict(name, head, ev, [*_input_fixes(f, io), BENCH], findings)
    else:
        if data >= INPUT_WARN_SHARE:
            findings.append(Finding("PF001", "The training loop waits for the DataLoader",
                                    Severity.WARNING, {"data_wait_share": round(data, 3)},
                                    LOADER_REMEDY))
        overhead = probe.get("host_overhead_share")
        gpu_busy = probe.get("gpu_busy_share")
        host = (overhead is not None and overhead >= HOST_OVERHEAD_SHARE) or (
            cuda and gpu_busy is not None and gpu_busy < GPU_BUSY_SHARE)
        mm = probe.get("matmul_share_of_kernel_time" if cuda else "matmul_share_of_op_time")
        # What ruled the other verdicts out is evidence too (None: no probe ran).
        ev.update({"host_overhead_share": overhead, "gpu_busy_share": gpu_busy, "matmul_share": mm})
        if host:
            ev.update({k: probe.get(k) for k in ("ops_per_step", "op_us_mean", "host_overhead_share",
                                                 "gpu_busy_share")})
            syncs = f.get("syncs_per_step_mean") or 0
            head = (f"host overhead is {_pct(overhead)} of compute time: "
                    f"{probe.get('ops_per_step')} operators per step, {probe.get('op_us_mean')} µs each on average")
            if cuda:
                head = (f"the GPU runs kernels only {_pct(gpu_busy)} of the step"
                        + (f"; {syncs:.1f} host-device syncs per step (sync-bound)" if syncs >= 1 else ""))
                ev["syncs_per_step"] = syncs
            findings.append(Finding("PF003", "Host overhead dominates: many tiny operators",
                                    Severity.PROBLEM, {k: v for k, v in ev.items() if v is not None and k != "thresholds"},
                                    Remedy.code("torch.compile(model) / vectorise loops / larger batch")))
            fixes = []
            if cuda and syncs >= 1:
                fixes.append(Fix("Remove the host-device syncs in the loop (see PF004 lines)",
                                 f"{syncs:.1f} syncs per step drain the GPU queue",
                                 (lint_ref("sync-in-hot-loop", "sync"), "PF004")))
            fixes += [
                Fix("Vectorise: replace Python loops over tensors/elements with batched ops",
                    f"{probe.get('ops_per_step')} operators per step, most of them tiny", ("PF003",)),
                Fix("torch.compile(model) (on CUDA mode=\"reduce-overhead\" adds CUDA graphs)",
                    "fuses small operators and removes per-op dispatch", ("pitstop bench",)),
                Fix("Use a larger batch if memory allows",
                    "the same number of operators then does more work each", ()),
                Fix("Use foreach/fused optimizers (torch.optim.AdamW(fused=True) on CUDA)",
                    "one kernel per parameter group instead of several per tensor", ()),
                BENCH,
            ]
            verdict = Verdict("host-bound", head, ev, fixes, findings)
        elif mm is not None and mm < MATMUL_SHARE and compute >= COMPUTE_SHARE:
            ev.update({"matmul_share": mm, "top_ops": [t["name"] for t in probe.get("top_ops", [])[:5]]})
            head = (f"only {_pct(mm)} of operator time is matmul/convolution: the step moves "
                    "memory more than it computes")
            findings.append(Finding("PF006", "Operators that move memory dominate the compute",
                                    Severity.WARNING, {"matmul_share": mm},
                                    Remedy.code("torch.compile(model); bf16; channels_last")))
            verdict = Verdict("memory-bound", head, ev, [
                Fix("torch.compile(model)", "fuses element-wise chains into single kernels",
                    ("pitstop bench",)),
                Fix("bf16 autocast (pitstop.train.TrainStep(precision=\"auto\"))",
                    "halves the bytes every memory-bound op moves", ("pitstop.train",)),
                Fix("fused/foreach optimizer; avoid needless .clone()/.contiguous()",
                    "fewer full passes over memory", ()),
                BENCH], findings)
        elif compute >= COMPUTE_SHARE:
            if mm is not None:
                ev["matmul_share"] = mm
            head = f"forward+backward+optimizer take {_pct(compute)} of the step"
            findings.append(Finding("PF005", "The step is spent computing", Severity.INFO,
                                    {k: v for k, v in ev.items() if v is not None and k != "thresholds"},
                                    Remedy.pitstop("pitstop bench", note="measures precision, channels_last and compile side by side")))
            verdict = Verdict("compute-bound", head, ev, [
                Fix("Lower precision: bf16 autocast (pitstop.train.TrainStep(precision=\"auto\"))",
                    "matmul/conv run 2-8x faster in bf16 on tensor cores; on CPU with AMX/AVX512-BF16",
                    ("pitstop.train", lint_ref("fp32-training-without-autocast", "amp"))),
                Fix("channels_last memory format for CNNs; on CUDA TF32 and cudnn.benchmark",
                    "faster convolution and float32 matmul kernels",
                    (lint_ref("tf32-disabled", "tf32"), lint_ref("cudnn-autotuner-off", "cudnn"))),
                Fix("torch.compile(model)", "fuses the operators around the matmuls",
                    ("pitstop bench",)),
                BENCH], findings)
        else:
            head = (f"no dominant phase: data {_pct(data)}, compute {_pct(compute)}, "
                    f"outside hooked calls {_pct(share['other'])}")
            verdict = Verdict("unknown", head, ev, [BENCH], findings)

    _side_findings(f, verdict)
    return verdict


def _side_findings(f: dict[str, Any], v: Verdict) -> None:
    share = f["phase_share"]
    if share["other"] >= OTHER_SHARE:
        v.findings.append(Finding("PF012", "Much of the step is outside forward, backward and the optimizer",
                                  Severity.WARNING, {"other_share": round(share["other"], 3)},
                                  Remedy.pitstop("pitstop lint")))
    if share["h2d"] >= H2D_SHARE:
        v.findings.append(Finding("PF008", "Host-to-device copies take a large share of the step",
                                  Severity.WARNING, {"h2d_share": round(share["h2d"], 3),
                                                     "h2d_bytes_per_step": f.get("h2d_bytes_per_step")},
                                  Remedy.code("DataLoader(pin_memory=True) + .to(device, non_blocking=True)",
                                              note=f"{lint_ref('dataloader-no-pin-memory', 'loader-pin-memory')}; "
                                                   f"{lint_ref('blocking-host-to-device-copy', 'non-blocking')}")))
    med, p90 = f.get("step_ms_median") or 0.0, f.get("step_ms_p90") or 0.0
    if med > 0 and p90 / med >= UNSTABLE_RATIO and f.get("steps_measured", 0) >= 5:
        v.findings.append(Finding("PF009", "Step times vary a lot", Severity.WARNING,
                                  {"step_ms_median": med, "step_ms_p90": p90},
                                  Remedy.advice("look for a period in report.html's per-step plot")))
    sites = f.get("sync_sites") or {}
    if (f.get("syncs_per_step_mean") or 0) >= 1:
        top = sorted(sites.items(), key=lambda kv: -kv[1])
        loc = None
        if top:
            path, _, line = top[0][0].rpartition(":")
            loc = Location(path, int(line)) if line.isdigit() else None
        v.findings.append(Finding("PF004", "The host waits for the GPU inside the step",
                                  Severity.WARNING,
                                  {"syncs_per_step": f["syncs_per_step_mean"],
                                   "sites": [f"{k} ({n}x)" for k, n in top[:5]]},
                                  Remedy.pitstop("pitstop lint", note=lint_ref("sync-in-hot-loop", "sync")), loc))
    mem = f.get("gpu_memory") or {}
    if mem.get("alloc_retries"):
        v.findings.append(Finding("PF010", "The CUDA allocator had to free its cache to allocate",
                                  Severity.WARNING, dict(mem),
                                  Remedy.code("smaller micro-batch; expandable_segments:True")))
    for s in f.get("stragglers") or []:
        v.findings.append(Finding("PF007", f"Rank {s['rank']} is consistently slower than the others",
                                  Severity.PROBLEM, s,
                                  Remedy.advice("compare that rank's breakdown in report.html; "
                                                "`pitstop doctor` on its node")))
