"""Write the recorded NVML value sets the monitor's tests replay (``python make_value_sets.py``).

A value set is what :class:`pitstop.telemetry.recorded_nvml.RecordedNvml` answers NVML
calls with: per GPU, ``static`` fields and ``frames`` of the fields that change. The
committed ``*.json`` files next to this script are its output; a test checks they match.

Where the values come from (each file repeats it in ``_origin``):

* Static fields of the RTX 4090 and A100-SXM4-40GB: the same published values as the
  doctor's recorded machines (tests/doctor/machines/make_machines.py): NVIDIA's board
  specifications and `nvidia-smi -q` outputs quoted in public bug reports.
* H100 SXM5 (``NVIDIA H100 80GB HBM3``, the name NVML gives it): NVIDIA's H100 datasheet
  and Hopper whitepaper (80 GB HBM3 = 81559 MiB usable as nvidia-smi reports it, up to
  700 W, 1980 MHz maximum SM boost clock, PCIe Gen5 x16, compute capability 9.0, GPM
  supported on Hopper).
* Frames (utilisation, GPM activity, power, clocks, temperatures) are illustrative
  values in the ranges those documents and public nvidia-smi/DCGM outputs show for a
  busy and an input-starved training job; they are not one recorded trace.
  ``scripts/record_nvml.py`` records a real trace in this format on a GPU machine
  (scripts/gpu-check.sh runs it), to replace them when one is available.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB, GiB = 2**20, 2**30

H100 = {
    "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5d3f0c1e-0000-4000-8000-000000000100",
    "pci_bus_id": "00000000:18:00.0", "memory_total_bytes": 81559 * MiB,
    "temperature_slowdown_c": 87, "temperature_shutdown_c": 92,
    "power_default_limit_w": 700.0, "power_max_limit_w": 700.0,
    "clock_sm_max_mhz": 1980, "clock_mem_max_mhz": 2619,
    "pcie_link_gen_max": 5, "pcie_link_gen_device_max": 5, "pcie_link_width_max": 16,
    "compute_capability": [9, 0], "gpm_supported": True, "process_utilization": True,
    "persistence_mode": True, "ecc_mode_current": True,
}
A100 = {
    "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-5d3f0c1e-0000-4000-8000-0000000000a1",
    "pci_bus_id": "00000000:07:00.0", "memory_total_bytes": 40960 * MiB,
    "temperature_slowdown_c": 92, "temperature_shutdown_c": 95,
    "power_default_limit_w": 400.0, "power_max_limit_w": 400.0,
    "clock_sm_max_mhz": 1410, "clock_mem_max_mhz": 1215,
    "pcie_link_gen_max": 4, "pcie_link_gen_device_max": 4, "pcie_link_width_max": 16,
    "compute_capability": [8, 0], "gpm_supported": False, "process_utilization": True,
    "persistence_mode": True, "ecc_mode_current": True,
}
RTX4090 = {
    "name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-5d3f0c1e-0000-4000-8000-000000004090",
    "pci_bus_id": "00000000:01:00.0", "memory_total_bytes": 24564 * MiB,
    "temperature_slowdown_c": 90, "temperature_shutdown_c": 95,
    "power_default_limit_w": 450.0, "power_max_limit_w": 600.0,
    "clock_sm_max_mhz": 3120, "clock_mem_max_mhz": 10501,
    "pcie_link_gen_max": 4, "pcie_link_gen_device_max": 4, "pcie_link_width_max": 16,
    "compute_capability": [8, 9], "gpm_supported": False,
    "process_utilization": {"unavailable": "Not Supported"},
    "persistence_mode": False, "ecc_mode_current": {"unavailable": "Not Supported"},
}


def frame(util: int, mem_util: int, mem_gib: float, power: float, limit: float, temp: int,
          sm_mhz: int, mem_mhz: int, reasons: int, gen: int, rx_kbps: int, tx_kbps: int,
          gpm: dict | None = None, procs: list | None = None) -> dict:
    f = {"utilization_gpu_pct": util, "utilization_memory_pct": mem_util,
         "memory_used_bytes": int(mem_gib * GiB), "power_draw_w": power, "power_limit_w": limit,
         "temperature_c": temp, "clock_sm_mhz": sm_mhz, "clock_mem_mhz": mem_mhz,
         "clocks_event_reasons": reasons, "pcie_link_gen": gen, "pcie_link_width": 16,
         "pcie_rx_kbps": rx_kbps, "pcie_tx_kbps": tx_kbps, "pcie_replay_counter": 0}
    if gpm is not None:
        f["gpm"] = gpm
    f["processes"] = procs or []
    return f


def gpm(graphics: float, sm: float, occ: float, tensor: float, dram: float, rx: float, tx: float) -> dict:
    return {"GRAPHICS_UTIL": graphics, "SM_UTIL": sm, "SM_OCCUPANCY": occ, "ANY_TENSOR_UTIL": tensor,
            "DRAM_BW_UTIL": dram, "PCIE_RX_PER_SEC": rx, "PCIE_TX_PER_SEC": tx}


def train(mem_gib: float, sm: int, mem: int) -> list:
    return [{"pid": "@train", "used_memory_bytes": int(mem_gib * GiB), "sm_util": sm, "mem_util": mem}]


ORIGIN_BASE = ("Static fields: {static}. Frames: illustrative values for {what}, in the ranges "
               "public nvidia-smi/DCGM outputs show; see tests/monitor/nvml/make_value_sets.py.")

VALUE_SETS = {
    "h100-sxm-compute": {
        "_origin": ORIGIN_BASE.format(static="NVIDIA H100 datasheet and Hopper whitepaper (H100 SXM5 80GB)",
                                      what="a busy bf16 training job (SM activity 80-88 %, the power cap engaging in one frame)"),
        "driver_version": "570.124.06", "cuda_driver_version": 12080, "frame_s": 1.0,
        "gpus": [{"static": H100, "frames": [
            frame(100, 41, 61.3, 662.0, 700.0, 63, 1980, 2619, 0, 5, 612000, 41000,
                  gpm(99.1, 84.2, 38.5, 56.3, 44.8, 598.0, 40.1), train(61.3, 98, 41)),
            frame(100, 43, 61.3, 691.0, 700.0, 64, 1755, 2619, 0x4, 5, 598000, 39000,
                  gpm(99.3, 86.7, 39.9, 58.0, 46.2, 584.0, 38.3), train(61.3, 99, 43)),
            frame(99, 40, 61.3, 655.0, 700.0, 64, 1980, 2619, 0, 5, 640000, 43000,
                  gpm(98.7, 81.9, 37.8, 54.1, 43.5, 625.0, 42.0), train(61.3, 97, 40)),
            frame(100, 42, 61.3, 670.0, 700.0, 65, 1965, 2619, 0, 5, 605000, 40000,
                  gpm(99.0, 85.5, 38.9, 57.2, 45.1, 590.0, 39.6), train(61.3, 98, 42)),
        ]}],
    },
    "h100-sxm-input": {
        "_origin": ORIGIN_BASE.format(static="NVIDIA H100 datasheet and Hopper whitepaper (H100 SXM5 80GB)",
                                      what="a training job starved by its DataLoader (utilization.gpu 40-55 % but SM activity 18-30 %)"),
        "driver_version": "570.124.06", "cuda_driver_version": 12080, "frame_s": 1.0,
        "gpus": [{"static": H100, "frames": [
            frame(48, 12, 22.4, 241.0, 700.0, 44, 1980, 2619, 0, 5, 210000, 9000,
                  gpm(47.0, 24.1, 11.2, 12.5, 9.8, 205.0, 8.7), train(22.4, 47, 12)),
            frame(39, 9, 22.4, 212.0, 700.0, 43, 1980, 2619, 0, 5, 180000, 7000,
                  gpm(38.5, 18.3, 8.9, 9.4, 7.7, 176.0, 6.8), train(22.4, 38, 9)),
            frame(55, 14, 22.4, 268.0, 700.0, 45, 1980, 2619, 0, 5, 236000, 10000,
                  gpm(54.2, 29.8, 13.6, 15.1, 11.9, 230.0, 9.9), train(22.4, 54, 14)),
            frame(44, 11, 22.4, 229.0, 700.0, 44, 1980, 2619, 0, 5, 198000, 8000,
                  gpm(43.1, 21.0, 10.1, 11.0, 8.8, 193.0, 7.9), train(22.4, 43, 11)),
        ]}],
    },
    "a100-sxm4-idle": {
        "_origin": ORIGIN_BASE.format(static="NVIDIA A100 datasheet and public nvidia-smi -q outputs "
                                             "(github.com/NVIDIA/nvidia-docker/issues/1648), as in the doctor's machines",
                                      what="an idle Ampere GPU (no GPM before Hopper)"),
        "driver_version": "535.183.01", "cuda_driver_version": 12020, "frame_s": 1.0,
        "gpus": [{"static": A100, "frames": [
            frame(0, 0, 0.4, 54.0, 400.0, 31, 210, 1215, 0x1, 4, 0, 0),
            frame(0, 0, 0.4, 53.5, 400.0, 31, 210, 1215, 0x1, 4, 0, 0),
        ]}],
    },
    "rtx4090-busy": {
        "_origin": ORIGIN_BASE.format(static="NVIDIA's RTX 4090 board specifications, as in the doctor's machines",
                                      what="a consumer GPU at its 450 W power limit (SW power cap active), no per-process utilisation"),
        "driver_version": "550.163.01", "cuda_driver_version": 12040, "frame_s": 1.0,
        "gpus": [{"static": RTX4090, "frames": [
            frame(99, 58, 19.8, 446.0, 450.0, 71, 2610, 10501, 0x4, 4, 820000, 52000, None,
                  [{"pid": "@train", "used_memory_bytes": int(19.8 * GiB)}]),
            frame(98, 57, 19.8, 449.0, 450.0, 72, 2595, 10501, 0x4, 4, 790000, 50000, None,
                  [{"pid": "@train", "used_memory_bytes": int(19.8 * GiB)}]),
        ]}],
    },
}


def main(out: Path = HERE) -> None:
    for name, data in VALUE_SETS.items():
        (out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
