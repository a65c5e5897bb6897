"""Memory layer: /dev/shm for DataLoader workers, swap, available memory, hugepages."""

from __future__ import annotations

from pitstop.doctor import remedies
from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    check,
    gib,
    ok,
    problem,
    section,
    warning,
)
from pitstop.findings import Remedy
from pitstop.hostinfo import targets

# DataLoader workers hand every batch to the main process through /dev/shm. A typical
# image batch (256 x 3 x 224 x 224 float32) is 154 MB; 8 workers x prefetch_factor 2
# keep 16 in flight: about 2.5 GB. Below 1 GiB even small setups die with "bus error".
SHM_PROBLEM_BYTES = 1 << 30
SHM_WARNING_BYTES = 4 << 30


@check("DR050", "memory", 88)
def shm_size(facts: Facts) -> Outcome:
    mem = section(facts, "memory")
    shm = mem.get("shm") or {}
    if not shm.get("mounted") and "size_bytes" not in shm:
        raise CannotCheck("/dev/shm is not mounted (DataLoader workers will fail to share "
                          "tensors)")
    size = shm.get("size_bytes")
    if size is None:
        raise CannotCheck(f"the size of /dev/shm is unknown (size option {shm.get('size_option')!r})")
    container = facts.get("container") or {}
    ev = {"shm_size": gib(size), "shm_bytes": size, "source": shm.get("source"),
          "in_container": container.get("in_container"),
          "needed_estimate": "~2.5 GB for 8 workers x 2 prefetched 154 MB batches"}
    if size >= SHM_WARNING_BYTES:
        return ok(f"/dev/shm is {gib(size)}", **ev)
    total = mem.get("mem_total_bytes") or 0
    if not container.get("in_container") and total and size >= total // 2 - (64 << 20):
        # The host default (half of RAM) on a small machine: nothing to enlarge.
        return ok(f"/dev/shm is {gib(size)}, half of the {gib(total)} RAM (the default); "
                  "keep num_workers x prefetch_factor x batch size below it", **ev)
    if container.get("in_container"):
        if container.get("kubernetes"):
            fix = ("# Kubernetes: mount a memory-backed emptyDir at /dev/shm\n"
                   "volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]\n"
                   "volumeMounts: [{name: dshm, mountPath: /dev/shm}]")
        else:
            fix = ("docker run --shm-size=16g ...   # or --ipc=host (shares the host's /dev/shm)\n"
                   "# docker compose: shm_size: '16gb'")
    else:
        fix = ("sudo mount -o remount,size=50% /dev/shm   # tmpfs uses RAM only for what "
               "it stores\n"
               "# permanent: in /etc/fstab  tmpfs /dev/shm tmpfs defaults,size=50% 0 0\n"
               + remedies.system_apply("shm"))
    msg = (f"/dev/shm is only {gib(size)}: DataLoader workers crash with 'bus error' or "
           "'No space left on device' once batches are big")
    if size < SHM_PROBLEM_BYTES:
        return problem(msg, Remedy.shell(fix), **ev)
    return warning(msg.replace("crash", "can crash"), Remedy.shell(fix), **ev)


@check("DR051", "memory", 60)
def swap_in_use(facts: Facts) -> Outcome:
    mem = section(facts, "memory")
    total, free = mem.get("swap_total_bytes"), mem.get("swap_free_bytes")
    if total is None or free is None:
        raise CannotCheck("SwapTotal/SwapFree missing from /proc/meminfo")
    used = total - free
    ev = {"swap_total": gib(total), "swap_used": gib(used)}
    if total == 0:
        return ok("no swap configured", **ev)
    if used > (1 << 30) or (total and used > 0.25 * total):
        return warning(f"{gib(used)} of swap in use: memory was short; pages of the dataset, "
                       "model or workers may be read back from disk",
                       Remedy.shell("free -h; ps aux --sort=-rss | head   # who uses the memory\n"
                                    "sudo swapoff -a && sudo swapon -a   # move swapped pages "
                                    "back (needs enough free RAM)"), **ev)
    return ok(f"{gib(used)} of {gib(total)} swap in use", **ev)


@check("DR052", "memory", 25)
def swappiness(facts: Facts) -> Outcome:
    mem = section(facts, "memory")
    sw = mem.get("swappiness")
    if sw is None:
        raise CannotCheck("/proc/sys/vm/swappiness is not readable")
    swap = mem.get("swap_total_bytes")
    ev = {"vm_swappiness": sw, "swap_total": gib(swap)}
    if swap == 0:  # unknown (None) is judged as if there were swap
        return ok(f"vm.swappiness={sw}, no swap configured", **ev)
    if sw > targets.SWAPPINESS_MAX:
        return warning(f"vm.swappiness={sw}: the kernel swaps out idle memory early (dataset "
                       "page cache, worker memory)",
                       Remedy.shell("sudo sysctl -w vm.swappiness=10\n"
                                    "echo 'vm.swappiness=10' | sudo tee "
                                    "/etc/sysctl.d/99-pitstop.conf\n"
                                    + remedies.system_apply("swappiness")), **ev)
    return ok(f"vm.swappiness={sw}", **ev)


