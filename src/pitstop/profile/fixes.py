"""The fixes each verdict lists, fitted to the model and the machine (pure functions of facts).

- channels_last is offered only when the probe saw convolutions take a real share of the
  operator time (:data:`CONV_SHARE`); TF32 and the cuDNN autotuner only on CUDA;
- lower precision is quoted from the in-process A/B (:mod:`pitstop.profile.precision_ab`):
  ``measured 1.31x here``; a measured slowdown removes the fix (and says so), and without
  a measurement no speed-up figure is claimed;
- an input pipeline that is not a DataLoader is named (function and file:line) with
  what moves it off the critical path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BENCH", "CONV_SHARE", "PRECISION_MIN_SPEEDUP", "Fix", "compute_fixes",
           "contention_fixes", "host_fixes", "input_fixes", "lint_ref", "no_step_fixes",
           "pipeline_fixes", "precision_note", "python_fixes"]

#: Convolutions must take this share of operator time for channels_last to be offered.
CONV_SHARE = 0.20
#: A measured low-precision speed-up below this is not worth suggesting.
PRECISION_MIN_SPEEDUP = 1.10


@dataclass(frozen=True)
class Fix:
    """One thing to do, with why it should help and where to read more."""

    text: str
    why: str
    refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "why": self.why, "refs": list(self.refs)}


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


BENCH = Fix("Run `pitstop bench` to see what each knob buys on this machine",
            "the ladder measures loader, precision and compile options on a reference "
            "workload side by side", ("pitstop bench",))


def no_step_fixes() -> list[Fix]:
    return [Fix("Mark the steps yourself: `with pitstop.profile.profile() as prof:` around the "
                "loop and `prof.step()` at the end of each step",
                "no optimizer step, no backward() and no DataLoader batch was seen to tell "
                "steps apart", ("PF011",)),
            BENCH]


def input_fixes(f: dict[str, Any], io: bool) -> list[Fix]:
    """For a loop that waits on a DataLoader."""
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


def pipeline_fixes(site: dict[str, Any] | None, f: dict[str, Any]) -> list[Fix]:
    """For a loop that waits on its own (non-DataLoader) input code."""
    name = site["site"] if site else "the input code"
    cores = f.get("cpu_count") or 0
    return [
        Fix(f"Take {name} off the critical path: wrap it in a torch.utils.data "
            f"IterableDataset/Dataset and iterate a DataLoader(num_workers={max(2, cores - 1)}, "
            "persistent_workers=True), or run it in a background thread that fills a queue "
            "while the model computes",
            "the training process makes each batch itself, between steps, so the model waits "
            "for it every step", ("PF015",)),
        Fix(f"Make {name} cheaper: keep the data as one tensor or a memory-mapped array and "
            "slice it (no per-sample Python loop, no per-batch numpy→tensor copies), "
            "pre-tokenise/pre-process once",
            "per-sample Python and copies cost more than the model on small batches", ()),
        Fix("Let pitstop.train.loader(dataset, batch_size, shuffle=True) pick workers, "
            "prefetch and pinning once the pipeline is a Dataset",
            "settings computed from this machine's cores, memory and sample size",
            ("pitstop.train.loader",)),
    ]


def precision_note(f: dict[str, Any]) -> tuple[Fix | None, str | None]:
    """The precision fix, quoted from the A/B, or None and why it is not offered."""
    cuda = f.get("device") == "cuda"
    if f.get("autocast"):
        return None, "the model already runs under torch.autocast"
    ab = f.get("precision_ab") or {}
    refs = ("pitstop.train", lint_ref("fp32-training-without-autocast", "amp"))
    if ab.get("speedup") is not None:
        name = ab.get("dtype", "bf16")
        ratio = float(ab["speedup"])
        measured = (f"measured {ratio:.2f}x here ({ab.get('what', 'forward of one batch')}: "
                    f"fp32 {ab.get('fp32_ms')} ms, {name} {ab.get('low_ms')} ms)")
        if ratio < PRECISION_MIN_SPEEDUP:
            return None, f"{name} autocast {measured}: not worth it on this machine, fp32 stays"
        return Fix(f"Lower precision: {name} autocast (pitstop.train.TrainStep(precision=\"auto\"))",
                   f"{name} autocast {measured}", refs), None
    why = ab.get("skipped") or "not measured"
    if not cuda and "no bf16 instructions" in why:
        return None, f"bf16 autocast not offered: {why}"
    return Fix("Lower precision: bf16 autocast (pitstop.train.TrainStep(precision=\"auto\") "
               "measures before it picks)",
               f"not measured in this run ({why}); "
               + ("bf16/fp16 matmuls use the tensor cores" if cuda
                  else "on a CPU bf16 helps large matmuls/convolutions only"), refs), None


def _conv_fix(f: dict[str, Any]) -> Fix | None:
    conv = (f.get("probe") or {}).get("conv_share_of_op_time")
    if conv is None or conv < CONV_SHARE:
        return None
    return Fix("channels_last memory format: model.to(memory_format=torch.channels_last) and "
               "the same for each input batch",
               f"convolutions take {100 * conv:.0f} % of operator time; oneDNN/cuDNN run them "
               "faster on NHWC", ())


def compute_fixes(f: dict[str, Any], *, memory: bool = False) -> tuple[list[Fix], list[str]]:
    """Fixes for a compute- or memory-bound step, and notes on fixes left out."""
    fixes: list[Fix] = []
    notes: list[str] = []
    cuda = f.get("device") == "cuda"
    prec, why_not = precision_note(f)
    if memory:
        fixes.append(Fix("torch.compile(model)", "fuses element-wise chains into single kernels",
                         ("pitstop bench",)))
    if prec is not None:
        fixes.append(prec)
    if why_not:
        notes.append(why_not)
    conv = _conv_fix(f)
    if conv is not None:
        fixes.append(conv)
    if cuda:
        fixes.append(Fix("TF32 matmuls and the cuDNN autotuner "
                         "(torch.backends.cuda.matmul.allow_tf32 = True; cudnn.benchmark = True)",
                         "faster float32 matmul and convolution kernels on Ampere+",
                         (lint_ref("tf32-disabled", "tf32"), lint_ref("cudnn-autotuner-off", "cudnn"))))
    if memory:
        fixes.append(Fix("fused/foreach optimizer; avoid needless .clone()/.contiguous()",
                         "fewer full passes over memory", ()))
    else:
        fixes.append(Fix("torch.compile(model)", "fuses the operators around the matmuls",
                         ("pitstop bench",)))
    fixes.append(BENCH)
    return fixes, notes


def host_fixes(f: dict[str, Any], probe: dict[str, Any], syncs: float) -> list[Fix]:
    cuda = f.get("device") == "cuda"
    fixes = []
    if cuda and syncs >= 1:
        fixes.append(Fix("Remove the host-device syncs in the loop (see PF004 lines)",
                         f"{syncs:.1f} syncs per step drain the GPU queue",
                         (lint_ref("sync-in-hot-loop", "sync"), "PF004")))
    fixes += [
        Fix("Vectorise: replace Python loops over tensors/elements with batched ops",
            f"{probe.get('compute_ops_per_step', probe.get('ops_per_step'))} operators per step, "
            "most of them tiny", ("PF003",)),
        Fix("torch.compile(model)" + (" (mode=\"reduce-overhead\" adds CUDA graphs)" if cuda else ""),
            "fuses small operators and removes per-op dispatch", ("pitstop bench",)),
        Fix("Use a larger batch if memory allows",
            "the same number of operators then does more work each", ()),
    ]
    if cuda:
        fixes.append(Fix("Use foreach/fused optimizers (torch.optim.AdamW(fused=True))",
                         "one kernel per parameter group instead of several per tensor", ()))
    fixes.append(BENCH)
    return fixes


def contention_fixes(f: dict[str, Any]) -> list[Fix]:
    procs = f.get("foreign_procs") or []
    names = ", ".join(p["name"] for p in procs[:3]) or "the other processes"
    threads = f.get("torch_threads")
    cores = f.get("cpu_count") or 0
    return [
        Fix(f"Stop, pause or move {names} while training, or run the training on cores they "
            "do not use (taskset/cgroups, or `nice -n 10` for the others)",
            "they take CPU time the training's threads wait for", ("PF013",)),
        Fix("Give the training fewer threads than there are free cores "
            f"(torch.set_num_threads(N); now {threads} on {cores} cores): "
            "pitstop.train.use_training_threads() computes N",
            "oversubscribed threads lose their time slices in the middle of parallel "
            "operators and wait for each other", ("pitstop.train",)),
        Fix("Profile again when the machine is quieter to see the training's own bottleneck",
            "the shares above are measured under contention", ()),
    ]


def python_fixes(sites: list[dict[str, Any]]) -> list[Fix]:
    top = ", ".join(s["site"] for s in sites[:3]) or "the loop"
    return [
        Fix(f"Look at {top}: move work that need not run every step out of the loop, or do it "
            "on tensors in batches",
            "the loop's own Python between the model calls takes this time", ("PF012",)),
        BENCH,
    ]
