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
        fix="Lower precision (bf16 autocast, `pitstop.train.TrainStep(precision=\"auto\")`), "
            "`channels_last` for CNNs, `torch.compile`, a larger batch; `pitstop bench` measures each of these side by side on a "
            "reference workload, then time your own run again with `pitstop profile`.",
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
        fix="Fuse with `torch.compile`; use bf16 (half the bytes); `channels_last`; a "
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
        what="The script ran without a `torch.optim` optimizer step or DataLoader batch "
             "in a process pitstop instrumented.",
        why="Without step boundaries there is nothing to break down. Custom loops that "
            "update weights by hand, or a run that failed before its first step, look like this.",
        example="0 optimizer steps, 0 DataLoader batches",
        fix="Profile with the API (`with pitstop.profile.profile() as prof: ... prof.step()`), "
            "or check that the script trains (its exit status is shown).",
        fix_safety="manual.",
        references=()),
    CodeDoc(
        code="PF012", name="time-outside-training-calls", title="Much of the step is outside forward, backward and the optimizer",
        category="loop", severity=Severity.WARNING,
        what=f"≥ {_p(v.OTHER_SHARE)} of the step is spent in none of the hooked calls (data, copies, "
             "forward, backward, optimizer): Python in the loop itself.",
        why="Logging, metric computation, per-step `.item()`, host-side bookkeeping or "
            "unhooked model code make the step longer without training.",
        example="other 41 % of step time",
        fix="Log every N steps and keep metrics on the device (`pitstop.train.Metrics`); run "
            "`pitstop lint` (its `sync` and logging rules).",
        fix_safety="manual.",
        references=()),
)

register(*DOCS)
