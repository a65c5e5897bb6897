"""The verdict: facts in, one bottleneck name, its evidence, ranked fixes and findings out.

``decide(facts) -> Verdict`` is the one place a bottleneck is named: ``pitstop profile``
calls it on the facts of a profiled run (:func:`pitstop.profile.facts.build_facts`),
and the live monitor and ``tune`` can call it on facts they build themselves.

**The facts** (a plain dict; shares are fractions of the step time, 0..1). Required:

- ``ranks`` (int, number of processes with steps; 0 or absent: no step seen),
- ``phase_share``: ``{"data", "collective", "h2d", "optimizer", "backward", "forward",
  "other"}`` summing to 1 (``data`` is the DataLoader wait),
- ``step_ms_median``, ``step_ms_p90``, ``steps_measured``.

Optional (absent or None: the rule that needs it does not fire, as before it existed):

- ``device`` ("cpu" / "cuda"), ``cpu_count``, ``torch_threads``;
- the loader: ``loader`` ("workers" / "main process"), ``workers``,
  ``loader_cpu_cores_mean``, ``loader_running_share``, ``loader_disk_wait_share``,
  ``loader_read_bps_mean``; storage: ``iowait_pct_mean``, ``disk_busy_pct_mean``;
- ``probe`` (the operator probe): ``host_overhead_share``, ``gpu_busy_share``,
  ``matmul_share_of_op_time``, ``matmul_share_of_kernel_time``, ``conv_share_of_op_time``,
  ``ops_per_step``, ``compute_ops_per_step``, ``op_us_mean``, ``top_ops``, ``budget_hit``;
- ``other_split``: the ``other`` share split by the stack samples, as shares of the
  step: ``{"input", "forward", "optimizer", "outside", "python"}`` (summing to
  ``phase_share["other"]``), and ``other_sites``: ``[{"site", "file", "line",
  "category", "why", "share_of_step", ...}]`` (see :mod:`pitstop.profile.attribution`);
- contention: ``cpu_pct_mean`` (host CPU busy %, all cores), ``foreign_cpu_cores_mean``
  (cores used by processes outside the job), ``foreign_procs`` (``[{"name", "cores"}]``),
  ``job_runqueue_wait_share`` (the job's threads' time runnable but not running, over
  their run + wait time), ``job_cpu_cores_mean``;
- ``precision_ab`` (``{"dtype", "speedup", "fp32_ms", "low_ms", "what"}`` or
  ``{"skipped": why}``), ``autocast`` (the script already uses it);
- ``syncs_per_step_mean``, ``sync_sites``, ``gpu_memory``, ``h2d_bytes_per_step``,
  ``stragglers``, ``per_rank``, ``step_boundary``, ``backwards_per_step``.

**Rules**, first match wins (thresholds are module constants, in docs/profile.md). The
step's *in-step* time is the step minus work ``other_split`` calls ``outside`` (logging,
checkpointing: reported, PF014, but not what the step is made of); *data* is the
DataLoader wait plus the loop's own input pipeline (``other_split["input"]``); *compute*
is forward + backward + optimizer plus the functional forward and hand-written update
rules the stack samples found (``other_split["forward"|"optimizer"]``):

0. **contention** when processes outside the job use ≥ :data:`FOREIGN_CORES_SHARE` of
   the cores (and ≥ :data:`FOREIGN_CORES_MIN` core), the host CPU is ≥
   :data:`HOST_BUSY_PCT` % busy, and the job's threads wait for a CPU ≥
   :data:`RUNQUEUE_WAIT_SHARE` of their time (without schedstat: the host ≥ 95 % busy).
   The bottleneck the shares show is named too (``evidence.underlying``).
1. **input-bound** when data ≥ :data:`INPUT_SHARE` of the in-step time; **io-bound** when
   a DataLoader waits and storage is the reason: iowait ≥ :data:`IOWAIT_PCT`, or the
   busiest disk ≥ :data:`DISK_BUSY_PCT` busy, or the loader processes are in disk sleep
   ≥ :data:`LOADER_DISK_WAIT_SHARE` of samples, or they read ≥ :data:`LOADER_READ_BPS`
   while running < :data:`LOADER_RUNNING_SHARE` of the time and using <
   :data:`LOADER_BUSY_CORES` core.
2. **host-bound** when compute ≥ :data:`COMPUTE_SHARE` and the probe measures host
   overhead (time between operators plus operators under 20 µs) ≥
   :data:`HOST_OVERHEAD_SHARE` of the compute time; on CUDA also when kernels run <
   :data:`GPU_BUSY_SHARE` of the compute time.
3. **memory-bound** when compute ≥ :data:`COMPUTE_SHARE` and matmul/conv/attention take <
   :data:`MATMUL_SHARE` of operator time.
4. **compute-bound** when compute ≥ :data:`COMPUTE_SHARE`.
5. **unknown** otherwise (e.g. the loop's own Python dominates: PF012 names it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pitstop.findings import Finding, Location, Remedy, Severity
from pitstop.profile.fixes import (
    BENCH,
    Fix,
    compute_fixes,
    contention_fixes,
    host_fixes,
    input_fixes,
    lint_ref,
    no_step_fixes,
    pipeline_fixes,
    python_fixes,
)

__all__ = ["VERDICTS", "Fix", "Verdict", "decide", "lint_ref"]

VERDICTS = ("input-bound", "io-bound", "host-bound", "compute-bound", "memory-bound",
            "contention", "unknown")

INPUT_SHARE = 0.30
INPUT_WARN_SHARE = 0.10
IOWAIT_PCT = 10.0
DISK_BUSY_PCT = 70.0
HOST_OVERHEAD_SHARE = 0.50
GPU_BUSY_SHARE = 0.50
MATMUL_SHARE = 0.35
COMPUTE_SHARE = 0.50
OTHER_SHARE = 0.30
OUTSIDE_SHARE = 0.10
H2D_SHARE = 0.10
UNSTABLE_RATIO = 1.5
LOADER_DISK_WAIT_SHARE = 0.30
LOADER_READ_BPS = 1e6
LOADER_RUNNING_SHARE = 0.50
LOADER_BUSY_CORES = 0.50
FOREIGN_CORES_SHARE = 0.25
FOREIGN_CORES_MIN = 0.5
HOST_BUSY_PCT = 85.0
RUNQUEUE_WAIT_SHARE = 0.25
HOST_BUSY_NO_SCHEDSTAT_PCT = 95.0

#: Every threshold by name, as profile.json's ``evidence.thresholds`` carries them.
THRESHOLDS: dict[str, float] = {
    "input_share": INPUT_SHARE, "input_warn_share": INPUT_WARN_SHARE,
    "iowait_pct": IOWAIT_PCT, "disk_busy_pct": DISK_BUSY_PCT,
    "loader_disk_wait_share": LOADER_DISK_WAIT_SHARE, "loader_read_bps": LOADER_READ_BPS,
    "loader_running_share": LOADER_RUNNING_SHARE, "loader_busy_cores": LOADER_BUSY_CORES,
    "host_overhead_share": HOST_OVERHEAD_SHARE, "gpu_busy_share": GPU_BUSY_SHARE,
    "matmul_share": MATMUL_SHARE, "compute_share": COMPUTE_SHARE,
    "other_share": OTHER_SHARE, "outside_share": OUTSIDE_SHARE,
    "foreign_cores_share": FOREIGN_CORES_SHARE, "foreign_cores_min": FOREIGN_CORES_MIN,
    "host_busy_pct": HOST_BUSY_PCT, "runqueue_wait_share": RUNQUEUE_WAIT_SHARE,
}


@dataclass
class Verdict:
    name: str
    headline: str
    evidence: dict[str, Any]
    fixes: list[Fix]
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.name, "headline": self.headline, "evidence": self.evidence,
                "fixes": [f.to_dict() for f in self.fixes]}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def _mb(bps: float | None) -> str:
    return "n/a" if bps is None else f"{bps / 1e6:.1f} MB/s"


LOADER_REMEDY = Remedy.code("pitstop.train.loader(dataset, batch_size, shuffle=True)",
                            note="workers, prefetch and pinning chosen for this machine; "
                                 "`pitstop lint` flags loader anti-patterns")


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


@dataclass
class _Shares:
    """The step's make-up once the stack samples have split ``other``."""

    data: float  # DataLoader wait + own input pipeline, of the in-step time
    loader: float  # DataLoader wait alone
    pipeline: float  # own input pipeline alone
    compute: float
    python: float
    outside: float  # of the whole step
    in_step: float


