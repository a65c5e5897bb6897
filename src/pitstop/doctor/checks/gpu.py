"""GPU hardware layer: PCIe link, throttling, temperature, power, persistence, sharing, ECC, NUMA."""

from __future__ import annotations

from typing import Any

from pitstop.doctor import remedies
from pitstop.doctor.checks.base import (
    CannotCheck,
    Facts,
    NotApplicable,
    Outcome,
    avail,
    check,
    gib,
    ok,
    problem,
    value,
    warning,
)
from pitstop.doctor.checks.gpu_access import gpus_given, in_use
from pitstop.doctor.checks.gpuinfo import busy, pci_gpus, per_gpu, subject
from pitstop.doctor.data import clock_event_names, pcie_bandwidth_gbps
from pitstop.findings import Remedy


def _pci_of(facts: Facts, gpu: dict[str, Any]) -> dict[str, Any]:
    bus = str(gpu.get("pci_bus_id") or "").lower()
    for p in pci_gpus(facts) or []:
        # NVML writes 8 hex digits of domain ("00000000:01:00.0"), sysfs 4.
        if bus and bus.endswith(p["pci_address"][-7:]) and bus.split(":")[0].lstrip("0") == \
                p["pci_address"].split(":")[0].lstrip("0"):
            return p
    return {}


def _link_text(gen: Any, width: Any) -> str:
    return f"Gen{gen} x{width}"


