"""Version tables the checks rely on, kept as data in one place.

Sources (checked against the published documents; update here, nowhere else):

* CUDA_MINOR_COMPAT_MIN_DRIVER and CUDA_TOOLKIT_DRIVER: NVIDIA's CUDA Toolkit release
  notes, table "CUDA Toolkit and Corresponding Driver Versions", and the CUDA
  Compatibility guide ("minor version compatibility").
* TORCH_CUDA_VARIANTS: the wheel indexes at https://download.pytorch.org/whl/ and the
  "Previous versions" page of pytorch.org, per torch release.
* DISTRO_DRIVER_CEILING: packages.debian.org (nvidia-driver in bookworm / trixie) and
  Ubuntu's ``ubuntu-drivers`` metapackages.
"""

from __future__ import annotations

# Minimum Linux driver for CUDA *minor-version compatibility*: a wheel built with any
# CUDA X.y runs on a driver at least this new (without PTX JIT of newer code).
CUDA_MINOR_COMPAT_MIN_DRIVER: dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580.65.06",
}

# The driver each CUDA toolkit release ships with (full compatibility, PTX JIT included).
CUDA_TOOLKIT_DRIVER: dict[str, str] = {
    "11.0": "450.51.06",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}

# CUDA variants published for each torch release on download.pytorch.org (newest last).
TORCH_CUDA_VARIANTS: dict[str, tuple[str, ...]] = {
    "2.0": ("11.7", "11.8"),
    "2.1": ("11.8", "12.1"),
    "2.2": ("11.8", "12.1"),
    "2.3": ("11.8", "12.1"),
    "2.4": ("11.8", "12.1", "12.4"),
    "2.5": ("11.8", "12.1", "12.4"),
    "2.6": ("11.8", "12.4", "12.6"),
    "2.7": ("11.8", "12.6", "12.8"),
    "2.8": ("12.6", "12.8", "12.9"),
    "2.9": ("12.6", "12.8", "13.0"),
}
# For a torch release newer than the table, assume the newest known set (stated in the remedy).
LATEST_KNOWN_TORCH = "2.9"

# The newest driver branch a distribution packages itself; anything newer needs
# NVIDIA's CUDA apt repository.
DISTRO_DRIVER_CEILING: dict[str, str] = {
    "debian 12": "535",
    "debian 13": "550",
    "ubuntu 22.04": "580",
    "ubuntu 24.04": "580",
}

# NVIDIA's apt repository, per distribution, for drivers newer than the distribution's.
CUDA_REPO_PATH: dict[str, str] = {
    "debian 12": "debian12",
    "debian 13": "debian13",
    "ubuntu 22.04": "ubuntu2204",
    "ubuntu 24.04": "ubuntu2404",
}


def parse_version(text: str) -> tuple[int, ...]:
    """``"535.183.01"`` -> ``(535, 183, 1)``; non-numeric tails are dropped."""
    parts: list[int] = []
    for piece in text.strip().split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def cuda_major_minor(version: str) -> str:
    """``"12.8.1"`` -> ``"12.8"``; ``""`` for a version with no number (``"None"``, a
    hand-edited facts file)."""
    parts = parse_version(version)
    if not parts:
        return ""
    return f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}"


def toolkit_driver(cuda: str) -> str | None:
    """The driver shipped with CUDA ``cuda`` (major.minor), or ``None`` if not in the table."""
    return CUDA_TOOLKIT_DRIVER.get(cuda_major_minor(cuda))


def variant_tag(cuda: str) -> str:
    """``"12.8"`` -> ``"cu128"`` (the download.pytorch.org index name)."""
    major, minor = parse_version(cuda)[:2]
    return f"cu{major}{minor}"


def torch_release(version: str) -> str:
    """``"2.7.1+cu128"`` -> ``"2.7"`` (major.minor, as :func:`cuda_major_minor`)."""
    return cuda_major_minor(version)


def driver_supports(driver: str, cuda: str) -> str:
    """How driver ``driver`` runs a wheel built with CUDA ``cuda``.

    ``"full"`` (at least the toolkit's own driver), ``"minor-compat"`` (runs, but no PTX
    JIT of newer code, so torch.compile/Triton kernels and newer features may fail),
    ``"no"`` (CUDA initialisation fails), or ``"unknown"`` (a CUDA major not in the table).
    """
    d = parse_version(driver)
    numbers = parse_version(cuda)
    if not numbers:  # no version at all: nothing in the table can speak for it
        return "unknown"
    major = numbers[0]
    full = toolkit_driver(cuda)
    if full is not None and d >= parse_version(full):
        return "full"
    floor = CUDA_MINOR_COMPAT_MIN_DRIVER.get(major)
    if floor is None:
        return "unknown"
    return "minor-compat" if d >= parse_version(floor) else "no"


def best_variant_for_driver(torch_version: str, driver: str) -> tuple[str, str, bool]:
    """The CUDA variant of this torch release that the driver runs best.

    Returns ``(cuda, support, release_known)``: the newest variant with full support,
    else the newest with minor-version compatibility, else ``("", "no", ...)``.
    """
    release = torch_release(torch_version)
    known = release in TORCH_CUDA_VARIANTS
    variants = TORCH_CUDA_VARIANTS[release if known else LATEST_KNOWN_TORCH]
    for wanted in ("full", "minor-compat"):
        for cuda in reversed(variants):
            if driver_supports(driver, cuda) == wanted:
                return cuda, wanted, known
    return "", "no", known


def distro_key(os_id: str | None, version_id: str | None) -> str:
    """``("debian", "12")`` -> ``"debian 12"``; ``("ubuntu", "24.04")`` -> ``"ubuntu 24.04"``."""
    return f"{(os_id or '').lower()} {version_id or ''}".strip()


# Clock event (throttle) reason bits, nvml.h ``nvmlClocksEventReason*``.
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def clock_event_names(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock-event-reasons mask."""
    return [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]


# PCIe: link speed in GT/s per generation (sysfs reports "16.0 GT/s PCIe").
PCIE_GEN_BY_GTS: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# Usable bandwidth of one lane, one direction, in GB/s (after line coding).
PCIE_LANE_GBPS: dict[int, float] = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_bandwidth_gbps(gen: int, width: int) -> float:
    """One-direction bandwidth of a link in GB/s."""
    return round(PCIE_LANE_GBPS.get(gen, 0.0) * width, 1)