def _shares(f: dict[str, Any]) -> _Shares:
    share = f["phase_share"]
    split = f.get("other_split") or {}
    outside = float(split.get("outside", 0.0)) if split else 0.0
    in_step = max(0.05, 1.0 - outside)
    pipeline = float(split.get("input", 0.0)) if split else 0.0
    compute = (share["forward"] + share["backward"] + share["optimizer"]
               + (float(split.get("forward", 0.0)) + float(split.get("optimizer", 0.0))
                  if split else 0.0))
    python = float(split.get("python", 0.0)) if split else share["other"]
    return _Shares(data=(share["data"] + pipeline) / in_step, loader=share["data"] / in_step,
                   pipeline=pipeline / in_step, compute=compute / in_step,
                   python=python / in_step, outside=outside, in_step=in_step)


def _sites(f: dict[str, Any], category: str) -> list[dict[str, Any]]:
    return [s for s in f.get("other_sites") or [] if s.get("category") == category]


def _site_location(site: dict[str, Any] | None) -> Location | None:
    if site and site.get("file") and site.get("line"):
        return Location(str(site["file"]), int(site["line"]))
    return None


def _contention(f: dict[str, Any]) -> dict[str, Any] | None:
    """The contention evidence when the rule fires, else None."""
    foreign = f.get("foreign_cpu_cores_mean")
    cores = f.get("cpu_count") or 0
    busy = f.get("cpu_pct_mean")
    if foreign is None or busy is None or not cores:
        return None
    if foreign < max(FOREIGN_CORES_MIN, FOREIGN_CORES_SHARE * cores) or busy < HOST_BUSY_PCT:
        return None
    wait = f.get("job_runqueue_wait_share")
    if wait is None:
        if busy < HOST_BUSY_NO_SCHEDSTAT_PCT:
            return None
    elif wait < RUNQUEUE_WAIT_SHARE:
        return None
    return {"foreign_cpu_cores_mean": foreign, "foreign_share_of_cores": round(foreign / cores, 3),
            "host_cpu_pct_mean": busy, "job_runqueue_wait_share": wait,
            "job_cpu_cores_mean": f.get("job_cpu_cores_mean"), "cpu_count": cores,
            "foreign_procs": f.get("foreign_procs") or []}


