"""Documentation of the environment codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR070", "cuda-launch-blocking", "CUDA_LAUNCH_BLOCKING=1 left set", "environment", P,
        "Reads `CUDA_LAUNCH_BLOCKING` from the environment.",
        "It makes every kernel launch synchronous: the CPU waits for each kernel before queuing "
        "the next, so the GPU idles between kernels. Training is often several times slower.",
        "```sh\nexport CUDA_LAUNCH_BLOCKING=1   # left over from debugging\n```",
        "```sh\nunset CUDA_LAUNCH_BLOCKING   # and remove it from ~/.bashrc / job scripts / ENV\n```",
        "safe: only debugging output order changes."),
    doc("DR071", "debug-settings-left-on", "Debugging settings left on in the environment",
        "environment", W,
        "Reads debug variables: `TORCH_SHOW_CPP_STACKTRACES`, `NCCL_DEBUG=INFO/TRACE`, "
        "`TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL`, `TORCH_CPP_LOG_LEVEL=INFO`, `TORCH_LOGS`, "
        "`TORCH_COMPILE_DEBUG`, `TORCHDYNAMO_VERBOSE`, `TORCH_USE_CUDA_DSA`, "
        "`TORCH_NCCL_BLOCKING_WAIT`, `PYTHONDEVMODE`, `PYTHONMALLOC=debug`. (Anomaly detection "
        "is set in code and cannot be seen from outside: `pitstop lint` finds it.)",
        "Logging every NCCL call or every compiled graph, checking every collective's shapes "
        "(DETAIL adds synchronisations) and blocking waits all cost time on every step.",
        "```\nTORCH_DISTRIBUTED_DEBUG=DETAIL (DETAIL checks every collective's shapes)\n```",
        "```sh\nunset TORCH_DISTRIBUTED_DEBUG NCCL_DEBUG TORCH_SHOW_CPP_STACKTRACES\n```",
        "safe: removes debugging output and checks only; results are unchanged."),
    doc("DR072", "cuda-caching-allocator-disabled", "CUDA caching allocator disabled", "environment", P,
        "Reads `PYTORCH_NO_CUDA_MEMORY_CACHING`.",
        "With it set every tensor allocation and free calls cudaMalloc/cudaFree, which "
        "synchronise the device: training slows dramatically.",
        "```sh\nexport PYTORCH_NO_CUDA_MEMORY_CACHING=1   # left over from memory debugging\n```",
        "```sh\nunset PYTORCH_NO_CUDA_MEMORY_CACHING\n```",
        "safe: the caching allocator is the default; results are unchanged."),
    doc("DR073", "nccl-transport-disabled", "NCCL transports disabled", "environment", W,
        "Reads `NCCL_P2P_DISABLE`, `NCCL_IB_DISABLE`, `NCCL_SHM_DISABLE`, `NCCL_P2P_LEVEL=LOC`, "
        "`NCCL_NET=Socket`.",
        "These force NCCL off NVLink/PCIe peer-to-peer or InfiniBand onto slower paths (host "
        "memory, TCP): all-reduce bandwidth drops by 2-20x. They are often copied from a "
        "workaround for one broken machine.",
        "```sh\nexport NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1\n```",
        "```sh\nunset NCCL_P2P_DISABLE NCCL_IB_DISABLE\n# measure: nccl-tests all_reduce_perf -b 8 -e 1G -f 2 -g 8\n```",
        "manual: keep a setting only if a measured hang or corruption needs it."),
    doc("DR074", "cuda-visible-devices-hides-gpus", "CUDA_VISIBLE_DEVICES hides GPUs", "environment", P,
        "Parses `CUDA_VISIBLE_DEVICES`: empty, `-1` or `NoDevFiles` hide every GPU; indexes "
        "beyond the GPU count make CUDA stop at the first invalid entry.",
        "torch sees no (or fewer) GPUs and trains on the CPU or on fewer GPUs than the machine "
        "has.",
        "```sh\nexport CUDA_VISIBLE_DEVICES=''   # from a CPU-only test\n```",
        "```sh\nunset CUDA_VISIBLE_DEVICES   # or list valid indexes: export CUDA_VISIBLE_DEVICES=0,1\n```",
        "safe: it only changes which devices torch sees."),
    doc("DR075", "cuda-alloc-conf-invalid", "PYTORCH_CUDA_ALLOC_CONF has entries torch does not know",
        "environment", W,
        "Parses `PYTORCH_CUDA_ALLOC_CONF` (or `PYTORCH_ALLOC_CONF`) as `key:value,...` and "
        "checks every key against the caching allocator's options (`expandable_segments`, "
        "`max_split_size_mb`, `garbage_collection_threshold`, `backend`, ...).",
        "An unknown key or a malformed entry makes the first CUDA allocation raise, after the "
        "whole job has started; a valid one is reported for the record.",
        "```sh\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True   # typo: segments\n```",
        "```sh\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```",
        "safe. A key added by a torch newer than pitstop may be flagged: check the torch docs."),
]
