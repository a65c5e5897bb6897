"""Installing pitstop never touches the user's torch.

The wheel's declared dependencies are what doctor, lint, system and explain need, torch
is in no extra, those commands run with torch, numpy, Pillow and matplotlib blocked,
and a fresh venv holding an older torch keeps it through `pip install`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pitstop_testing import REPO, SRC, pitstop_env

CORE = {"click", "rich", "psutil", "nvidia-ml-py", "libcst", "tomli"}
BENCH = {"pillow", "numpy", "matplotlib"}
HEAVY = ("torch", "numpy", "PIL", "matplotlib", "tensorboard", "torchvision")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (found,) = out.glob("pitstop-*.whl")
    return found


def _requirements(wheel: Path) -> list[tuple[str, str]]:
    """(distribution name, marker) of every Requires-Dist line of the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            spec = line.split(":", 1)[1].strip()
            name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()  # type: ignore[union-attr]
            marker = spec.split(";", 1)[1] if ";" in spec else ""
            out.append((name, marker))
    return out


def _extra(marker: str) -> str | None:
    m = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
    return m.group(1) if m else None


def test_the_wheel_declares_core_deps_and_never_torch(wheel: Path) -> None:
    reqs = _requirements(wheel)
    assert not [r for r in reqs if r[0] in ("torch", "torchvision", "torchaudio")], reqs
    core = {name for name, marker in reqs if _extra(marker) is None}
    assert core == CORE
    bench = {name for name, marker in reqs if _extra(marker) == "bench"}
    assert bench == BENCH
    assert {name for name, marker in reqs if _extra(marker) == "plot"} == {"matplotlib"}
    assert {name for name, marker in reqs if _extra(marker) == "monitor"} == {
        "textual", "prometheus-client"}
    assert not core & BENCH  # Pillow, numpy, matplotlib only with pitstop[bench]


def test_the_wheel_holds_the_package_and_its_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "pitstop/cli.py" in names and "pitstop/profile/_inject/sitecustomize.py" in names
    assert "pitstop = pitstop.cli:main" in entry


BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv.pop(1).split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None
sys.meta_path.insert(0, Block())
import pitstop.cli
pitstop.cli.main(sys.argv[1:])
"""


def _blocked(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER, ",".join(HEAVY), *args], cwd=cwd,
                          env=pitstop_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ["doctor"], ["doctor", "--json"], ["lint", "train.py"], ["lint", "--fix", "train.py"],
    ["system", "show"], ["system", "apply"], ["explain", "LT001"], ["explain", "--list"],
    ["--help"], ["bench", "--help"],
])
def test_core_commands_run_without_torch_numpy_pillow_matplotlib(tmp_path: Path,
                                                                  args: list[str]) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nfor x, y in loader:\n    with torch.cuda.amp.autocast():\n"
        "        loss = model(x)\n    print(loss.item())\n")
    proc = _blocked(*args, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "blocked by the test" not in proc.stderr


# ---------------------------------------------------------------- a fresh venv, old torch

def _fake_torch_wheel(folder: Path, version: str = "2.3.0") -> Path:
    """A tiny but real wheel named torch, version 2.3.0: no torch older than 2.4 can be
    installed on this machine, so this stands in for a user's older install."""
    files = {"torch/__init__.py": f'__version__ = "{version}"\n'.encode(),
             f"torch-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode(),
             f"torch-{version}.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: pitstop-tests\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"torch-{version}.dist-info/RECORD,,")
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"torch-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.mark.slow
def test_a_fresh_venv_keeps_its_older_torch(tmp_path: Path, wheel: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    fake = _fake_torch_wheel(tmp_path)
    subprocess.run([*pip, str(fake)], check=True, capture_output=True, timeout=120)
    torch_init = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" \
        / "site-packages" / "torch" / "__init__.py"
    before = torch_init.read_bytes()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([*pip, str(wheel)], capture_output=True, text=True, timeout=600,
                          env=env)
    assert done.returncode == 0, done.stderr
    version = subprocess.run([str(py), "-c", "import importlib.metadata as m; "
                              "print(m.version('torch'))"], capture_output=True, text=True,
                             env=env, check=True)
    assert version.stdout.strip() == "2.3.0" and torch_init.read_bytes() == before
    pitstop = venv / "bin" / "pitstop"
    assert str(SRC) not in subprocess.run([str(py), "-c", "import pitstop; print(pitstop.__file__)"],
                                          capture_output=True, text=True, env=env).stdout
    (tmp_path / "train.py").write_text("import torch\nfor x in loader:\n    print(x.item())\n")
    for args in (["lint", "train.py"], ["doctor"]):
        proc = subprocess.run([str(pitstop), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
    bench = subprocess.run([str(pitstop), "bench"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 2
    lines = bench.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch >= 2.4; this Python has torch 2.3.0" in lines[0]
    assert "pip install torch" in lines[0]
    assert torch_init.read_bytes() == before


def test_bench_without_torch_says_in_one_line_what_to_install(tmp_path: Path) -> None:
    proc = _blocked("bench", "--quick", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "pitstop bench needs torch >= 2.4, which is not installed" in lines[0]
    assert re.search(r"pip install .*torch .*--index-url https://download\.pytorch\.org/whl/",
                     lines[0])
    assert os.listdir(tmp_path) == []


def test_plot_without_matplotlib_says_in_one_line_what_to_install(tmp_path: Path) -> None:
    # checked before the recording is read: a long one is not read for nothing
    proc = _blocked("plot", "run.jsonl", "-o", "run.png", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "pitstop: error: pitstop plot needs matplotlib, not installed in this Python; install "
        "it with: pip install 'pitstop[plot]'"]
    assert os.listdir(tmp_path) == []