def decide(f: dict[str, Any]) -> Verdict:
    """The bottleneck named by the facts (see the module docstring for keys and rules)."""
    if not f.get("ranks"):
        return Verdict("unknown", "no training step was seen", {}, no_step_fixes(),
                       [Finding("PF011", "No training step was seen", Severity.WARNING,
                                {"optimizer_steps": 0, "backward_calls": 0, "dataloader_batches": 0},
                                Remedy.code("with pitstop.profile.profile() as prof: ... "
                                            "prof.step()",
                                            note="or check that the script trains"))])
    verdict = _bottleneck(f)
    cont = _contention(f)
    if cont is not None:
        procs = ", ".join(f"{p['name']} ({p['cores']:.2f} cores)" for p in cont["foreign_procs"][:3])
        wait = cont["job_runqueue_wait_share"]
        head = (f"other processes use {cont['foreign_cpu_cores_mean']:.1f} of {cont['cpu_count']} "
                f"cores ({_pct(cont['foreign_share_of_cores'])})"
                + (f": {procs}" if procs else "")
                + (f"; the training waited for a CPU {_pct(wait)} of its time" if wait is not None else "")
                + f" (without them: {verdict.name})")
        ev = {**verdict.evidence, **{k: v for k, v in cont.items() if k != "foreign_procs"},
              "foreign_procs": [f"{p['name']}: {p['cores']:.2f} cores" for p in cont["foreign_procs"]],
              "underlying": verdict.name, "underlying_headline": verdict.headline}
        findings = [Finding("PF013", "Processes outside the training take the CPUs it needs",
                            Severity.PROBLEM, {k: v for k, v in ev.items()
                                               if k in ("foreign_cpu_cores_mean", "host_cpu_pct_mean",
                                                        "job_runqueue_wait_share", "foreign_procs")},
                            Remedy.advice("stop or move the other processes, or pin the training "
                                          "to free cores")), *verdict.findings]
        own = [x for x in verdict.fixes if x is not BENCH][:2]
        verdict = Verdict("contention", head, ev, [*contention_fixes(f), *own, BENCH],
                          findings, verdict.notes)
    _side_findings(f, verdict)
    return verdict


