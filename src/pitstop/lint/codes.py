"""The documentation of every ``pitstop lint`` code (LT###), registered at import.

One code per rule; ``category`` is the rule's category as listed in docs/lint.md and
carried in the ``category`` field of the JSON output.
"""

from __future__ import annotations

from pitstop.findings import CodeDoc, Severity, register

P, W, I = Severity.PROBLEM, Severity.WARNING, Severity.INFO  # noqa: E741

LINT_DOCS = (
    CodeDoc(
        code="LT001", name="sync-in-hot-loop", category="sync", severity=P,
        title="Host-device synchronisation on every iteration of a training/evaluation loop",
        what=(
            "Finds operations that make the CPU wait for the GPU, run unguarded on every "
            "iteration of a hot loop -- a training loop: it iterates batches (a loader, "
            "`enumerate`/`tqdm`/`zip`/`islice`/`log_every` of one, a prefetcher, `next(it)` in "
            "a `while`, a generator over a loader) or steps, and its body reaches `backward()`, "
            "`accelerator.backward()` or an optimizer step, directly or anywhere in the program "
            "the calls lead (a `train_step` in another module, a `Trainer` method, a callable "
            "whose `__call__` runs backward, an ignite `Engine` step); an evaluation loop: it "
            "iterates batches and runs the model. Calls made per batch are followed into the "
            "functions, methods, callable objects and `forward()`s they reach, in any module of "
            "the program (also a subclass's method that a base trainer's loop calls on `self`), "
            "and the finding is reported where the sync is; the `step()` of an optimizer the "
            "program defines (LARS, LAMB) runs once per training step too, over the model's "
            "parameters. Flagged on values "
            "that are GPU tensors in a program that can run on an accelerator (model outputs, "
            "losses, `.to(device)`/`.cuda()` results, batches of an accelerate/Fabric loader, "
            "what is computed from them): `.item()`, `.cpu()`, `.numpy()`, `.tolist()`, "
            "`.to('cpu')`, `float()/int()/bool()` of a tensor, `print()`, f-string, `%` and "
            "`.format()` formatting of a tensor (also `*tensor` unpacked), `math.isfinite(t)`, "
            "`torch.cuda.synchronize()`, `torch.cuda.empty_cache()`, `if`/`while`/`assert` on a "
            "tensor (`assert torch.isfinite(loss).all()`, `if torch.isnan(loss):`), `.nonzero()`, "
            "`torch.where(cond)`, `unique()`, boolean-mask indexing (also `x[:, mask]` and "
            "assignments through it), a GPU tensor as a slice bound, storing a GPU tensor into "
            "a CPU tensor, tensors handed to progress bars (`set_postfix`) and experiment "
            "loggers (`writer.add_scalar`, `wandb.log`, `mlflow.log_metric`), and `.item()` "
            "on values computed from GPU tensors by a library function (`acc1, acc5 = "
            "accuracy(output, target)`), Python's `max()`/`min()` over GPU values, and the "
            "pre-0.4 `loss.data[0]`. A GPU index named as a mask (`x[pos_mask]`) or inverted "
            "(`x[~masked]`) is a boolean mask.\n\nNot flagged: code under a rare guard (`if "
            "step % N == 0:`, `if i == len(loader) - 1:`, `if should_log:`, after `if step % N: "
            "continue` or a progress gate, an opt-in option or parameter that defaults to False "
            "(`if args.synchronize_step:`), also a function that trains nothing and is only "
            "called under one (`if args.eval: test()`)), epoch-level code after the batch loop, "
            "host-to-device copies (`images.to(device)` uploads, it is no sync), loops that run "
            "once (a throughput pass that returns after one batch), benchmark/profiling "
            "functions, `generate()` loops and greedy/beam search (they read the host on "
            "purpose), a pass over a loader whose one batch is the whole split "
            "(`batch_size=len(dataset)`), test code, and "
            "values certainly on the CPU. `if (step + 1) % grad_accum == 0:` is not a rare "
            "guard: it is the optimizer step.\n\nWhere the accelerator is inferred (a device "
            "chosen at run time), the message says the value *may* live on the GPU; the "
            "evidence names where the device comes from (`train.py:12 (torch.accelerator)`)."
        ),
        why=(
            "CUDA runs asynchronously: the CPU queues kernels and moves on, and the GPU stays "
            "busy as long as the queue is fed. Reading a GPU value on the host drains the queue "
            "first; the GPU then idles while Python prepares the next step. One `.item()` per "
            "step typically costs 5-30% of throughput on a small model, more with many of them."
        ),
        example=(
            "```python\nfor x, y in loader:\n    x, y = x.to(device), y.to(device)\n"
            "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
            "    total += loss.item()      # LT001: waits for the GPU every step\n```"
        ),
        fix=(
            "Accumulate on the device and read it at log intervals:\n\n```python\n"
            "running = torch.zeros((), device=device)\nfor step, (x, y) in enumerate(loader):\n"
            "    ...\n    running += loss.detach()\n    if step % 100 == 0:\n"
            "        print(running.item() / 100); running.zero_()\n```"
        ),
        fix_safety="No automatic fix: where to read the value is a decision about the program.",
        references=("https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
                    "#avoid-unnecessary-cpu-gpu-synchronization",),
    ),
    CodeDoc(
        code="LT002", name="dataloader-no-workers", category="loader-workers", severity=P,
        title="DataLoader built with num_workers absent or 0",
        what=(
            "Finds `DataLoader(...)` calls (and drop-ins that take its arguments: torchdata's "
            "`StatefulDataLoader`, webdataset's `WebLoader`, PyG's loaders) whose `num_workers` "
            "is 0 on every path: absent, `0`, absent from every `**kwargs` dict the call can "
            "receive (literal, conditional, `.update()`d, merged, returned by a factory), or an "
            "option whose default is 0 (`num_workers=args.workers` with `default=0`). Silent "
            "for a `TensorDataset` or a Dataset whose `__getitem__` calls nothing (nothing to "
            "decode: workers would only copy items between processes), and for a loader whose "
            "one batch is the whole split (`batch_size=len(dev_set)`: loaded once per pass)."
        ),
        why=(
            "With no workers, loading, decoding, augmenting and collating every batch happens "
            "in the training process, between steps, while the GPU waits. Worker processes "
            "prepare the next batches in parallel."
        ),
        example="```python\nloader = DataLoader(ds, batch_size=64, shuffle=True)\n```",
        fix=(
            "Set `num_workers`. The message suggests a start value from the CPUs this process "
            "may use (`os.sched_getaffinity`) and `LOCAL_WORLD_SIZE`, using Lightning's "
            "conservative bound `max(1, cpus // local_world_size - 1)`; the real optimum "
            "depends on the dataset, so measure it (`pitstop bench`).\n\n```python\n"
            "loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=7)\n```"
        ),
        fix_safety=(
            "Unsafe (`--unsafe-fixes`): with workers the dataset must be picklable, an "
            "`IterableDataset` yields each item once per worker unless it shards by "
            "`get_worker_info()`, and random state differs per worker; the number written is "
            "specific to the machine the fix ran on."
        ),
        references=("https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
                    "https://lightning.ai/docs/pytorch/stable/advanced/speed.html"),
    ),
    CodeDoc(
        code="LT003", name="dataloader-no-pin-memory", category="loader-pin-memory", severity=W,
        title="DataLoader whose batches go to a GPU, built without pin_memory=True",
        what=(
            "Finds `DataLoader(...)` calls without `pin_memory=True` (on the GPU path: "
            "`pin_memory=args.pin` defaulting to False counts as off) in a program that copies "
            "the loader's batches to a GPU -- anywhere in the program: `.to(device)`, a "
            "`to_device(batch, device)` helper, or `accelerator.prepare(loader)`, whose batches "
            "are moved for you. Silent for a `TensorDataset`, for data already on the device, "
            "for ignite's `auto_dataloader` (it pins on CUDA itself), and for a loader whose "
            "one batch is the whole split (`batch_size=len(dev_set)`: one copy per pass)."
        ),
        why=(
            "Copies from pageable host memory go through a driver staging buffer, run at a "
            "fraction of PCIe bandwidth and cannot overlap with compute. Pinned (page-locked) "
            "batches copy by DMA and can be asynchronous (`non_blocking=True`)."
        ),
        example="```python\nloader = DataLoader(ds, batch_size=64, num_workers=8)\n```",
        fix="```python\nloader = DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True)\n```",
        fix_safety=(
            "Safe when `pin_memory` is absent (only where the batches provably go to a GPU): "
            "results are identical, only host memory is page-locked. Replacing an explicit "
            "`pin_memory=False` is unsafe: someone may have turned it off on purpose (little "
            "host RAM)."
        ),
        references=("https://pytorch.org/docs/stable/data.html#memory-pinning",),
    ),
    CodeDoc(
        code="LT004", name="dataloader-respawns-workers", category="loader-persistent-workers",
        severity=W,
        title="DataLoader with workers iterated for several epochs without persistent_workers=True",
        what=(
            "Finds `DataLoader(...)` calls with workers (`num_workers` not 0 on some path) and "
            "no `persistent_workers=True` whose loader is iterated again and again: inside an "
            "outer (epoch) loop, in a function called in one (also through a `Trainer` method, "
            "an event handler, a generator that cycles over it), a validation loader re-entered "
            "during training, a Lightning-style `trainer.fit` of more than one epoch -- in any "
            "module of the program, following the loader through returns, tuples and class "
            "attributes. When the analysis cannot see where a training program consumes a "
            "loader, it assumes it is re-iterated. Silent when the loader is turned into one "
            "iterator for the whole run (`iter(DataLoader(...))` outside any loop), for a "
            "subclass that re-uses its workers, for a sampler that spans the run in one pass "
            "(`IterationBasedBatchSampler`, `MultiEpochSampler`, an infinite sampler), for a "
            "new loader built for each pass and iterated once (there or by the helper it is "
            "handed to), and for an epoch loop of `range(1)` or an `--epochs` option that "
            "defaults to 1."
        ),
        why=(
            "Without persistent workers every epoch starts by killing the worker processes and "
            "spawning new ones, which re-import modules, re-open files and rebuild the dataset "
            "copy: seconds of idle GPU per epoch, minutes for short epochs or large datasets."
        ),
        example=(
            "```python\nloader = DataLoader(ds, batch_size=64, num_workers=8)\n"
            "for epoch in range(90):\n    for x, y in loader:\n        ...\n```"
        ),
        fix="```python\nloader = DataLoader(ds, batch_size=64, num_workers=8, persistent_workers=True)\n```",
        fix_safety=(
            "Safe when `num_workers` is a literal above 0 (or a name: the fix writes "
            "`persistent_workers=workers > 0`, valid for 0 too) and the program changes no "
            "dataset state between epochs. Unsafe when it calls `set_epoch` on something other "
            "than a sampler (persistent workers keep their own dataset copy and would not see "
            "it), or when replacing an explicit `persistent_workers=False`."
        ),
        references=("https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",),
    ),
    CodeDoc(
        code="LT005", name="cudnn-autotuner-off", category="cudnn-benchmark", severity=W,
        title="Convolutional GPU training without torch.backends.cudnn.benchmark = True",
        what=(
            "Finds a GPU training loop in a program (the modules that run with it, across "
            "files) that builds convolutions -- also inside models it loads, such as "
            "torchvision ResNets or diffusers' `UNet2DConditionModel.from_pretrained` -- and "
            "never sets `torch.backends.cudnn.benchmark = True`, "
            "or sets it to False. Silent when the program asks for determinism "
            "(`cudnn.deterministic = True`, `torch.use_deterministic_algorithms(True)`)."
        ),
        why=(
            "With the autotuner off cuDNN picks a convolution algorithm by heuristics. With it "
            "on, it times the candidates once per input shape and keeps the fastest: often "
            "10-30% faster convolutions when input sizes are fixed (variable sizes re-tune for "
            "every new shape)."
        ),
        example="```python\nmodel = torchvision.models.resnet50().cuda()\nfor x, y in loader:\n    ...\n```",
        fix="```python\ntorch.backends.cudnn.benchmark = True\n```",
        fix_safety=(
            "Unsafe: the chosen algorithms may differ between runs (results are not bitwise "
            "reproducible) and inputs of changing shape pay the tuning cost repeatedly. The "
            "fix inserts the line after the imports, or flips an explicit False."
        ),
        references=("https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",),
    ),
    CodeDoc(
        code="LT006", name="fp32-training-without-autocast", category="amp-missing", severity=W,
        title="GPU training loop in a program that never uses autocast",
        what=(
            "Finds a GPU training loop in a program -- the modules it imports and the ones "
            "that import it, across files -- that never uses autocast (`torch.autocast`, "
            "`torch.amp`, `torch.cuda.amp`, `accelerator.autocast()`), `.half()`, bfloat16 or "
            "float16, apex amp, a DeepSpeed fp16/bf16 config, or a mixed-precision setting "
            "(`Accelerator(mixed_precision=...)`, also from a command-line option; Lightning "
            "`precision=`). A GradScaler alone does not count: without autocast it scales an "
            "fp32 loss. Silent when the precision comes from outside the code (a bare "
            "`Accelerator()` reads `accelerate config`; `deepspeed.initialize` its JSON)."
        ),
        why=(
            "Tensor cores run fp16/bf16 matmuls and convolutions several times faster than "
            "fp32, and half-size activations double the batch that fits. Autocast picks the "
            "precision per operation, keeping reductions and losses in fp32."
        ),
        example="```python\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n```",
        fix=(
            "```python\nwith torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
            "    loss = criterion(model(x), y)\nloss.backward()\n```\nWith fp16 also use "
            "`torch.amp.GradScaler(\"cuda\")`; `pitstop.train.TrainStep(precision=\"auto\")` "
            "does both."
        ),
        fix_safety="No automatic fix: mixed precision changes numerics and needs a judgement.",
        references=("https://pytorch.org/docs/stable/amp.html",),
    ),
    CodeDoc(
        code="LT007", name="deprecated-cuda-amp", category="amp-deprecated", severity=I,
        title="Deprecated torch.cuda.amp / torch.cpu.amp API",
        what=(
            "Finds calls of `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler` and "
            "`torch.cpu.amp.autocast` (also when imported by name, aliased, or handed to "
            "`functools.partial` to be called later), deprecated since PyTorch 2.4."
        ),
        why=(
            "They emit a FutureWarning on every construction (every step for autocast) and "
            "will be removed; `torch.amp` takes the device type as an argument."
        ),
        example="```python\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast(dtype=torch.float16):\n    ...\n```",
        fix="```python\nscaler = torch.amp.GradScaler(\"cuda\")\nwith torch.amp.autocast(\"cuda\", dtype=torch.float16):\n    ...\n```",
        fix_safety=(
            "Safe: same defaults; positional arguments are rewritten as keywords because the "
            "new signatures put the device type first. Applied when the module has `torch` "
            "imported under its own name."
        ),
        references=("https://pytorch.org/docs/stable/amp.html",),
    ),
    CodeDoc(
        code="LT008", name="blocking-host-to-device-copy", category="non-blocking", severity=W,
        title="Per-batch copy of pinned batch data to the GPU without non_blocking=True",
        what=(
            "Finds `.to(device)` / `.cuda()` of batch data inside a hot loop without "
            "`non_blocking=True`, when the batches come pinned: from a loader that pins memory "
            "(wherever in the program it is built, through `**kwargs` too), or a tensor pinned "
            "right there (`x.pin_memory().to(device)`). Batches that accelerate or Fabric "
            "already placed on the device are not copies."
        ),
        why=(
            "A blocking copy makes the CPU wait until the transfer finishes, so it cannot queue "
            "the forward pass meanwhile. From pinned memory `non_blocking=True` makes the copy "
            "asynchronous and stream-ordered: kernels that use the tensor still wait for it."
        ),
        example="```python\nfor x, y in loader:  # DataLoader(..., pin_memory=True)\n    x = x.to(device)\n```",
        fix="```python\n    x = x.to(device, non_blocking=True)\n```",
        fix_safety=(
            "Safe when the keyword is absent: the copy and every GPU use of the result are "
            "ordered on the same stream, and loader batches are not written by the CPU "
            "afterwards. Replacing an explicit `non_blocking=False` is unsafe."
        ),
        references=("https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",),
    ),
    CodeDoc(
        code="LT009", name="zero-grad-not-none", category="zero-grad", severity=W,
        title="zero_grad(set_to_none=False) or gradients zeroed by hand",
        what=(
            "Finds `zero_grad(set_to_none=False)`, `zero_grad(False)`, "
            "`zero_grad(set_to_none=args.flag)` where the option defaults to False, "
            "`p.grad.zero_()` and `p.grad.data.zero_()`."
        ),
        why=(
            "Zeroing launches a memset kernel per parameter every step and keeps the gradient "
            "memory allocated between steps; setting gradients to None costs nothing and the "
            "next backward allocates them as it writes them."
        ),
        example="```python\noptimizer.zero_grad(set_to_none=False)\n```",
        fix="```python\noptimizer.zero_grad()  # set_to_none=True is the default since PyTorch 2.0\n```",
        fix_safety=(
            "Unsafe (`--unsafe-fixes`): code that reads `p.grad` after zero_grad sees None "
            "instead of zeros, and some optimizers treat a None gradient as 'skip this "
            "parameter'. Hand-written `p.grad.zero_()` has no automatic fix."
        ),
        references=("https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",),
    ),
    CodeDoc(
        code="LT010", name="ddp-accumulation-without-no-sync", category="ddp-no-sync", severity=P,
        title="Gradient accumulation under DDP without no_sync()",
        what=(
            "Finds a training loop that accumulates gradients (backward on every micro-step, "
            "the optimizer step under `if (i + 1) % accum == 0` or outside an inner micro-step "
            "loop, or a loss scaler called with `update_grad=(idx + 1) % accum == 0`) in a "
            "program that uses DistributedDataParallel (also through accelerate or ignite's "
            "`auto_model`) and never uses `no_sync()`, `require_backward_grad_sync` or "
            "`accelerator.accumulate()`."
        ),
        why=(
            "DDP all-reduces gradients during every backward(). With accumulation only the "
            "last micro-step's all-reduce is needed; the others move the whole gradient over "
            "the network for nothing, multiplying communication by the accumulation factor."
        ),
        example=(
            "```python\nfor i, (x, y) in enumerate(loader):\n    loss = model(x, y) / accum\n"
            "    loss.backward()\n    if (i + 1) % accum == 0:\n        optimizer.step(); "
            "optimizer.zero_grad()\n```"
        ),
        fix=(
            "```python\nfor i, (x, y) in enumerate(loader):\n    last = (i + 1) % accum == 0\n"
            "    model.require_backward_grad_sync = last   # or: with model.no_sync(): ...\n"
            "    (model(x, y) / accum).backward()\n    if last:\n        optimizer.step(); "
            "optimizer.zero_grad()\n```"
        ),
        fix_safety="No automatic fix: the micro-step structure differs from program to program.",
        references=("https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#torch.nn.parallel.DistributedDataParallel.no_sync",),
    ),
    CodeDoc(
        code="LT011", name="tf32-disabled", category="tf32", severity=W,
        title="float32 GPU training program that never enables TF32",
        what=(
            "Finds a GPU training loop in a float32 program (no autocast or mixed precision, "
            "see LT006) whose matmuls do real work -- attention or transformer layers, "
            "explicit `matmul`/`bmm`/`einsum`/`@`, RNN cells, or Linear layers that are more "
            "than a head on a convolutional or recurrent network (an MLP; a language model's "
            "vocabulary layer, next to an Embedding) -- and that never calls "
            "`torch.set_float32_matmul_precision('high'|'medium')` or sets "
            "`torch.backends.cuda.matmul.allow_tf32 = True`. Not raised for conv-only "
            "networks: cuDNN convolutions (and RNNs) already use TF32 by default."
        ),
        why=(
            "PyTorch computes float32 matmuls in full IEEE fp32 by default. On Ampere and newer "
            "GPUs TF32 runs them on tensor cores several times faster, with a 10-bit mantissa "
            "that is plenty for training."
        ),
        example="```python\nmodel = Model().cuda()\nfor x, y in loader:\n    ...\n```",
        fix="```python\ntorch.set_float32_matmul_precision(\"high\")\n```",
        fix_safety=(
            "Unsafe: results change in the low bits. The fix inserts the line after the "
            "module's imports when `torch` is imported under its own name."
        ),
        references=("https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html",),
    ),
    CodeDoc(
        code="LT012", name="tensor-created-on-cpu", category="tensor-on-device", severity=W,
        title="Tensor created on the CPU and moved to the GPU inside a hot loop",
        what=(
            "Finds `torch.zeros(...).cuda()`, `torch.tensor(x).to(device)`, "
            "`(torch.ones(n) * i).to(device)`, `torch.LongTensor(range(n)).to(device)`, "
            "`torch.as_tensor(t).to(images)` and the like (a tensor built on the CPU and then "
            "moved) inside a hot loop or a module's `forward()`; also the same host data, "
            "loaded once at the top of the module, moved again on every step "
            "(`labels[idx_train].to(device)`). A tensor built only on a cache miss (`if key in "
            "cache: return cache[key]`) is not flagged."
        ),
        why=(
            "The tensor is allocated and filled on the host, then copied with a blocking "
            "transfer every step. Created with `device=`, it is built on the GPU directly, "
            "without the copy."
        ),
        example="```python\nmask = torch.ones(n, n).cuda()\n```",
        fix="```python\nmask = torch.ones(n, n, device=\"cuda\")\n```",
        fix_safety=(
            "Safe: the result has the same values, dtype and device. Applied when the move has "
            "no other arguments than the device (and non_blocking)."
        ),
        references=("https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
                    "#create-tensors-directly-on-the-target-device",),
    ),
    CodeDoc(
        code="LT013", name="eval-without-no-grad", category="no-grad-eval", severity=P,
        title="Evaluation loop runs the model without torch.no_grad()/inference_mode()",
        what=(
            "Finds an evaluation loop (over a loader, runs the model, no backward or optimizer "
            "step; in a function named like eval/validate/test or after `model.eval()`) that is "
            "not under `torch.no_grad()` / `torch.inference_mode()`, by a `with` block, a "
            "decorator, or at every call site of its function. Also a training loop whose "
            "backward is switched by a parameter (`if partition == \"train\":`) when the "
            "program calls it as an evaluation pass (`train(loader, partition=\"valid\")`) "
            "with autograd on."
        ),
        why=(
            "`model.eval()` does not turn autograd off. Without no_grad every activation is "
            "kept for a backward pass that never comes: more memory (smaller eval batches) and "
            "bookkeeping time on every operation."
        ),
        example="```python\ndef evaluate(model, loader):\n    model.eval()\n    for x, y in loader:\n        out = model(x)\n```",
        fix="```python\n@torch.inference_mode()\ndef evaluate(model, loader):\n    ...\n```",
        fix_safety="No automatic fix: code that calls backward on the outputs would break.",
        references=("https://pytorch.org/docs/stable/generated/torch.inference_mode.html",),
    ),
    CodeDoc(
        code="LT014", name="debug-api-in-training", category="debug-api", severity=P,
        title="Debugging API left on in training",
        what=(
            "Finds, in a program with a training loop, `torch.autograd.set_detect_anomaly(True)`, "
            "`with torch.autograd.detect_anomaly():`, `torch.autograd.profiler.emit_nvtx()` / "
            "`profile()` wrapping the whole training loop, and `gradcheck`/`gradgradcheck`. "
            "`gradcheck` and `with set_detect_anomaly(True):` count only inside the training "
            "loop or in the function that runs it: in a helper elsewhere (a test utility, a "
            "numeric-debugging pass) they cost nothing per step."
        ),
        why=(
            "Anomaly detection stores a traceback for every autograd node and checks every "
            "backward output for NaN; the autograd profilers record every operator of the "
            "whole run; gradcheck runs numerical differentiation in float64. Each makes "
            "training several times slower."
        ),
        example="```python\ntorch.autograd.set_detect_anomaly(True)\n```",
        fix=(
            "Remove it, or enable it behind a flag while debugging. Profile a few steps with "
            "`torch.profiler.profile(schedule=...)` or `pitstop profile`."
        ),
        fix_safety="Unsafe fix for `set_detect_anomaly(True)` (turned to False); the others are manual.",
        references=("https://pytorch.org/docs/stable/autograd.html#anomaly-detection",),
    ),
    CodeDoc(
        code="LT015", name="dataparallel-training", category="dataparallel", severity=W,
        title="torch.nn.DataParallel used for training",
        what=(
            "Finds `nn.DataParallel(...)` and its functional form "
            "`nn.parallel.data_parallel(...)` in a program that trains."
        ),
        why=(
            "DataParallel runs one process with a thread per GPU: it scatters inputs and "
            "replicates the model every step, gathers outputs on GPU 0 and is limited by the "
            "GIL. DistributedDataParallel (one process per GPU) is faster even on one machine, "
            "and PyTorch recommends it."
        ),
        example="```python\nmodel = nn.DataParallel(model).cuda()\n```",
        fix=(
            "Use DistributedDataParallel launched with `torchrun --nproc-per-node=N train.py` "
            "(see the DDP tutorial), or `pitstop.train` helpers."
        ),
        fix_safety="No automatic fix: moving to DDP changes how the program is launched.",
        references=("https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead",),
    ),
    CodeDoc(
        code="LT016", name="conv-bias-before-batchnorm", category="conv-bias-bn", severity=I,
        title="Convolution with a bias immediately followed by BatchNorm",
        what=(
            "Finds `ConvNd` layers built with `bias=True` (the default) whose output goes "
            "straight into a BatchNorm layer: adjacent in `nn.Sequential`/a list, or "
            "`self.bn(self.conv(x))` in the module."
        ),
        why=(
            "BatchNorm subtracts the per-channel mean, which cancels any constant bias: the "
            "conv bias is computed, stored, updated by the optimizer and all-reduced for "
            "nothing."
        ),
        example="```python\nnn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU())\n```",
        fix="```python\nnn.Sequential(nn.Conv2d(64, 128, 3, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU())\n```",
        fix_safety=(
            "Unsafe: the model's parameters change, so existing checkpoints no longer load "
            "with `strict=True`."
        ),
        references=("https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
                    "#disable-bias-for-convolutions-directly-followed-by-a-batch-norm",),
    ),
)

register(*LINT_DOCS)
