"""The program model (issue 10, cause 3): the linted files are one program. A finding is
the same whether the code sits in one file or five; loaders, models, devices and step
functions are followed across modules, through tuple returns, class attributes and the
parameters callers pass; per-file summaries are cached by content hash and linked."""

from __future__ import annotations

import ast
import pickle

from lint_helpers import found, program

from pitstop.lint.index import ModuleIndex
from pitstop.lint.program import Program
from pitstop.lint.summary import summarize

ONE_FILE = {
    "train.py": """
        import torch
        from torch.utils.data import DataLoader

        def make_loader(ds):
            return DataLoader(ds, batch_size=64, num_workers=4)

        def build_model():
            return Net().cuda()

        def zero(opt):
            opt.zero_grad(set_to_none=False)

        def log_step(loss):
            print(loss.item())

        def main(ds):
            model = build_model()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = make_loader(ds)
            for epoch in range(10):
                for x, y in loader:
                    x, y = x.cuda(), y.cuda()
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    zero(opt)
                    loss.backward()
                    opt.step()
                    log_step(loss)
        """,
}

FIVE_FILES = {
    "data.py": """
        from torch.utils.data import DataLoader

        def make_loader(ds):
            return DataLoader(ds, batch_size=64, num_workers=4)
        """,
    "models/__init__.py": "",
    "models/net.py": """
        def build_model():
            return Net().cuda()
        """,
    "utils/__init__.py": "",
    "utils/optim.py": """
        def zero(opt):
            opt.zero_grad(set_to_none=False)

        def log_step(loss):
            print(loss.item())
        """,
    "train.py": """
        import torch

        from data import make_loader
        from models.net import build_model
        from utils.optim import log_step, zero

        def main(ds):
            model = build_model()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = make_loader(ds)
            for epoch in range(10):
                for x, y in loader:
                    x, y = x.cuda(), y.cuda()
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    zero(opt)
                    loss.backward()
                    opt.step()
                    log_step(loss)
        """,
}


def _codes(run) -> list[str]:
    return sorted(f.code for f in run.findings)


def test_a_finding_is_the_same_in_one_file_or_five(tmp_path) -> None:
    one = program(tmp_path / "one", ONE_FILE)
    five = program(tmp_path / "five", FIVE_FILES)
    assert not one.all_diagnostics and not five.all_diagnostics
    # the loader's workers (LT004 via the epoch loop in another module), pinning (LT003:
    # its batches go to the GPU elsewhere), the per-batch .item() in a helper (LT001),
    # the zero_grad in utils/ (LT009), amp (LT006)
    assert _codes(one) == _codes(five)
    assert {"LT001", "LT003", "LT004", "LT006", "LT009"} <= set(_codes(five))
    where = {(f.code, f.path.rsplit("/", 1)[-1]) for f in five.findings}
    assert ("LT001", "optim.py") in where and ("LT004", "data.py") in where


def test_modules_imported_but_not_linted_are_read_as_context(tmp_path) -> None:
    # Linting train.py alone: data.py and models/net.py are read for what they define
    # (a loader factory, a model moved to the GPU), their own findings not reported.
    run = program(tmp_path, FIVE_FILES, only=["train.py"])
    assert {f.path.rsplit("/", 1)[-1] for f in run.findings} == {"train.py"}
    assert "LT006" in _codes(run)  # a GPU training loop: the model comes from models/net.py


def test_tuple_returns_and_packages_without_init(tmp_path) -> None:
    run = program(tmp_path, {
        "data/build.py": """
            import torch

            def build_loader(cfg):
                train = torch.utils.data.DataLoader(cfg.ds, num_workers=8, pin_memory=True)
                val = torch.utils.data.DataLoader(cfg.val, num_workers=8, pin_memory=True)
                return cfg.ds, train, val
            """,
        "main.py": """
            import torch
            from data.build import build_loader

            def train_one_epoch(model, loader, opt):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    opt.step()

            def main(cfg, model, opt):
                ds, train_loader, val_loader = build_loader(cfg)
                for epoch in range(cfg.epochs):
                    train_one_epoch(model, train_loader, opt)
            """,
    })
    # the train loader is iterated once per epoch by a function called in the epoch loop
    assert ("build.py", 4, "LT004") in found(run)


def test_class_attributes_from_init_and_methods(tmp_path) -> None:
    run = program(tmp_path, {"trainer.py": """
        import torch
        from torch.utils.data import DataLoader

        class Trainer:
            def __init__(self, model, ds):
                self.model = model.cuda()
                self.loader = DataLoader(ds, batch_size=32)
                self.opt = torch.optim.AdamW(self.model.parameters())

            def step(self, x, y):
                loss = self.model(x.cuda(), y.cuda())
                loss.backward()
                self.opt.step()
                return loss

            def fit(self, epochs):
                for epoch in range(epochs):
                    for x, y in self.loader:
                        loss = self.step(x, y)
                        print(f"loss {loss:.3f}")
        """})
    got = found(run)
    assert ("trainer.py", 7, "LT002") in got  # self.loader, built in __init__
    assert ("trainer.py", 20, "LT001") in got  # self.step(...) returns the GPU loss