def _bottleneck(f: dict[str, Any]) -> Verdict:
    s = _shares(f)
    probe = f.get("probe") or {}
    ev: dict[str, Any] = {
        "step_ms_median": f["step_ms_median"],
        "data_wait_share": round(s.data, 3),
        "compute_share": round(s.compute, 3),
        "thresholds": THRESHOLDS,
    }
    if f.get("other_split"):
        ev["loader_wait_share"] = round(s.loader, 3)
        ev["pipeline_share"] = round(s.pipeline, 3)
        ev["python_share"] = round(s.python, 3)
        ev["outside_share"] = round(s.outside, 3)
    if f.get("step_boundary"):
        ev["step_boundary"] = f["step_boundary"]
    findings: list[Finding] = []
    cuda = f.get("device") == "cuda"

    if s.data >= INPUT_SHARE:
        return _input_verdict(f, s, ev, findings)
    if s.loader >= INPUT_WARN_SHARE:
        findings.append(Finding("PF001", "The training loop waits for the DataLoader",
                                Severity.WARNING, {"data_wait_share": round(s.loader, 3)},
                                LOADER_REMEDY))
    overhead = probe.get("host_overhead_share")
    gpu_busy = probe.get("gpu_busy_share")
    mm = probe.get("matmul_share_of_kernel_time" if cuda else "matmul_share_of_op_time")
    ev.update({"host_overhead_share": overhead, "gpu_busy_share": gpu_busy, "matmul_share": mm})
    if s.compute >= COMPUTE_SHARE:
        host = (overhead is not None and overhead >= HOST_OVERHEAD_SHARE) or (
            cuda and gpu_busy is not None and gpu_busy < GPU_BUSY_SHARE)
        if host:
            return _host_verdict(f, probe, ev, findings)
        if mm is not None and mm < MATMUL_SHARE:
            ev["top_ops"] = [t["name"] for t in probe.get("top_ops", [])[:5]]
            head = (f"only {_pct(mm)} of operator time is matmul/convolution: the step moves "
                    "memory more than it computes")
            findings.append(Finding("PF006", "Operators that move memory dominate the compute",
                                    Severity.WARNING, {"matmul_share": mm},
                                    Remedy.code("torch.compile(model); bf16 autocast where measured "
                                                "faster")))
            fixes, notes = compute_fixes(f, memory=True)
            return Verdict("memory-bound", head, ev, fixes, findings, notes)
        head = f"forward+backward+optimizer take {_pct(s.compute)} of the step"
        upd = _sites(f, "optimizer")
        if upd:
            head += f" (the update rule in {upd[0]['site']} counted as optimizer)"
        findings.append(Finding("PF005", "The step is spent computing", Severity.INFO,
                                {k: v for k, v in ev.items() if v is not None and k != "thresholds"},
                                Remedy.pitstop("pitstop bench", note="measures precision, "
                                               "channels_last and compile side by side")))
        fixes, notes = compute_fixes(f)
        return Verdict("compute-bound", head, ev, fixes, findings, notes)
    py_sites = _sites(f, "python")
    if s.python >= OTHER_SHARE and py_sites:
        head = (f"the loop's own Python takes {_pct(s.python)} of the step, most in "
                + ", ".join(f"{x['site']} ({_pct(x['share_of_step'] / s.in_step)})" for x in py_sites[:2]))
        return Verdict("unknown", head, ev, python_fixes(py_sites), findings)
    head = (f"no dominant phase: data {_pct(s.data)}, compute {_pct(s.compute)}, "
            f"outside hooked calls {_pct(f['phase_share']['other'])}")
    return Verdict("unknown", head, ev, [BENCH], findings)


