"""The values training wants for the OS settings both tools handle.

``pitstop doctor`` judges a machine against these and ``pitstop system apply`` sets
them, so a setting the doctor flags is one ``system`` changes, and one ``system`` has
set is one the doctor accepts. The choices follow Red Hat's ``tuned`` profiles
``throughput-performance`` and ``accelerator-performance``.
"""

from __future__ import annotations

__all__ = ["EPP", "GOVERNOR", "READAHEAD_KB", "SWAPPINESS_MAX", "THP_MODES"]

GOVERNOR = "performance"  # cpufreq scaling_governor
EPP = "performance"  # energy_performance_preference (HWP / CPPC)
# Large sequential reads (shards, big files, spinning and network block devices).
READAHEAD_KB = 4096
SWAPPINESS_MAX = 10  # vm.swappiness; above it the kernel swaps out idle process memory
THP_MODES = ("always", "madvise")  # transparent_hugepage/enabled values that are fine
