"""Environment variables that change how fast PyTorch, CUDA and NCCL run.

Only variables with these prefixes or names are kept, so a facts file shared in a bug
report does not carry the user's tokens.
"""

from __future__ import annotations

from typing import Any

from pitstop.doctor.probes import ProbeContext, read_environ

PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "TORCHDYNAMO_", "TORCHINDUCTOR_", "OMP_",
            "MKL_", "OPENBLAS_", "KMP_", "CUBLAS_", "CUDNN_", "NVIDIA_", "TF_")
NAMES = ("PYTHONDEVMODE", "PYTHONMALLOC", "PYTHONOPTIMIZE", "LD_PRELOAD", "LD_LIBRARY_PATH",
         "KUBERNETES_SERVICE_HOST", "SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "WORLD_SIZE",
         "LOCAL_WORLD_SIZE", "GOMP_CPU_AFFINITY", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS",
         "SLURM_GPUS_ON_NODE", "GPU_DEVICE_ORDINAL")
# Never copied even though they match a prefix.
SECRET_HINTS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def relevant(environ: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in sorted(environ.items())
        if (k.startswith(PREFIXES) or k in NAMES) and not any(s in k for s in SECRET_HINTS)
    }


def probe(ctx: ProbeContext) -> dict[str, Any]:
    env = read_environ(ctx.sysroot) if not ctx.live else dict(ctx.environ)
    return {"variables": relevant(env)}
