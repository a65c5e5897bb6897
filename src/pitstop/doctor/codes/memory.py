"""Documentation of the memory / OS codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import SYSTEM_APPLY, P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR050", "shm-too-small", "/dev/shm too small for DataLoader workers", "memory", P,
        "Reads the size of `/dev/shm` (statvfs, or the tmpfs `size=` mount option).",
        "DataLoader workers pass every batch to the main process through shared memory. A "
        "typical image batch is ~154 MB; 8 workers x 2 prefetched batches need ~2.5 GB. "
        "Docker's default 64 MB makes workers die with 'bus error' / 'No space left on device', "
        "or forces `num_workers=0`.",
        "```\nERROR: Unexpected bus error encountered in worker. This might be caused by "
        "insufficient shared memory (shm).\n```",
        "```sh\ndocker run --shm-size=16g ...    # or --ipc=host\n"
        "# Kubernetes: emptyDir {medium: Memory} mounted at /dev/shm\n"
        "# host: sudo mount -o remount,size=50% /dev/shm (and /etc/fstab)\n```\n"
        + SYSTEM_APPLY.format("shm"),
        "safe: tmpfs uses memory only for what is stored."),
    doc("DR051", "swap-in-use", "Swap in use", "memory", W,
        "Reads SwapTotal/SwapFree from `/proc/meminfo`: more than 1 GiB or a quarter of swap "
        "used.",
        "Swapped pages of the training process, workers or page cache are read back from disk "
        "at random times: stalls of milliseconds to seconds.",
        "```\n6.2 GiB of swap in use\n```",
        "Find the memory users (`ps aux --sort=-rss | head`), reduce workers/prefetch or batch "
        "size, and move pages back with `sudo swapoff -a && sudo swapon -a` when RAM allows.",
        "manual: pitstop cannot know which memory users are safe to stop."),
    doc("DR052", "vm-swappiness-high", "vm.swappiness high on a machine with swap", "memory", W,
        "Reads `/proc/sys/vm/swappiness` when swap is configured.",
        "At the default 60 the kernel swaps out idle anonymous memory early to keep page cache: "
        "on a training box that means worker memory and pinned staging buffers.",
        "```\nvm.swappiness=60\n```",
        "```sh\nsudo sysctl -w vm.swappiness=10\necho 'vm.swappiness=10' | sudo tee /etc/sysctl.d/99-pitstop.conf\n```\n"
        + SYSTEM_APPLY.format("swappiness"),
        "safe: takes effect at once and only changes when the kernel swaps."),
    doc("DR053", "memory-available-low", "Little memory available", "memory", W,
        "Reads MemAvailable/MemTotal: below 2 GiB or 10 %. In a container or a Slurm job "
        "the cgroup memory limit (v2 `memory.max` up the hierarchy, v1 "
        "`memory.limit_in_bytes`) and its usage replace the host's numbers.",
        "DataLoader workers, pinned buffers and the page cache that keeps the dataset in RAM "
        "compete; the OOM killer may end the run.",
        "```\nonly 1.4 GiB (4 %) of 31.2 GiB memory available\n```",
        "Stop what is not needed (`ps aux --sort=-rss | head`), lower `num_workers` or "
        "`prefetch_factor`.",
        "manual: pitstop cannot know which processes are safe to stop."),
    doc("DR054", "transparent-hugepages-setting", "Transparent hugepages disabled or defrag=always",
        "memory", W,
        "Reads `/sys/kernel/mm/transparent_hugepage/enabled` and `defrag`.",
        "`never` forces 4 KiB pages for large host tensors and pinned buffers (more TLB misses) "
        "and makes PyTorch's `THP_MEM_ALLOC_ENABLE=1` useless; `defrag=always` stalls "
        "allocations on direct compaction.",
        "```\ntransparent hugepages disabled (enabled=never)\n```",
        "```sh\necho madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled\n"
        "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/defrag\n```\n"
        + SYSTEM_APPLY.format("thp") + " It sets `enabled` only; set `defrag` by hand.",
        "safe: madvise only gives hugepages to programs that ask for them."),
    doc("DR055", "memlock-limit-with-rdma", "Locked-memory limit too low for RDMA (NCCL over InfiniBand/RoCE)",
        "memory", W,
        "When `/sys/class/infiniband` lists RDMA devices, reads the soft `Max locked memory` "
        "limit in `/proc/self/limits`. In a container the host's devices show in sysfs too; "
        "there they count only when their verbs nodes (`/dev/infiniband/uverbs*`) were passed "
        "in.",
        "NCCL registers its buffers with the RDMA device, which pins (locks) them; with the "
        "common 64 KiB or 8 MiB limit registration fails and NCCL falls back to TCP sockets or "
        "aborts: multi-node all-reduce runs many times slower.",
        "```\nNET/IB : Unable to register memory ... ibv_reg_mr failed: Cannot allocate memory\n```",
        "```sh\nulimit -l unlimited\necho '* soft memlock unlimited\n* hard memlock unlimited' | "
        "sudo tee /etc/security/limits.d/99-rdma.conf\ndocker run --ulimit memlock=-1:-1 ...   "
        "# containers\n```",
        "safe: allows locking memory; it does not lock any by itself."),
]