def test_callers_tell_a_function_what_its_parameters_hold(tmp_path) -> None:
    # `loss_scaler` is a parameter: the caller passes a NativeScaler, whose __call__ runs
    # backward and the optimizer step -- so the loop trains.
    run = program(tmp_path, {
        "utils.py": """
            import torch

            class NativeScaler:
                def __init__(self):
                    self._scaler = torch.amp.GradScaler("cuda")

                def __call__(self, loss, optimizer):
                    self._scaler.scale(loss).backward()
                    self._scaler.step(optimizer)
                    self._scaler.update()
            """,
        "engine.py": """
            import torch

            def train_one_epoch(model, loader, optimizer, loss_scaler, device):
                for samples, targets in loader:
                    samples = samples.to(device, non_blocking=True)
                    loss = model(samples).mean()
                    loss_scaler(loss, optimizer)
                    torch.cuda.synchronize()
            """,
        "main.py": """
            import torch
            from engine import train_one_epoch
            from utils import NativeScaler

            def main(model, loader, optimizer):
                loss_scaler = NativeScaler()
                for epoch in range(100):
                    train_one_epoch(model, loader, optimizer, loss_scaler, torch.device("cuda"))
            """,
    })
    assert ("engine.py", 8, "LT001") in found(run)


def test_star_imports_bring_a_module_s_functions(tmp_path) -> None:
    # tutorial code: `from utils import *`; the metric helper reads a GPU scalar per step.
    # The name is looked up through the star imports only when nothing else binds it;
    # utils.py never names torch, yet its `.item()` runs per batch.
    run = program(tmp_path, {
        "utils.py": """
            def accuracy(scores, targets, k):
                _, ind = scores.topk(k, 1, True, True)
                correct = ind.eq(targets.view(-1, 1).expand_as(ind))
                return correct.view(-1).float().sum().item() * (100.0 / targets.size(0))

            def _private(x):
                return x.item()
            """,
        "more.py": """
            from utils import *
            """,
        "train.py": """
            import torch
            from more import *

            device = torch.device("cuda")

            def train(loader, model, criterion, optimizer):
                for imgs, targets in loader:
                    imgs, targets = imgs.to(device), targets.to(device)
                    scores = model(imgs)
                    loss = criterion(scores, targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    top5 = accuracy(scores, targets, 5)
                    _private(loss)
            """,
    })
    assert found(run, "LT001") == {("utils.py", 4, "LT001")}


def test_summaries_are_picklable_and_linking_is_cheap() -> None:
    src = "import torch\nfrom torch.utils.data import DataLoader\n\ndef f(ds):\n" \
          "    return DataLoader(ds, num_workers=2), torch.device('cuda')\n"
    s = summarize(ModuleIndex(ast.parse(src), "/x/data.py"))
    again = pickle.loads(pickle.dumps(s))
    assert again.functions["f"].returns == s.functions["f"].returns
    prog = Program([again])
    r = prog.returns_item(prog.key("/x/data.py"), "f", 0)
    assert r is not None and r.kind == "loader"


def test_first_pass_results_are_cached_by_content(tmp_path, monkeypatch) -> None:
    from pitstop.lint import engine

    (tmp_path / "train.py").write_text(ONE_FILE["train.py"])
    calls = []
    real = engine._lint_bytes
    monkeypatch.setattr(engine, "_lint_bytes", lambda *a: calls.append(1) or real(*a))
    opts = engine.default_options()
    first = engine.lint_file(str(tmp_path / "train.py"), opts)
    second = engine.lint_file(str(tmp_path / "train.py"), opts)
    assert calls == [1] and first == second  # same content: not parsed again
    (tmp_path / "train.py").write_text(ONE_FILE["train.py"] + "\n# changed\n")
    engine.lint_file(str(tmp_path / "train.py"), opts)
    assert calls == [1, 1]
    # what a caller does to its result (the link pass filters findings) stays out of the cache
    amp = tmp_path / "amp.py"
    amp.write_text("import torch\nwith torch.cuda.amp.autocast():\n    y = model(x)\n")
    found = engine.lint_file(str(amp), opts)
    assert [f.code for f in found.findings] == ["LT007"]
    found.findings.clear()
    assert [f.code for f in engine.lint_file(str(amp), opts).findings] == ["LT007"]
    assert calls == [1, 1, 1]

def test_model_modules_reached_by_name_count_for_the_program(tmp_path) -> None:
    # networks.py is not imported: the training loop builds its classes from a string
    # (a registry). Its fp16 layers still count: no "no autocast anywhere" finding.
    run = program(tmp_path, {
        "networks.py": """
            import torch

            class Generator(torch.nn.Module):
                def forward(self, x):
                    return self.body(x.to(torch.float16))
            """,
        "training_loop.py": """
            import torch
            import registry

            def train(loader, opt, device):
                G = registry.construct_class_by_name("networks.Generator").to(device)
                for x in loader:
                    loss = G(x.to(device)).mean()
                    loss.backward()
                    opt.step()
            """,
    }, select=("LT006",))
    assert not run.findings


def test_a_gradient_accumulation_helper_counts_as_backward(tmp_path) -> None:
    run = program(tmp_path, {"train.py": """
        import torch

        def backward(loss, scaler):
            scaler.scale(loss).backward()

        def train(model, loader, opt, scaler, accum):
            model = torch.nn.parallel.DistributedDataParallel(model)
            for i, batch in enumerate(loader):
                for j in range(accum):
                    loss = model(batch[j].cuda()).mean()
                    backward(loss, scaler)
                scaler.step(opt)
                scaler.update()
        """}, select=("LT010",))
    assert found(run) == {("train.py", 11, "LT010")}
