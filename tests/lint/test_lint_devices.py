"""The device model (issue 10, cause 1): a program is linted as GPU code when some path
can put its work on an accelerator, and every GPU-only finding names where that device
came from (file:line)."""

from __future__ import annotations

import json

import pytest
from lint_helpers import found, program

from pitstop.lint import lint_source

LOOP = """
    for epoch in range(10):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            print(loss.item())
"""


def _with(device_code: str, prelude: str = "import torch\n") -> list:
    import textwrap

    return lint_source(prelude + textwrap.dedent(device_code) + textwrap.dedent(LOOP),
                       "train.py", select=("LT001",))


@pytest.mark.parametrize("device_code", [
    # the device-agnostic form PyTorch's examples use now
    'if torch.accelerator.is_available():\n'
    '    device = torch.accelerator.current_accelerator()\nelse:\n'
    '    device = torch.device("cpu")\n',
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
    'device = torch.device(args.device)\n',  # non-literal: may be an accelerator
    'model = model.cuda()\ndevice = "cuda"\n',
    'import argparse\np = argparse.ArgumentParser()\np.add_argument("--device", default="cuda")\n'
    'args = p.parse_args()\ndevice = args.device\n',
    'import argparse\np = argparse.ArgumentParser()\n'
    'p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mps"])\n'
    'args = p.parse_args()\ndevice = torch.device(args.device)\n',
])
def test_gpu_capable_programs_are_gpu_code(device_code) -> None:
    assert [f.code for f in _with(device_code)] == ["LT001"], device_code


def test_import_torch_as_th() -> None:
    got = _with('device = th.device("cuda" if th.cuda.is_available() else "cpu")\n',
                prelude="import torch as th\n")
    assert [f.code for f in got] == ["LT001"]


@pytest.mark.parametrize("device_code", [
    'device = "cpu"\n',
    'device = torch.device("cpu")\n',
    'import argparse\np = argparse.ArgumentParser()\np.add_argument("--device", default="cpu")\n'
    'args = p.parse_args()\ndevice = args.device\n',
])
def test_cpu_only_programs_get_no_gpu_findings(device_code) -> None:
    assert _with(device_code) == [], device_code


def test_evidence_names_where_the_device_came_from() -> None:
    got = _with('device = torch.accelerator.current_accelerator()\n')
    ev = dict(got[0].evidence)
    assert ev["device"].startswith("train.py:2 ")
    assert "torch.accelerator" in ev["device"]
    # inferred, not spelled out: the message says "may"
    assert "may" in got[0].message


def test_a_helper_in_another_module_returns_the_device(tmp_path) -> None:
    run = program(tmp_path, {
        "dist_util.py": """
            import torch

            def dev():
                if torch.cuda.is_available():
                    return torch.device("cuda")
                return torch.device("cpu")
            """,
        "train.py": """
            import dist_util

            def train(model, loader, opt):
                for x, y in loader:
                    x = x.to(dist_util.dev())
                    loss = model(x).mean()
                    loss.backward()
                    opt.step()
                    print(f"{loss:.3f}")
            """,
    }, select=("LT001",))
    assert found(run) == {("train.py", 9, "LT001")}
    ev = dict(run.findings[0].evidence)
    assert "dist_util.py:5" in ev["device"] or "dist_util.py" in ev["device"]


def test_model_moved_inside_a_build_function(tmp_path) -> None:
    run = program(tmp_path, {
        "models.py": """
            import torch.nn as nn

            def build_model(cfg):
                net = nn.Sequential(nn.Linear(cfg.width, cfg.width), nn.ReLU())
                return net.cuda()
            """,
        "train.py": """
            from models import build_model

            def fit(cfg, loader, opt):
                model = build_model(cfg)
                for x, y in loader:
                    loss = model(x).sum()
                    loss.backward()
                    opt.step()
                    print(loss.item())
            """,
    }, select=("LT001", "LT006"))
    assert found(run) == {("train.py", 9, "LT001"), ("train.py", 5, "LT006")}


def test_device_option_and_config_key(tmp_path, pitstop_cli) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\ndevice = torch.device(args.device)\n" + LOOP.replace("\n    ", "\n"))
    r = pitstop_cli("lint", str(tmp_path / "train.py"), "--format", "json", "--select", "LT001")
    assert r.returncode == 1 and json.loads(r.stdout)
    r = pitstop_cli("lint", str(tmp_path / "train.py"), "--device", "cpu", "--select", "LT001")
    assert r.returncode == 0 and "No findings" in r.stdout
    # the same from [tool.pitstop.lint]
    (tmp_path / "pyproject.toml").write_text('[tool.pitstop.lint]\ndevice = "cpu"\n')
    r = pitstop_cli("lint", str(tmp_path / "train.py"), "--select", "LT001")
    assert r.returncode == 0, r.stdout
    # `--device gpu` for code that only shows a CPU device (moved by a launcher, say)
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "cpu.py").write_text("import torch\ndevice = 'cpu'\n" + LOOP.replace("\n    ", "\n"))
    r = pitstop_cli("lint", str(tmp_path / "cpu.py"), "--device", "gpu", "--format", "json",
                    "--select", "LT001")
    got = json.loads(r.stdout)
    assert got and got[0]["evidence"]["device"].startswith("--device")
    (tmp_path / "pyproject.toml").write_text('[tool.pitstop.lint]\ndevice = "tpu"\n')
    r = pitstop_cli("lint", str(tmp_path / "train.py"))
    assert r.returncode == 2 and "device must be one of" in r.stderr