@check("DR010", "gpu", 80)
def pcie_link_degraded(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        gen = value(gpu, "pcie_link_gen", "current PCIe generation")
        width = value(gpu, "pcie_link_width", "current PCIe width")
        gen_max = value(gpu, "pcie_link_gen_max", "maximum PCIe generation")
        width_max = value(gpu, "pcie_link_width_max", "maximum PCIe width")
        is_busy = busy(gpu)
        ev = {"link": _link_text(gen, width), "max_link": _link_text(gen_max, width_max),
              "utilization_gpu_pct": gpu.get("utilization_gpu_pct"),
              "bandwidth_gbps": pcie_bandwidth_gbps(gen, width),
              "max_bandwidth_gbps": pcie_bandwidth_gbps(gen_max, width_max)}
        fix = Remedy.advice(
            "Reseat the GPU in a full x16 slot wired to the CPU (see the mainboard manual: "
            "slots sharing lanes with M.2 drop to x8/x4), remove PCIe riser cables, and set "
            "the slot to Auto/Gen4 in the firmware setup; check `sudo lspci -vv -s "
            f"{gpu.get('pci_bus_id')} | grep -E 'LnkCap|LnkSta'`.")
        if width < width_max:
            st = problem if is_busy or is_busy is None else warning
            return st(f"PCIe link runs at x{width} of x{width_max} lanes "
                      f"({ev['bandwidth_gbps']} of {ev['max_bandwidth_gbps']} GB/s)",
                      fix, subject(gpu), **ev)
        if gen < gen_max:
            if not is_busy:
                return ok(f"{ev['link']} at idle (links drop to a lower generation when idle; "
                          f"maximum {ev['max_link']})", subject(gpu), **ev)
            return problem(f"PCIe link at {ev['link']} under load, maximum {ev['max_link']}",
                           fix, subject(gpu), **ev)
        return ok(f"PCIe {ev['link']}, the most this GPU and slot allow together (DR011 compares "
                  "the two)", subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR011", "gpu", 75)
def pcie_slot_below_gpu(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        pci = _pci_of(facts, gpu)
        up = pci.get("upstream_link") or {}
        own = pci.get("link") or {}

        def first(*values: Any) -> Any:
            return next((v for v in values if avail(v) and v), None)

        # The GPU's own capability: NVML's GPU maximum, else the device's LnkCap in sysfs.
        gpu_gen = first(gpu.get("pcie_link_gen_device_max"), own.get("max_gen"))
        gpu_width = first(own.get("max_width"))
        # What the slot allows: the upstream port's LnkCap, else NVML's device+system maximum.
        slot_gen = first(up.get("max_gen"), gpu.get("pcie_link_gen_max"))
        slot_width = first(up.get("max_width"), gpu.get("pcie_link_width_max"))
        ev: dict[str, Any] = {"gpu_max_link": f"Gen{gpu_gen} x{gpu_width or '?'}",
                              "slot_max_link": f"Gen{slot_gen} x{slot_width or '?'}"}
        if gpu_gen is None or slot_gen is None:
            raise CannotCheck("the maximum link of the GPU or of its slot is not known")
        gpu_width = gpu_width or slot_width or 16
        slot_width = slot_width or gpu_width
        gpu_bw = pcie_bandwidth_gbps(gpu_gen, gpu_width)
        slot_bw = pcie_bandwidth_gbps(slot_gen, slot_width)
        ev.update(gpu_max_gbps=gpu_bw, slot_max_gbps=slot_bw)
        if slot_gen >= gpu_gen and slot_width >= gpu_width:
            return ok(f"slot supports the GPU's full link (Gen{gpu_gen} x{gpu_width})",
                      subject(gpu), **ev)
        if (facts.get("platform") or {}).get("virtual_machine"):
            # A passed-through GPU trains its link with the host's physical port; the
            # port the guest sees is emulated and its capability says nothing about it.
            return ok(f"in a virtual machine the slot is the hypervisor's emulated port "
                      f"(it reports Gen{slot_gen} x{slot_width}); the GPU's real link is judged "
                      "under load by DR010", subject(gpu), **ev)
        fix = Remedy.advice("Move the GPU to a CPU-attached x16 slot that supports its "
                            "generation (see the mainboard manual: chipset slots and slots "
                            "sharing lanes with M.2 are narrower), or set the slot to Auto in "
                            "the firmware setup. This limit holds even at full load.")
        st = problem if slot_bw <= gpu_bw / 2 else warning
        return st(f"slot allows Gen{slot_gen} x{slot_width} ({slot_bw} GB/s); the GPU "
                  f"supports Gen{gpu_gen} x{gpu_width} ({gpu_bw} GB/s)", fix, subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR012", "gpu", 50)
def pcie_replays(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        n = value(gpu, "pcie_replay_counter", "PCIe replay counter")
        ev = {"pcie_replays_since_boot": n}
        if n == 0:
            return ok("no PCIe replays since boot", subject(gpu), **ev)
        st = problem if n >= 1000 else warning
        return st(f"{n} PCIe replays since boot: the link retransmits corrupted packets",
                  Remedy.advice("Reseat the GPU and its riser/cable, check the slot and power "
                                "connectors; watch `nvidia-smi -q -d PCIE` (Replays) while "
                                "training: a growing count means a marginal link."),
                  subject(gpu), **ev)

    return per_gpu(facts, one)


def _reasons(gpu: dict[str, Any]) -> list[str]:
    mask = value(gpu, "clocks_event_reasons", "clock event reasons")
    return clock_event_names(int(mask))


@check("DR013", "gpu", 85)
def thermal_slowdown(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        active = [r for r in _reasons(gpu) if "thermal" in r]
        ev = {"active_reasons": _reasons(gpu), "temperature_c": gpu.get("temperature_c"),
              "slowdown_c": gpu.get("temperature_slowdown_c")}
        if not active:
            return ok("no thermal slowdown", subject(gpu), **ev)
        return problem(f"clocks reduced by {', '.join(active)} at {ev['temperature_c']} °C",
                       Remedy.advice("Improve cooling: clean the heatsink, raise the fan curve "
                                     "(`nvidia-settings -a GPUFanControlState=1`), free the "
                                     "card's air intake, lower the room/rack inlet temperature; "
                                     "a lower power limit (`sudo nvidia-smi -pl W`) trades a "
                                     "little peak speed for no throttling."),
                       subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR014", "gpu", 85)
def hw_slowdown(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        names = _reasons(gpu)
        active = [r for r in names if r in ("hw_slowdown", "hw_power_brake_slowdown")]
        ev = {"active_reasons": names, "power_draw_w": gpu.get("power_draw_w")}
        if not active:
            return ok("no hardware slowdown or power brake", subject(gpu), **ev)
        return problem(f"hardware slowdown active ({', '.join(active)}): clocks cut to about "
                       "half or less",
                       Remedy.advice("HW slowdown and power brake are asserted by the board or "
                                     "the power supply: check all PCIe power connectors are "
                                     "separate cables, the PSU is rated for the GPUs' peak "
                                     "draw, and the GPU is not overheating."),
                       subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR015", "gpu", 70)
def clocks_limited_by_setting(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        names = _reasons(gpu)
        active = [r for r in names if r in ("applications_clocks_setting", "display_clock_setting")]
        ev = {"active_reasons": names, "clock_sm_mhz": gpu.get("clock_sm_mhz"),
              "clock_sm_max_mhz": gpu.get("clock_sm_max_mhz")}
        if not active:
            return ok("clocks not limited by an application or locked-clock setting",
                      subject(gpu), **ev)
        return warning(f"clocks held down by a setting ({', '.join(active)})",
                       Remedy.shell(f"sudo nvidia-smi -i {gpu.get('index')} -rgc   # reset locked "
                                    f"GPU clocks\nsudo nvidia-smi -i {gpu.get('index')} -rac   "
                                    "# reset application clocks"), subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR016", "gpu", 60)
def temperature(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        t = value(gpu, "temperature_c", "temperature")
        slow = value(gpu, "temperature_slowdown_c", "slowdown temperature")
        ev = {"temperature_c": t, "slowdown_c": slow, "margin_c": slow - t}
        fix = Remedy.advice("Improve airflow and fan speed before long runs; a GPU at its "
                            "slowdown temperature lowers its clocks.")
        if t >= slow:
            return problem(f"{t} °C, at or above the slowdown threshold {slow} °C", fix,
                           subject(gpu), **ev)
        if slow - t <= 5:
            return warning(f"{t} °C, within {slow - t} °C of the slowdown threshold {slow} °C",
                           fix, subject(gpu), **ev)
        return ok(f"{t} °C, {slow - t} °C below slowdown", subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR017", "gpu", 65)
def power_limit(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        lim = value(gpu, "power_limit_w", "power limit")
        default = value(gpu, "power_default_limit_w", "default power limit")
        names = _reasons(gpu) if avail(gpu.get("clocks_event_reasons")) else []
        ev = {"power_limit_w": lim, "default_limit_w": default,
              "power_draw_w": gpu.get("power_draw_w"), "power_capped_now": "sw_power_cap" in names}
        if lim < default * 0.98:
            return warning(f"power limit {lim:.0f} W is below the default {default:.0f} W"
                           + (" and the GPU is capped by it right now" if ev["power_capped_now"]
                              else ""),
                           Remedy.shell(f"sudo nvidia-smi -i {gpu.get('index')} -pl {default:.0f}\n"
                                        + remedies.system_apply("gpu-power-limit"),
                                        "resets at reboot unless persisted"), subject(gpu), **ev)
        return ok(f"power limit {lim:.0f} W (default {default:.0f} W)", subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR018", "gpu", 30)
def persistence_mode(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        on = value(gpu, "persistence_mode", "persistence mode")
        ev = {"persistence_mode": "on" if on else "off"}
        if on:
            return ok("persistence mode on", subject(gpu), **ev)
        host = ("# a setting of the host (the node), not of this container:\n"
                if (facts.get("container") or {}).get("in_container") else "")
        return warning("persistence mode off: every CUDA start re-initialises the GPU (seconds), "
                       "and clocks/settings reset between jobs",
                       Remedy.shell(host + "sudo systemctl enable --now nvidia-persistenced\n"
                                    "# or, until reboot: sudo nvidia-smi -pm 1\n"
                                    + remedies.system_apply("gpu-persistence")),
                       subject(gpu), **ev)

    return per_gpu(facts, one)


# A graphics-only process above this much GPU memory is more than a desktop (a game, a
# renderer): it is reported like a compute process.
DISPLAY_MAX_BYTES = 2 << 30


@check("DR019", "gpu", 78)
def other_processes(facts: Facts) -> list[Outcome]:
    me = (facts.get("nvml") or {}).get("self_pid")

    def one(gpu: dict[str, Any]) -> Outcome:
        procs = value(gpu, "processes", "GPU processes")
        others = [p for p in procs if p.get("pid") != me]
        # The desktop (Xorg, the compositor) holds a graphics context on a workstation's
        # GPU and uses a few hundred MiB; only compute contexts compete with training.
        display = [p for p in others if p.get("type") == "graphics"
                   and (p.get("used_memory_bytes") or 0) < DISPLAY_MAX_BYTES]
        others = [p for p in others if p not in display]

        def text(p: dict[str, Any]) -> str:
            return (f"pid {p['pid']} {p.get('name') or '(name hidden: other PID namespace)'} "
                    f"{gib(p.get('used_memory_bytes'))}")

        listed = [text(p) for p in others]
        ev = {"processes": listed, "memory_used": gib(gpu.get("memory_used_bytes"))
              if avail(gpu.get("memory_used_bytes")) else None,
              "utilization_gpu_pct": gpu.get("utilization_gpu_pct")}
        if display:
            ev["display_processes"] = [text(p) for p in display]
        if not others:
            return ok("no other compute process on this GPU" + (
                f" ({len(display)} display process(es) with graphics contexts)" if display
                else ""), subject(gpu), **ev)
        return warning(f"{len(others)} other process(es) use this GPU: " + "; ".join(listed[:3]),
                       Remedy.shell("nvidia-smi --query-compute-apps=pid,process_name,used_memory "
                                    "--format=csv   # then stop what should not be there, or "
                                    "pick a free GPU with CUDA_VISIBLE_DEVICES"),
                       subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR020", "gpu", 55)
def memory_errors(facts: Facts) -> list[Outcome]:
    def one(gpu: dict[str, Any]) -> Outcome:
        pending = gpu.get("retired_pages_pending")
        rows = gpu.get("remapped_rows")
        ev: dict[str, Any] = {"ecc": gpu.get("ecc_mode_current") if avail(
            gpu.get("ecc_mode_current")) else "n/a"}
        known = False
        bad = []
        if avail(pending):
            known = True
            ev["retired_pages_pending"] = pending
            if pending:
                bad.append("retired pages pending")
        if avail(rows) and isinstance(rows, list) and len(rows) >= 4:
            known = True
            corr, unc, is_pending, failed = rows[:4]
            ev.update(remapped_rows_correctable=corr, remapped_rows_uncorrectable=unc,
                      remap_pending=bool(is_pending), remap_failed=bool(failed))
            if is_pending:
                bad.append("row remapping pending")
            if failed:
                bad.append("row remapping failed")
        if not known:
            raise NotApplicable("this GPU reports neither retired pages nor remapped rows "
                                "(no ECC memory)")
        if not bad:
            return ok("no pending page retirement or row remapping", subject(gpu), **ev)
        st = problem if "row remapping failed" in bad else warning
        return st(", ".join(bad) + ": takes effect only after a GPU reset",
                  Remedy.shell(f"sudo nvidia-smi -i {gpu.get('index')} -r   # with no process on "
                               "the GPU; or reboot. Failed remapping: contact the vendor (RMA)."),
                  subject(gpu), **ev)

    return per_gpu(facts, one)


@check("DR021", "gpu", 45)
def numa_affinity(facts: Facts) -> list[Outcome]:
    cpu = facts.get("cpu") or {}
    nodes: dict[str, list[int]] = cpu.get("numa_nodes") or {}
    allowed = set(cpu.get("affinity") or [])
    gpus = pci_gpus(facts)
    if gpus is None:
        raise CannotCheck("the PCI bus could not be read")
    if not gpus:
        raise NotApplicable("no NVIDIA GPU on the PCI bus")
    nvml = facts.get("nvml") or {}
    if nvml.get("available") and nvml.get("gpus"):
        # The GPUs this process will use: another job's GPU on the other socket is not a
        # placement problem of this one.
        mine = [_pci_of(facts, g) for g in in_use(facts, list(nvml["gpus"]))]
        gpus = [g for g in gpus if g in mine] or gpus
    if len(nodes) <= 1:
        return [ok("one NUMA node: every GPU is local to every CPU", None,
                   numa_nodes=len(nodes), gpu_nodes={g["pci_address"]: g.get("numa_node")
                                                     for g in gpus})]
    out = []
    for g in gpus:
        node = g.get("numa_node")
        subj = f"GPU at {g['pci_address']}"
        ev = {"gpu_numa_node": node, "node_cpus": len(nodes.get(str(node), [])),
              "allowed_cpus": len(allowed), "numa_nodes": len(nodes)}
        if node is None or node < 0:
            out.append(ok("the firmware reports no NUMA node for this GPU", subj, **ev))
            continue
        local = set(nodes.get(str(node), []))
        if allowed and not (allowed & local):
            out.append(warning(f"this process may not run on NUMA node {node}, where the GPU "
                               "hangs: every host-device copy crosses the socket link",
                               Remedy.shell(f"numactl --cpunodebind={node} --membind={node} "
                                            "python train.py   # (apt install numactl)"),
                               subj, **ev))
        else:
            out.append(ok(f"GPU on NUMA node {node}; bind its process there "
                          f"(numactl --cpunodebind={node}) for the fastest copies", subj, **ev))
    return out


# Drivers that hold a GPU for something other than this machine's CUDA (passed through to
# a virtual machine): nobody's NVML here sees such a GPU, by design.
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")


@check("DR022", "gpu", 90)
def gpus_missing_from_nvml(facts: Facts) -> Outcome:
    pci = pci_gpus(facts)
    nvml = facts.get("nvml") or {}
    if pci is None:
        raise CannotCheck("the PCI bus could not be read")
    if not pci:
        raise NotApplicable("no NVIDIA GPU on the PCI bus")
    if not nvml.get("available"):
        raise CannotCheck(f"NVML unavailable: {nvml.get('reason')}")
    passed = [g["pci_address"] for g in pci if g.get("driver") in PASSTHROUGH_DRIVERS]
    ours = [g for g in pci if g.get("driver") not in PASSTHROUGH_DRIVERS]
    if not ours:
        raise NotApplicable(f"every NVIDIA GPU on the PCI bus is bound to {pci[0]['driver']} "
                            "(passed through to a virtual machine)")
    gpus = list(nvml.get("gpus") or [])
    lost = [g for g in gpus if "error" in g]
    seen = len(gpus) - len(lost)
    given = gpus_given(facts)
    accepted = given.nvml_counts(len(ours))
    tight = min(accepted)
    in_container = bool((facts.get("container") or {}).get("in_container"))
    whose = "this container" if in_container else "this process"
    ev: dict[str, Any] = {"gpus_on_pci": len(pci), "gpus_in_nvml": seen,
                          "gpus_given": min(given.count, len(ours)) if given.count is not None
                          else len(ours), "decided_by": accepted.get(seen, given.rule)}
    if passed:
        ev["passed_through"] = passed
    if given.restrictions:
        ev["restrictions"] = given.restrictions
    listed = {str(g.get("pci_bus_id") or "").lower()[-7:] for g in gpus}
    absent = [g["pci_address"] for g in ours if g["pci_address"][-7:] not in listed]
    # Name the missing GPUs when NVML's bus ids account for every GPU it sees; where a rule
    # restricts the GPUs, the absent ones include the GPUs that are not ours, so they are
    # named only when the whole bus was expected.
    named = f" (missing: {', '.join(absent)})" if absent and len(absent) == len(ours) - seen \
        else ""
    fix = Remedy.shell("sudo dmesg | grep -iE 'NVRM|Xid'   # the driver says why (on the host)\n"
                       "nvidia-smi -q | grep -iE 'Bus Id|Pending|Xid'\n"
                       "sudo reboot   # a GPU that fell off the bus needs a power cycle")
    if lost:
        ev["nvml_errors"] = [f"GPU {g.get('index')}: {g['error']}" for g in lost]
        return problem(f"{len(lost)} of the {len(gpus)} GPUs the driver lists cannot be read "
                       f"({lost[0]['error']}): fallen off the bus, or failed to initialise",
                       fix, **ev)
    vm = f" ({len(passed)} more bound to {PASSTHROUGH_DRIVERS[0]} for a VM)" if passed else ""
    if seen == len(ours):
        return ok(f"all {len(ours)} GPU(s) on the PCI bus are visible to the driver{vm}", **ev)
    if seen in accepted:
        rule = next(r for r in given.rules if min(r.count, len(ours)) == seen)
        # CUDA_VISIBLE_DEVICES alone hides nothing from NVML: a scheduler's device filter
        # that cannot be read (cgroup v2) must be doing it.
        how = "" if rule.device_level else ", the device nodes filtered to match"
        return ok(f"NVML sees {seen} GPU(s), the {seen} given to {whose} (decided by: "
                  f"{accepted[seen]}{how}); the other {len(ours) - seen} on the PCI bus are "
                  f"not its own{vm}", **ev)
    if seen < tight:
        ev["gpus_given"] = tight
        where = (f"the {tight} GPUs given to {whose} ({accepted[tight]})" if tight < len(ours)
                 else f"the {len(ours)} GPUs on the PCI bus")
        if named and tight == len(ours):
            ev["missing_from_nvml"] = absent
        return problem(f"{tight - seen} of {where} are not usable by the driver (fallen off "
                       f"the bus, or failed to initialise){named if tight == len(ours) else ''}",
                       fix, **ev)
    # More than any rule leaves, fewer than all: the rules do not hide GPUs from the
    # driver here (CUDA_VISIBLE_DEVICES never does), so the rest should all be seen.
    if named:
        ev["missing_from_nvml"] = absent
    return problem(f"{len(ours) - seen} of the {len(ours)} GPUs on the PCI bus are not usable "
                   f"by the driver{named} (fallen off the bus, or failed to initialise): NVML sees "
                   f"{seen}, more than the {tight} of {accepted[tight]}, so no rule hides GPUs "
                   "from the driver here and all should be seen", fix, **ev)
