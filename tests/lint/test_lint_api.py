"""The library API: lint_source / lint_paths and the conversion to pitstop Findings."""

from __future__ import annotations

import pytest
from lint_helpers import CORPUS

from pitstop.findings import Finding
from pitstop.lint import lint_paths, lint_source

SRC = (
    "import torch\n"
    "for x, y in loader:\n"
    "    loss = model(x.cuda()).sum()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    if step % 10 == 0:\n"
    "        print(loss.item())\n"
    "    total = loss.item()\n"
)


def test_lint_source_reports_only_the_unguarded_sync() -> None:
    found = [(f.line, f.code) for f in lint_source(SRC, select=("LT001",))]
    assert found == [(8, "LT001")]
    f = lint_source(SRC, select=("sync",))[0]
    assert f.category == "sync" and f.column == 13
    finding = f.to_finding()
    assert isinstance(finding, Finding) and finding.code == "LT001"
    assert finding.location is not None and finding.location.line == 8
    assert finding.location.column == 12  # Location columns are 0-based like ast


def test_lint_source_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        lint_source("import torch\ndef f(:\n")


def test_lint_paths_on_the_corpus() -> None:
    run = lint_paths([CORPUS], jobs=2)
    assert not run.all_diagnostics
    assert {f.code for f in run.findings} >= {"LT001", "LT002", "LT010", "LT013"}


def test_gate_keeps_loops_whose_objects_come_from_sibling_modules(tmp_path) -> None:
    # train.py never names torch (model, loader and optimizer come from .data/.model):
    # the byte gate must still parse it, and the package's other modules count.
    from pitstop.lint.analyze import mentions_torch

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("import torch\nnet = torch.nn.Linear(2, 2).cuda()\n")
    train = ("from .data import make_loader\nfrom .model import net, opt\n"
             "def fit():\n    for x, y in make_loader():\n        loss = net(x.cuda())\n"
             "        loss.backward()\n        opt.step()\n        print(loss.item())\n")
    (pkg / "train.py").write_text(train)
    assert mentions_torch(train.encode())
    assert not mentions_torch(b"import json\nprint(json.dumps({'a': 1}))\n")
    run = lint_paths([pkg / "train.py"], jobs=1)
    assert {(f.line, f.code) for f in run.findings} >= {(8, "LT001"), (4, "LT006")}


def test_analysis_gate_spells_out_its_triggers() -> None:
    # Each trigger a rule needs passes the gate; torch-internal words that merely look
    # alike (`zero_point`, `_iterate`, `handle`) do not cost an analysis.
    from pitstop.lint.analyze import worth_analysing

    for text in ["for b in train_iter:\n", "for b in dl:\n", "for b in val_dl:\n",
                 "opt.zero_grad(False)\n", "opt.zero_grad(set_to_none=False)\n",
                 "loss.backward()\n", "nn.BatchNorm2d(3)\n", "torch.cuda.amp.autocast()\n"]:
        assert worth_analysing(text), text
    for text in ["q = x.zero_point\n", "for a in self._iterate():\n", "handle = idle()\n"]:
        assert not worth_analysing(text), text


def test_lint_source_judges_program_rules_on_the_module_alone() -> None:
    # No convolution in the text: no cudnn-benchmark finding; autocast present: no
    # amp-missing / tf32. (Conditions used to be left unresolved by lint_source.)
    loop = ("import torch\nmodel = Net().cuda()\nfor x, y in loader:\n"
            "    loss = model(x.cuda()).mean()\n    loss.backward()\n    optimizer.step()\n")
    # no layer in sight: whether fp32 matmuls run (TF32) is unknown, so no LT011
    assert {f.code for f in lint_source(loop)} == {"LT006"}
    mlp = "import torch.nn as nn\nlayer = nn.Linear(784, 512)\n" + loop
    assert {f.code for f in lint_source(mlp)} == {"LT006", "LT011"}
    # conv-only: cuDNN already uses TF32 for convolutions, matmul TF32 would not help
    conv = "import torch.nn as nn\nlayer = nn.Conv2d(3, 8, 3)\n" + loop
    assert {f.code for f in lint_source(conv)} == {"LT005", "LT006"}
    # a Linear head on a conv net is not where the time goes; attention is
    head = conv + "head = nn.Linear(512, 10)\n"
    assert {f.code for f in lint_source(head)} == {"LT005", "LT006"}
    attn = head + "attn = nn.MultiheadAttention(512, 8)\n"
    assert {f.code for f in lint_source(attn)} == {"LT005", "LT006", "LT011"}
    amp = loop.replace("    loss = model", "    with torch.autocast('cuda'):\n        loss = model")
    assert {f.code for f in lint_source(amp)} == set()


def test_loader_factory_judged_by_the_module_that_iterates_it(tmp_path) -> None:
    # data.py builds and returns the loader; whether it needs persistent workers depends
    # on train.py: an epoch loop there makes it a finding, a single pass does not.
    def package(train_body: str):
        pkg = tmp_path / f"pkg{len(list(tmp_path.iterdir()))}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "data.py").write_text(
            "from torch.utils.data import DataLoader\n\n"
            "def make_loader(ds):\n    return DataLoader(ds, batch_size=8, num_workers=4)\n")
        (pkg / "train.py").write_text("from .data import make_loader\n\n" + train_body)
        return pkg

    epochs = package("def fit(ds, model, opt):\n    loader = make_loader(ds)\n"
                     "    for epoch in range(10):\n        for x in loader:\n"
                     "            model(x).sum().backward()\n            opt.step()\n")
    once = package("def fit(ds, model, opt):\n    for x in make_loader(ds):\n"
                   "        model(x).sum().backward()\n        opt.step()\n")
    assert [(f.line, f.code) for f in lint_paths([epochs], select=("LT004",), jobs=1).findings] \
        == [(4, "LT004")]
    assert not lint_paths([once], select=("LT004",), jobs=1).findings
    # data.py alone: nothing shows the loader is iterated for epochs, so no finding
    assert not lint_paths([epochs / "data.py"], select=("LT004",), jobs=1).findings