@check("DR053", "memory", 50)
def memory_available(facts: Facts) -> Outcome:
    mem = section(facts, "memory")
    total, avail = mem.get("mem_total_bytes"), mem.get("mem_available_bytes")
    if not total or avail is None:
        raise CannotCheck("MemTotal/MemAvailable missing from /proc/meminfo")
    cg = mem.get("cgroup") or {}
    limit, usage = cg.get("limit_bytes"), cg.get("usage_bytes")
    where = "memory"
    if limit and limit < total:  # a limit of 0 bytes is no reading, not a limit
        # In a container /proc/meminfo shows the host; the cgroup limit is what we have.
        total, avail = limit, max(0, min(avail, limit - (usage or 0)))
        where = f"memory of the cgroup v{cg.get('version')} limit"
    pct = 100.0 * avail / total
    ev = {"mem_available": gib(avail), "mem_total": gib(total), "available_pct": round(pct, 1),
          "cgroup_limit": gib(limit) if limit is not None else None}
    if avail < (2 << 30) or pct < 10:
        return warning(f"only {gib(avail)} ({pct:.0f} %) of {gib(total)} {where} available: "
                       "workers, pinned buffers and the page cache will compete",
                       Remedy.shell("ps aux --sort=-rss | head -15   # stop what is not needed"),
                       **ev)
    return ok(f"{gib(avail)} of {gib(total)} {where} available", **ev)


@check("DR054", "memory", 20)
def transparent_hugepages(facts: Facts) -> Outcome:
    mem = section(facts, "memory")
    enabled, defrag = mem.get("thp_enabled"), mem.get("thp_defrag")
    if enabled is None:
        raise CannotCheck("/sys/kernel/mm/transparent_hugepage is not exposed")
    ev = {"thp_enabled": enabled, "thp_defrag": defrag}
    thp = "/sys/kernel/mm/transparent_hugepage"
    if enabled not in targets.THP_MODES:  # never
        return warning("transparent hugepages disabled: large host tensors and pinned buffers "
                       "use 4 KiB pages (more TLB misses); PyTorch's THP_MEM_ALLOC_ENABLE=1 "
                       "cannot work",
                       Remedy.shell(f"echo madvise | sudo tee {thp}/enabled\n"
                                    + remedies.system_apply("thp"), "resets at reboot"), **ev)
    if defrag == "always":
        # `pitstop system apply --only thp` manages `enabled` only, so it is not named here.
        return warning("THP defrag=always: allocations stall for direct compaction (latency "
                       "spikes in workers)",
                       Remedy.shell(f"echo madvise | sudo tee {thp}/defrag", "resets at reboot"),
                       **ev)
    return ok(f"transparent hugepages {enabled}, defrag {defrag}", **ev)


@check("DR055", "memory", 60)
def memlock(facts: Facts) -> Outcome:
    mods = facts.get("kernel_modules") or {}
    ib = mods.get("infiniband_devices")
    if ib is None:
        raise CannotCheck("the RDMA devices are unknown (kernel_modules probe failed)")
    if not ib:
        raise NotApplicable("no InfiniBand/RoCE device: NCCL will not register memory for RDMA")
    container = facts.get("container") or {}
    nodes = mods.get("rdma_dev_nodes")
    if container.get("in_container") and nodes is not None and not any(
            n.startswith("uverbs") for n in nodes):
        # sysfs shows the host's RDMA devices; without its verbs nodes the container
        # cannot use them, so NCCL never registers memory for them.
        raise NotApplicable(f"the host's RDMA devices ({', '.join(ib)}) are not passed into "
                            "this container (no /dev/infiniband/uverbs*)")
    mem = section(facts, "memory")
    ml = mem.get("memlock") or {}
    if "error" in ml:
        raise CannotCheck(ml["error"])
    soft = ml.get("soft_bytes")
    ev = {"rdma_devices": ib, "memlock_soft": "unlimited" if soft is None else gib(soft)}
    if soft is None or soft >= (64 << 30):
        return ok(f"locked-memory limit {ev['memlock_soft']}, enough for RDMA", **ev)
    fix = ("docker run --ulimit memlock=-1:-1 ...   # containers\n" if container.get(
        "in_container") else "") + (
        "ulimit -l unlimited   # this shell; permanently in /etc/security/limits.d/rdma.conf:\n"
        "echo '* soft memlock unlimited\n* hard memlock unlimited' | sudo tee "
        "/etc/security/limits.d/99-rdma.conf   # Slurm: PropagateResourceLimits")
    return warning(f"locked-memory limit is {ev['memlock_soft']} with RDMA devices "
                   f"({', '.join(ib)}): NCCL cannot register buffers and falls back to "
                   "sockets or fails (ibv_reg_mr / 'Cannot allocate memory')",
                   Remedy.shell(fix), **ev)