def _input_verdict(f: dict[str, Any], s: _Shares, ev: dict[str, Any],
                   findings: list[Finding]) -> Verdict:
    pipeline_first = s.pipeline > s.loader
    io_reasons = _io_reasons(f) if s.loader >= INPUT_SHARE / 2 else []
    io = bool(io_reasons) and not pipeline_first
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
    sites = _sites(f, "input")
    top = sites[0] if sites else None
    if pipeline_first:
        ev["input_function"] = top["site"] if top else None
        head = (f"the loop waits for data {_pct(s.data)} of each step{where}: "
                + (f"{top['site']} makes the batches in the training loop ({top['why']})" if top
                   else "its own input code makes the batches") )
    else:
        head = (f"the loop waits for data {_pct(s.data)} of each step{where}"
                + (f"; storage is the limit ({'; '.join(io_reasons)})" if io else ""))
    if s.pipeline >= INPUT_WARN_SHARE:
        findings.append(Finding("PF015", "The loop's own input pipeline holds up every step",
                                Severity.PROBLEM if pipeline_first else Severity.WARNING,
                                {"pipeline_share": round(s.pipeline, 3),
                                 "function": top["site"] if top else None,
                                 "pipeline_ms_per_step": round(s.pipeline * s.in_step * f["step_ms_median"], 2)},
                                Remedy.code("a DataLoader with workers over a Dataset that wraps it, "
                                            "or a background prefetch thread"),
                                _site_location(top)))
    if s.loader >= INPUT_WARN_SHARE:
        findings.append(Finding("PF001", "The training loop waits for the DataLoader",
                                Severity.WARNING if pipeline_first else Severity.PROBLEM,
                                {"data_wait_share": round(s.loader, 3),
                                 "data_wait_ms_per_step": round(s.loader * s.in_step * f["step_ms_median"], 2),
                                 "workers": f.get("workers")},
                                LOADER_REMEDY))
    if io:
        findings.append(Finding("PF002", "Reading the data from storage limits the loader",
                                Severity.PROBLEM, {"reasons": io_reasons},
                                Remedy.pitstop("pitstop doctor --data PATH")))
    fixes = (pipeline_fixes(top, f) if pipeline_first else input_fixes(f, io)) + [BENCH]
    return Verdict(name, head, ev, fixes, findings)


def _host_verdict(f: dict[str, Any], probe: dict[str, Any], ev: dict[str, Any],
                  findings: list[Finding]) -> Verdict:
    cuda = f.get("device") == "cuda"
    overhead, gpu_busy = probe.get("host_overhead_share"), probe.get("gpu_busy_share")
    ev.update({k: probe.get(k) for k in ("ops_per_step", "compute_ops_per_step", "op_us_mean",
                                         "host_overhead_share", "gpu_busy_share")})
    syncs = f.get("syncs_per_step_mean") or 0
    n_ops = probe.get("compute_ops_per_step", probe.get("ops_per_step"))
    head = (f"host overhead is {_pct(overhead)} of compute time: "
            f"{n_ops} operators per step, {probe.get('op_us_mean')} µs each on average")
    if cuda:
        head = (f"the GPU runs kernels only {_pct(gpu_busy)} of the step"
                + (f"; {syncs:.1f} host-device syncs per step (sync-bound)" if syncs >= 1 else ""))
        ev["syncs_per_step"] = syncs
    findings.append(Finding("PF003", "Host overhead dominates: many tiny operators",
                            Severity.PROBLEM, {k: v for k, v in ev.items() if v is not None and k != "thresholds"},
                            Remedy.code("torch.compile(model) / vectorise loops / larger batch")))
    return Verdict("host-bound", head, ev, host_fixes(f, probe, syncs), findings)


def _side_findings(f: dict[str, Any], v: Verdict) -> None:
    share = f["phase_share"]
    s = _shares(f)
    py_sites = _sites(f, "python")
    if (f.get("other_split") and s.python >= OTHER_SHARE) or (
            not f.get("other_split") and share["other"] >= OTHER_SHARE):
        loc = _site_location(py_sites[0]) if py_sites else None
        v.findings.append(Finding("PF012", "Much of the step is outside forward, backward and the optimizer",
                                  Severity.WARNING,
                                  {"other_share": round(share["other"], 3),
                                   "python_share": round(s.python, 3),
                                   "sites": [f"{x['site']}: {_pct(x['share_of_step'])}" for x in py_sites[:3]]},
                                  Remedy.pitstop("pitstop lint"), loc))
    out_sites = _sites(f, "outside")
    if s.outside >= OUTSIDE_SHARE and out_sites:
        v.findings.append(Finding("PF014", "Logging or checkpointing takes a large share of the loop",
                                  Severity.WARNING,
                                  {"outside_share": round(s.outside, 3),
                                   "sites": [f"{x['site']}: {_pct(x['share_of_step'])} ({x['why']})"
                                             for x in out_sites[:3]]},
                                  Remedy.advice("log and save every N steps; keep metrics on the "
                                                "device (pitstop.train.Metrics)"),
                                  _site_location(out_sites[0])))
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
    for st in f.get("stragglers") or []:
        v.findings.append(Finding("PF007", f"Rank {st['rank']} is consistently slower than the others",
                                  Severity.PROBLEM, st,
                                  Remedy.advice("compare that rank's breakdown in report.html; "
                                                "`pitstop doctor` on its node")))
