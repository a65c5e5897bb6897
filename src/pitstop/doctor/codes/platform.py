"""Documentation of the platform codes of ``pitstop doctor``."""

from __future__ import annotations

from pitstop.doctor.codes.common import P, W, doc
from pitstop.findings import CodeDoc

DOCS: list[CodeDoc] = [
    doc("DR080", "python-version-unsupported", "Python too old for current torch releases", "platform", W,
        "Reports the Python version (and, as evidence, the torch, CUDA, NCCL, driver, kernel and "
        "OS versions).",
        "Current torch releases ship wheels for Python >= 3.10 only: an older Python is stuck on "
        "old torch without newer kernels and fixes.",
        "```\nPython 3.8.10: current torch releases need Python >= 3.10\n```",
        "```sh\nsudo apt install python3 python3-venv   # Debian 12: 3.11, Ubuntu 24.04: 3.12\n"
        "python3 -m venv ~/venv && ~/venv/bin/pip install torch\n```",
        "manual: a new Python means a new virtual environment for training."),
    doc("DR081", "glibc-too-old", "glibc too old for current torch wheels", "platform", P,
        "Reads the C library version (`confstr(CS_GNU_LIBC_VERSION)`).",
        "torch wheels since 2.6 are built for manylinux_2_28 (glibc >= 2.28): on an older system "
        "pip picks an old release or tries to build from source.",
        "```\nglibc 2.17: torch wheels since 2.6 need glibc >= 2.28\n```",
        "Upgrade the OS (Debian 12: glibc 2.36, Ubuntu 22.04: 2.35) or train in a container "
        "based on one.",
        "manual: an OS upgrade or a container change."),
]
