"""torch wheels as the fake machines install them: the METADATA headers of real releases.

The ``Requires-Dist`` lines below are those of the real wheels on PyPI, in their own
spelling, read with ``pip install --dry-run --no-deps --report`` (pip 23.2.1, 2026-12-01):

* torch 2.5.1 (CUDA 12.4; PyPI's default build of that release), Metadata-Version 2.1:
  https://files.pythonhosted.org/packages/d1/35/e8b2daf02ce933e4518e6f5682c72fd0ed66c15910ea1fb4168f442b71c4/
  torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl
  (sha256 de5b7d6740c4b636ef4db92be922f0edc425b65ed78c5076c43c42d362a45457)
* torch 2.8.0 (CUDA 12.8), Metadata-Version 2.4:
  https://files.pythonhosted.org/packages/99/a8/6acf48d48838fb8fe480597d98a0668c2beb02ee4755cc136de92a0a956f/
  torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl
  (sha256 b2aca0939fb7e4d842561febbd4ffda67a8e958ff725c1c27e244e85e982173c)

The nvidia-* lines come from the ``PYTORCH_EXTRA_INSTALL_REQUIREMENTS`` table of pytorch's
``.github/scripts/generate_binary_build_matrix.py`` (one string per CUDA version, the
same for every CPython wheel of a release; a stored snapshot of that file lists the same
libraries for CUDA 12.6/12.8 with pre-release versions). The CPU build (``+cpu`` from
download.pytorch.org/whl/cpu) carries no nvidia-* requirement; its other lines are
written by hand.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TorchWheel:
    """One torch release as a fake machine installs it."""

    version: str  # METADATA Version
    cuda: str | None  # torch/version.py cuda
    metadata_version: str
    platform_tag: str  # the WHEEL Tag's platform part
    requires: tuple[str, ...]  # Requires-Dist, verbatim
    origin: str


TORCH_251 = TorchWheel(
    '2.5.1', '12.4', '2.1', 'manylinux1_x86_64',
    (
        'filelock',
        'typing-extensions (>=4.8.0)',
        'networkx',
        'jinja2',
        'fsspec',
        'nvidia-cuda-nvrtc-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cuda-runtime-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cuda-cupti-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cublas-cu12 (==12.4.5.8) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cufft-cu12 (==11.2.1.3) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-curand-cu12 (==10.3.5.147) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusolver-cu12 (==11.6.1.9) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusparse-cu12 (==12.3.1.170) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nccl-cu12 (==2.21.5) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nvtx-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nvjitlink-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
        'triton (==3.1.0) ; platform_system == "Linux" and platform_machine == "x86_64" and python_version < "3.13"',
        'sympy (==1.12.1) ; python_version == "3.8"',
        'setuptools ; python_version >= "3.12"',
        'sympy (==1.13.1) ; python_version >= "3.9"',
        "opt-einsum (>=3.3) ; extra == 'opt-einsum'",
        "optree (>=0.12.0) ; extra == 'optree'",
    ),
    'torch 2.5.1 (CUDA 12.4): METADATA of https://files.pythonhosted.org/packages/d1/35/e8b2daf02ce933e4518e6f5682c72fd0ed66c15910ea1fb4168f442b71c4/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl (read with pip install --dry-run --report)')

TORCH_280 = TorchWheel(
    '2.8.0', '12.8', '2.4', 'manylinux_2_28_x86_64',
    (
        'filelock',
        'typing-extensions>=4.10.0',
        'setuptools; python_version >= "3.12"',
        'sympy>=1.13.3',
        'networkx',
        'jinja2',
        'fsspec',
        'nvidia-cuda-nvrtc-cu12==12.8.93; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cuda-cupti-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cublas-cu12==12.8.4.1; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cufft-cu12==11.3.3.83; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-curand-cu12==10.3.9.90; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusolver-cu12==11.7.3.90; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusparse-cu12==12.5.8.93; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusparselt-cu12==0.7.1; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nccl-cu12==2.27.3; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nvtx-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nvjitlink-cu12==12.8.93; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cufile-cu12==1.13.1.3; platform_system == "Linux" and platform_machine == "x86_64"',
        'triton==3.4.0; platform_system == "Linux" and platform_machine == "x86_64"',
        'optree>=0.13.0; extra == "optree"',
        'opt-einsum>=3.3; extra == "opt-einsum"',
        'pyyaml; extra == "pyyaml"',
    ),
    'torch 2.8.0 (CUDA 12.8): METADATA of https://files.pythonhosted.org/packages/99/a8/6acf48d48838fb8fe480597d98a0668c2beb02ee4755cc136de92a0a956f/torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl (read with pip install --dry-run --report)')

TORCH_270_CPU = TorchWheel(
    "2.7.0+cpu", None, "2.1", "linux_x86_64",
    ("filelock", "typing-extensions>=4.10.0", 'setuptools; python_version >= "3.12"',
     "sympy>=1.13.3", "networkx", "jinja2", "fsspec", 'optree>=0.13.0; extra == "optree"',
     'opt-einsum>=3.3; extra == "opt-einsum"'),
    "torch 2.7.0+cpu from download.pytorch.org/whl/cpu: no nvidia-* requirement (hand-written "
    "list of its other requirements)")
