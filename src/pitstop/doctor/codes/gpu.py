"""Documentation of the GPU hardware codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import SYSTEM_APPLY, P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR010", "pcie-link-degraded", "GPU PCIe link below its maximum under load", "gpu", P,
        "Compares each GPU's current PCIe generation and width (NVML) with the maximum the GPU "
        "and slot support. The generation is judged only while the GPU is busy (>= 20 % "
        "utilisation), because idle links drop to Gen1 to save power; fewer lanes than the "
        "maximum is reported at any load.",
        "Host-to-device copies (every batch) and multi-GPU traffic without NVLink go over PCIe: "
        "a Gen3 x4 link moves ~3.9 GB/s instead of ~31.5 GB/s for Gen4 x16.",
        "```\nGPU 0: PCIe link at Gen3 x4 under load, maximum Gen4 x16\n```",
        "Put the GPU in a CPU-attached x16 slot (slots sharing lanes with M.2 drop to x8/x4), "
        "remove riser cables, set the slot to Auto/Gen4 in the firmware; verify with\n"
        "```sh\nsudo lspci -vv -s 01:00.0 | grep -E 'LnkCap|LnkSta'\n```",
        "manual: hardware; nothing to run, pitstop only measures the link."),
    doc("DR011", "pcie-slot-below-gpu", "Slot supports a lower PCIe generation or width than the GPU",
        "gpu", W,
        "Compares maximums only (valid at idle): the GPU's own maximum generation "
        "(`nvmlDeviceGetGpuMaxPcieLinkGeneration`, sysfs `max_link_speed`) against the link "
        "maximum and the upstream port's `max_link_speed`/`max_link_width`. In a virtual "
        "machine the port is the hypervisor's emulation and says nothing about the physical "
        "slot, so there only DR010 (the link under load) judges.",
        "The slot caps the link even at full load: a Gen4 GPU in a Gen3 slot has half the copy "
        "bandwidth.",
        "```\nGPU 0: slot limits the link to Gen3; the GPU supports Gen4\n```",
        "Use a slot that supports the GPU's generation and width, or check the slot's PCIe "
        "setting in the firmware setup.",
        "manual: hardware; nothing to run, pitstop only compares the maximums."),
    doc("DR012", "pcie-replay-errors", "PCIe replays: the GPU link retransmits packets", "gpu", W,
        "Reads NVML's PCIe replay counter (since boot).",
        "Every replay is a retransmission after a corrupted packet; a marginal link (riser, dust, "
        "bad seating) loses bandwidth and can end in the GPU falling off the bus.",
        "```\nGPU 0: 4312 PCIe replays since boot\n```",
        "Reseat the GPU and any riser, check power connectors, and watch whether the count "
        "grows during training: `nvidia-smi -q -d PCIE`.",
        "manual: hardware; a growing count is worth a maintenance window."),
    doc("DR013", "gpu-thermal-slowdown", "GPU clocks reduced by thermal slowdown", "gpu", P,
        "Decodes NVML's clock event reasons and reports the software and hardware thermal "
        "slowdown bits (the GPU-idle bit is ignored).",
        "Thermal slowdown lowers the SM clock, often by hundreds of MHz, for as long as the GPU "
        "is hot: every step takes longer.",
        "```\nGPU 0: clocks reduced by sw_thermal_slowdown at 87 °C\n```",
        "Improve cooling (clean heatsinks, fan curve, inlet air, spacing between cards); a "
        "slightly lower power limit (`sudo nvidia-smi -pl W`) avoids throttling at a small cost "
        "in peak speed.",
        "manual: hardware/cooling."),
    doc("DR014", "gpu-hardware-slowdown", "GPU hardware slowdown or power brake active", "gpu", P,
        "Reports NVML's HW slowdown and HW power brake clock event reasons.",
        "These are asserted by the board or an external power signal and cut clocks to about "
        "half: the PSU or power cabling cannot deliver, or the board overheats.",
        "```\nGPU 0: hardware slowdown active (hw_power_brake_slowdown)\n```",
        "Use separate PCIe power cables per connector, a PSU rated for the GPUs' peak draw, and "
        "check the board temperature.",
        "manual: hardware (cabling, power supply, cooling)."),
    doc("DR015", "gpu-clocks-limited-by-setting", "GPU clocks held down by an application/locked clock setting",
        "gpu", W,
        "Reports the NVML 'applications clocks setting' and 'display clock setting' clock event "
        "reasons: someone ran `nvidia-smi -ac` or `-lgc` and the setting stayed.",
        "Locked or application clocks below the maximum slow every kernel.",
        "```\nGPU 0: clocks held down by a setting (applications_clocks_setting)\n```",
        "```sh\nsudo nvidia-smi -i 0 -rgc   # reset locked GPU clocks\n"
        "sudo nvidia-smi -i 0 -rac   # reset application clocks\n```",
        "safe: restores the driver's default clock policy."),
    doc("DR016", "gpu-temperature-near-slowdown", "GPU temperature at or near its slowdown threshold",
        "gpu", W,
        "Compares the GPU temperature with NVML's slowdown threshold: within 5 °C is a warning, "
        "at or above it a problem.",
        "At the threshold the GPU starts lowering its clocks (DR013); near it, a long run will "
        "get there.",
        "```\nGPU 0: 83 °C, within 4 °C of the slowdown threshold 87 °C\n```",
        "Improve airflow and fan speed before long runs.",
        "manual: hardware/cooling."),
    doc("DR017", "gpu-power-limit-lowered", "GPU power limit set below its default", "gpu", W,
        "Compares NVML's current power management limit with the default limit.",
        "A lowered power limit caps clocks under load (the 'sw power cap' clock event): "
        "compute-bound training runs slower in proportion.",
        "```\nGPU 0: power limit 300 W is below the default 450 W and the GPU is capped by it "
        "right now\n```",
        "```sh\nsudo nvidia-smi -i 0 -pl 450\n```\n" + SYSTEM_APPLY.format("gpu-power-limit"),
        "safe: the default limit is the vendor's rating; it resets at reboot unless persisted."),
    doc("DR018", "gpu-persistence-mode-off", "GPU persistence mode off", "gpu", W,
        "Reads NVML's persistence mode per GPU.",
        "Without persistence the driver tears the GPU down when the last process exits: every "
        "`python train.py` pays a re-initialisation (up to seconds per GPU) and settings such as "
        "clocks reset between jobs.",
        "```\nGPU 0: persistence mode off\n```",
        "```sh\nsudo systemctl enable --now nvidia-persistenced\n# or until reboot:\n"
        "sudo nvidia-smi -pm 1\n```\n" + SYSTEM_APPLY.format("gpu-persistence"),
        "safe: a few watts more at idle."),
    doc("DR019", "gpu-used-by-other-processes", "Other processes are using the GPU", "gpu", W,
        "Lists the compute and graphics processes NVML reports on each GPU (PID, name, memory), "
        "other than pitstop itself. Graphics-only processes under 2 GiB (the desktop: Xorg, "
        "the compositor) are listed as display processes, not as competitors. With "
        "`CUDA_VISIBLE_DEVICES` set, only the GPUs it selects are judged (on a shared node "
        "another job's GPU is not yours). In a container, processes of other PID namespaces "
        "show without a name.",
        "Another job shares the SMs and memory bandwidth (both runs slow down) and its memory "
        "shrinks what your batch can use.",
        "```\nGPU 0: 1 other process(es) use this GPU: pid 4242 python train_old.py 10.2 GiB\n```",
        "```sh\nnvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n"
        "export CUDA_VISIBLE_DEVICES=1   # or stop the other job\n```",
        "manual: stopping a process may lose someone's work."),
    doc("DR020", "gpu-memory-errors-pending", "GPU memory page retirement or row remapping pending",
        "gpu", W,
        "Reads NVML's retired-pages-pending status (older data-centre GPUs) and remapped rows "
        "(A100/H100 and newer): pending remaps and failed remaps.",
        "A pending retirement/remap takes effect only after a GPU reset; until then the faulty "
        "memory is still in use and ECC errors can kill the run. A failed remap means the GPU "
        "needs replacing.",
        "```\nGPU 0: row remapping pending: takes effect only after a GPU reset\n```",
        "```sh\nsudo nvidia-smi -i 0 -r   # with no process on the GPU, or reboot\n```",
        "manual: resetting a GPU stops every process on it."),
    doc("DR021", "gpu-numa-mismatch", "Process may not run on the NUMA node its GPU hangs on", "gpu", W,
        "On multi-socket machines, reads the `numa_node` (sysfs) of each GPU this process will "
        "use (those NVML sees, narrowed by `CUDA_VISIBLE_DEVICES`) and the node CPU lists, and "
        "compares them with the CPUs this process may run on.",
        "Pinned host buffers and DataLoader workers on the far socket make every host-device "
        "copy cross the inter-socket link: lower copy bandwidth and higher latency.",
        "```\nGPU at 0000:c1:00.0: this process may not run on NUMA node 1, where the GPU hangs\n```",
        "```sh\nsudo apt install numactl\nnumactl --cpunodebind=1 --membind=1 python train.py\n```\n"
        "With torchrun, bind each local rank to its GPU's node.",
        "safe: binding only changes where the process runs, not what it computes."),
    doc("DR022", "gpu-not-visible-to-driver", "GPU on the PCI bus but missing from the driver", "gpu", P,
        "Compares the GPUs NVML reports (and those it lists but cannot read) with the GPUs this "
        "process was given. The PCI bus shows the host's GPUs also inside a container, so each "
        "rule that restricts the device nodes gives a count NVML may show: the cgroup v1 device "
        "rules (`devices.list`, one `c 195:N` per GPU), `NVIDIA_VISIBLE_DEVICES` (a list, "
        "`none`/`void`, or the device plugin's `/var/run/nvidia-container-devices`), in a "
        "container its `/dev/nvidiaN` nodes, and Slurm's `SLURM_STEP_GPUS`/`SLURM_JOB_GPUS`; "
        "without any of them, `CUDA_VISIBLE_DEVICES` (a scheduler that sets only it may filter "
        "the nodes with an unreadable cgroup v2 rule). A rule that is not enforced on the nodes "
        "leaves NVML every GPU (`CUDA_VISIBLE_DEVICES` never hides GPUs from the driver), so "
        "NVML seeing fewer than the tightest rule, or a count between that and all, is a lost "
        "GPU. MIG instances in a variable are not GPUs; GPUs bound to `vfio-pci` (passed to a "
        "VM) are not expected. The finding says which rule decided.",
        "A GPU that fell off the bus (Xid 79) or failed to initialise is not used at all; "
        "multi-GPU jobs start with fewer ranks or fail.",
        "```\n1 of 8 GPUs on the PCI bus are not usable by the driver\n"
        "1 of the 2 GPUs given to this container (NVIDIA_VISIBLE_DEVICES=GPU-1f..,GPU-9c.. "
        "(2 GPU(s))) are not usable by the driver\n"
        "1 of the 8 GPUs on the PCI bus are not usable by the driver (...): NVML sees 7, more "
        "than the 2 that CUDA_VISIBLE_DEVICES=0,1 (2 GPU(s)) gives, ...\n```",
        "```sh\nsudo dmesg | grep -iE 'NVRM|Xid'\nsudo reboot   # a power cycle is usually needed\n```",
        "manual: a reboot or GPU reset interrupts every job on the machine."),
]
