"""Finding codes of ``pitstop profile`` (PF###): the verdicts and what the profile saw."""

from __future__ import annotations

from pitstop.findings import CodeDoc, Severity, register
from pitstop.profile import verdict as v
from pitstop.profile.probe import SMALL_NUMEL, TINY_OP_US


def _p(share: float) -> str:
    return f"{100 * share:.0f} %"


_PROFILE = ("https://pytorch.org/docs/stable/profiler.html",)
_LOADER = ("https://pytorch.org/docs/stable/data.html#multi-process-data-loading",)

DOCS = (
    CodeDoc(
        code="PF001", name="input-bound", title="The training loop waits for the DataLoader",
        category="input", severity=Severity.PROBLEM,
        what="A large share of every step is spent inside the DataLoader iterator's "
             "`__next__`, i.e. the loop asks for the next batch and it is not ready: "
             f"≥ {_p(v.INPUT_SHARE)} of the step makes the verdict `input-bound` (a problem); "
             f"≥ {_p(v.INPUT_WARN_SHARE)} is reported as a warning under another verdict.",
        why="While the loop waits for data the model computes nothing: the accelerator (or "
            "the CPU cores doing the math) idles. Typical causes: `num_workers=0`, too few "
            "workers for an expensive decode/augment, per-sample Python work, workers "
            "re-created every epoch.",
        example="data wait 78 % of step time (93.4 ms of 120 ms), 0 DataLoader workers",
        fix="Give the loader worker processes (`num_workers`≈ cores per GPU, "
            "`persistent_workers=True`, `pin_memory=True` on CUDA), make `__getitem__` "
            "cheaper (decode once, cache pre-processed tensors). `pitstop.train.loader(dataset, "
            "batch_size, shuffle=True)` computes these settings for the machine; `pitstop "
            "bench` shows what workers buy on a reference workload; `pitstop lint` flags "
            "loader anti-patterns statically.",
        fix_safety="manual: loader settings change memory use and, with several workers, "
                   "the order in which side effects in `__getitem__` happen.",
        references=_LOADER),
    CodeDoc(
        code="PF002", name="io-bound", title="Reading the data from storage limits the loader",
        category="input", severity=Severity.PROBLEM,
        what=f"The loop waits for data (≥ {_p(v.INPUT_SHARE)} of the step, as for PF001) and "
             "storage is why: CPU iowait ≥ "
             f"{v.IOWAIT_PCT:.0f} %, or the busiest disk ≥ {v.DISK_BUSY_PCT:.0f} % busy, or "
             "the loader processes in uninterruptible disk sleep in ≥ 30 % of the samples, "
             "or they read ≥ 1 MB/s while running < 50 % of the time and using < 0.5 core "
             "(blocked on reads, not decoding).",
        why="More CPU work in workers will not help when the bytes arrive too slowly: a "
            "dataset on a network filesystem or a spinning disk, many small random reads, "
            "a cold page cache.",
        example="data wait 85 % of step time; loader read 4.1 MB/s while running 12 % of "
                "the time; disk busy 97 %",
        fix="Check the storage with `pitstop doctor --data PATH`; copy the dataset to a local "
            "NVMe disk or to RAM (`/dev/shm`) when it fits; pack small files into large "
            "shards read sequentially; raise read-ahead (`pitstop system apply --only "
            "readahead --data PATH`); more workers hide latency, not bandwidth.",
        fix_safety="manual: moving data and changing OS settings are the user's decision.",
        references=_LOADER),
    CodeDoc(
        code="PF003", name="host-bound", title="Host overhead dominates: many tiny operators",
        category="host", severity=Severity.PROBLEM,
        what="The operator probe (one warm-up step under `torch.profiler`) finds host "
             f"overhead ≥ {_p(v.HOST_OVERHEAD_SHARE)} of the compute time (forward + backward "
             "+ optimizer). Host overhead is the time between operators (Python, autograd, "
             f"dispatch) plus operators that are tiny: shorter than {TINY_OP_US:.0f} µs or "
             f"whose largest input has fewer than {SMALL_NUMEL} elements. On CUDA also when "
             f"the GPU runs kernels < {_p(v.GPU_BUSY_SHARE)} of the compute time (the headline "
             "says sync-bound when there is ≥ 1 host-device sync per step). Checked only "
             "when data wait is below the PF001 threshold.",
        why="Every PyTorch operator costs a few microseconds of host work however small the "
            "tensor. A loop of thousands of tiny ops keeps the host busy while the GPU (or "
            "the CPU's vector units) wait for work.",
        example="3 412 operators per step, median 4 µs; 81 % of compute time is host overhead",
        fix="Vectorise Python loops over tensors into batched ops; use a larger batch; "
            "`torch.compile(model)` fuses small ops (CUDA graphs with "
            "`mode=\"reduce-overhead\"` remove launch cost); use `foreach`/`fused` optimizers.",
        fix_safety="manual: compile and batching change numerics slightly and memory use.",
        references=_PROFILE),
    CodeDoc(
        code="PF004", name="host-device-syncs", title="The host waits for the GPU inside the step",
        category="sync", severity=Severity.WARNING,
        what="CUDA sync debug mode reported synchronising calls (`.item()`, `.cpu()`, "
             "`print(tensor)`, `torch.nonzero`, boolean masks...) during measured steps; the "
             "finding names the user's source lines.",
        why="A sync drains the GPU's queue: the host stops enqueuing work until the GPU has "
            "finished everything before it, then the GPU idles until the host catches up.",
        example="train.py:87: 50 syncs per step (loss.item())",
        fix="Keep values on the device and read them every N steps (`pitstop.train.Metrics`); "
            "run `pitstop lint` — its `sync` rules find these patterns and fix some of them.",
        fix_safety="manual: moving a read changes when values are printed.",
        references=("https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",)),
    CodeDoc(
        code="PF005", name="compute-bound", title="The step is spent computing",
        category="compute", severity=Severity.INFO,
        what="Data wait and host overhead are below their thresholds (PF001, PF003) and "
             f"forward + backward + optimizer take ≥ {_p(v.COMPUTE_SHARE)} of the step: the "
             "time goes into the model's operators (matrix multiplications and convolutions "
             "most of all).",
        why="This is where a training loop should be. The remaining levers make each "
            "operator cheaper rather than keep the device fed.",
        example="forward+backward+optimizer 91 % of step time; 78 % of operator time in conv/matmul",
        fix="Lower precision where the profile measured it faster on this model (its fix list "
            "quotes the in-process A/B: `bf16 autocast measured 1.31x here`), "
            "`channels_last` when convolutions dominate, `torch.compile`, a larger batch; "
            "`pitstop bench` measures each of these side by side on a reference workload, "
            "then time your own run again with `pitstop profile`.",
        fix_safety="manual: precision changes numerics.",
        references=_PROFILE),
    CodeDoc(
        code="PF006", name="memory-bound", title="Operators that move memory dominate the compute",
        category="compute", severity=Severity.WARNING,
        what="Most operator time goes to element-wise ops, normalisations, copies and "
             "optimizer updates rather than to matmul/convolution: the probe finds "
             f"matmul/conv/attention < {_p(v.MATMUL_SHARE)} of operator time (of kernel time "
             f"on CUDA) while compute is ≥ {_p(v.COMPUTE_SHARE)} of the step.",
        why="Such operators read and write every byte for a few flops each: their speed is "
            "memory bandwidth, and each one makes a full round trip through memory.",
        example="matmul/conv 22 % of operator time; top: aten::add_, aten::mul, aten::copy_",
        fix="Fuse with `torch.compile`; bf16 (half the bytes) where the profile's A/B measured it "
            "faster; `channels_last` when the operators are convolutions; a "
            "`fused=True`/`foreach=True` optimizer; avoid needless `.contiguous()`/`.clone()`.",
        fix_safety="manual.",
        references=_PROFILE),
    CodeDoc(
        code="PF007", name="straggler-rank", title="One rank is consistently slower than the others",
        category="distributed", severity=Severity.PROBLEM,
        what="Under torchrun, a rank's own work per step (step time minus time waiting in "
             "collectives, and minus backward under DDP, where the all-reduce waits) is "
             "≥ 15 % above the median of the other ranks in ≥ 60 % of the steps (and in "
             "the median step).",
        why="Data-parallel ranks meet at every gradient all-reduce: every rank runs at the "
            "speed of the slowest one.",
        example="rank 1: 182 ms of own work per step vs 96 ms median of the others, slower in 95 % of steps",
        fix="Look at that rank's breakdown in the report: an uneven data shard, a slower "
            "GPU/PCIe link (`pitstop doctor`), a noisy neighbour on its CPU cores, or extra "
            "work done only on that rank (logging, checkpointing on rank 0).",
        fix_safety="manual.",
        references=("https://pytorch.org/docs/stable/notes/ddp.html",)),
    CodeDoc(
        code="PF008", name="slow-host-to-device-copy", title="Host-to-device copies take a large share of the step",
        category="input", severity=Severity.WARNING,
        what="Calls of `.to(device)` / `.cuda()` on host tensors take "
             f"≥ {_p(v.H2D_SHARE)} of the step.",
        why="Copies from pageable memory are synchronous and slow; with pinned memory and "
            "`non_blocking=True` they overlap with compute.",
        example="h2d 14 ms per step (12 %), 96 MB per step",
        fix="`DataLoader(pin_memory=True)` and `.to(device, non_blocking=True)`, or "
            "`pitstop.train.DevicePrefetcher`; `pitstop lint` flags the pattern.",
        fix_safety="manual.",
        references=("https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",)),
    CodeDoc(
        code="PF009", name="unstable-step-time", title="Step times vary a lot",
        category="loop", severity=Severity.WARNING,
        what=f"The slowest tenth of steps take ≥ {v.UNSTABLE_RATIO}× the median step "
             "(p90 / median, over at least 5 measured steps).",
        why="Periodic stalls (a loader that cannot keep up in bursts, garbage collection, "
            "logging or checkpointing every N steps, another process on the machine) cost "
            "time the median hides.",
        example="step median 52 ms, p90 118 ms",
        fix="Look at the per-step plot in report.html for a period; move periodic work off "
            "the critical path; the report's CPU timeline (or `top`) shows other load on the "
            "machine.",
        fix_safety="manual.",
        references=_PROFILE),
    CodeDoc(
        code="PF010", name="gpu-memory-pressure", title="The CUDA allocator had to free its cache to allocate",
        category="memory", severity=Severity.WARNING,
        what="`torch.cuda.memory_stats()['num_alloc_retries']` > 0: allocations failed "
             "and succeeded only after the caching allocator released all cached blocks.",
        why="Each retry synchronises the device and calls `cudaFree`: slow, and a sign that "
            "the run is at the edge of an out-of-memory error.",
        example="12 allocator retries; peak 78.1 GiB of 80 GiB",
        fix="Smaller micro-batch with gradient accumulation (`TrainStep(microbatch=\"auto\")`), "
            "activation checkpointing, `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.",
        fix_safety="manual.",
        references=("https://pytorch.org/docs/stable/notes/cuda.html#memory-management",)),
    CodeDoc(
        code="PF011", name="no-steps-seen", title="No training step was seen",
        category="profile", severity=Severity.WARNING,
        what="The script ran without a `torch.optim` optimizer step, a `backward()` call or "
             "a DataLoader batch in a process pitstop instrumented, so there were no step "
             "boundaries to measure between.",
        why="Without step boundaries there is nothing to break down. A loop that never calls "
            "`backward()` nor iterates a DataLoader (a hand-rolled data source feeding a "
            "forward-only model), a run that failed before its first step, or a script run "
            "with `python -S`/`-I` (no site, so no instrumentation) looks like this.",
        example="0 optimizer steps, 0 backward() calls, 0 DataLoader batches",
        fix="Mark the steps yourself with the API: `with pitstop.profile.profile() as prof:` "
            "around the loop and `prof.step()` at the end of each step; or check that the "
            "script trains (its exit status is shown).",
        fix_safety="manual.",
        references=()),
    CodeDoc(
        code="PF012", name="time-outside-training-calls", title="Much of the step is outside forward, backward and the optimizer",
        category="loop", severity=Severity.WARNING,
        what=f"≥ {_p(v.OTHER_SHARE)} of the step is the loop's own Python: outside every hooked "
             "call (data, copies, forward, backward, optimizer) and, where the stack samples "
             "could tell, not an input pipeline, a functional model, an update rule, logging "
             "or checkpointing. The finding names the call sites with file:line.",
        why="Host-side bookkeeping, per-step metric computation or unhooked model code make "
            "the step longer without training.",
        example="other 41 % of step time; metrics (train.py:120) 30 %",
        fix="Move work that need not run every step out of the loop; keep metrics on the "
            "device (`pitstop.train.Metrics`); run `pitstop lint` (its `sync` and logging rules).",
        fix_safety="manual.",
        references=()),
    CodeDoc(
        code="PF013", name="cpu-contention", title="Processes outside the training take the CPUs it needs",
        category="host", severity=Severity.PROBLEM,
        what="During the measured steps, processes that are not part of the training job "
             f"(neither the command nor its children) used ≥ {_p(v.FOREIGN_CORES_SHARE)} of the "
             f"cores (and ≥ {v.FOREIGN_CORES_MIN} core), the host CPU was ≥ "
             f"{v.HOST_BUSY_PCT:.0f} % busy, and the training's threads spent ≥ "
             f"{_p(v.RUNQUEUE_WAIT_SHARE)} of their time runnable but waiting for a CPU "
             "(`/proc/PID/task/TID/schedstat`; without it: the host ≥ "
             f"{v.HOST_BUSY_NO_SCHEDSTAT_PCT:.0f} % busy). The verdict is `contention`; the "
             "bottleneck the step's shares show is named too.",
        why="Every part of the step runs slower when its threads wait for a core, and the "
            "shares of the breakdown describe a machine that is not the one training "
            "normally runs on. Parallel operators suffer most: one thread descheduled "
            "holds up all the others at the next barrier.",
        example="other processes use 1.1 of 2 cores (55 %): stress-ng (0.98 cores); the "
                "training waited for a CPU 46 % of its time",
        fix="Stop, pause or move the named processes; pin the training to cores they do not "
            "use (taskset, cgroups); `nice` the others; use fewer intra-op threads "
            "(`pitstop.train.use_training_threads`).",
        fix_safety="manual: other people's processes are theirs.",
        references=("https://docs.kernel.org/scheduler/sched-stats.html",)),
    CodeDoc(
        code="PF014", name="outside-step-work", title="Logging or checkpointing takes a large share of the loop",
        category="loop", severity=Severity.WARNING,
        what=f"The stack samples find ≥ {_p(v.OUTSIDE_SHARE)} of the loop's time in code that "
             "logs, prints, plots or saves (it calls `logging`, `torch.save`, TensorBoard, "
             "wandb, tqdm ..., or its line or name says so). That time is reported as outside "
             "the step and left out of the shares the verdict is decided on.",
        why="Logging and checkpointing every step cost time without training; a `.item()` or "
            "`print(loss)` inside them also synchronises with the GPU.",
        example="outside the step 18 %: save_checkpoint (train.py:210) calls torch.save",
        fix="Log and save every N steps or in a background thread; keep running metrics on the "
            "device (`pitstop.train.Metrics`) and read them when logging.",
        fix_safety="manual.",
        references=()),
    CodeDoc(
        code="PF015", name="input-pipeline-in-loop", title="The loop's own input pipeline holds up every step",
        category="input", severity=Severity.PROBLEM,
        what="Batches come from the loop's own code rather than a DataLoader (a `get_batch` "
             "that slices an array, a generator, a custom prefetcher), and the stack samples "
             f"find that code taking ≥ {_p(v.INPUT_WARN_SHARE)} of the step (input-bound at "
             f"≥ {_p(v.INPUT_SHARE)}, with the DataLoader wait). The function is named with "
             "file:line: the operator probe saw it make the tensors the model was then called "
             "with, or it is an iterator/generator or is named like a batch source.",
        why="Made in the training process between steps, every batch is waited for: the model "
            "computes nothing meanwhile.",
        example="get_batch (train.py:116) makes the batches in the training loop: 72 % of the step",
        fix="Wrap the code in a `Dataset`/`IterableDataset` and iterate a DataLoader with "
            "workers (`pitstop.train.loader`), or fill a queue from a background thread; "
            "keep the data as one tensor or a memory-mapped array and slice it instead of "
            "per-sample Python.",
        fix_safety="manual: moving work to workers changes when its side effects run.",
        references=_LOADER),
)

register(*DOCS)
