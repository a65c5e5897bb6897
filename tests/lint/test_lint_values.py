"""The value model and the sync forms (issue 10, cause 5): what is a GPU tensor, and every
way of reading one on the host; host-to-device copies are never syncs."""

from __future__ import annotations

import textwrap

import pytest

from pitstop.lint import lint_source

HEAD = """\
import math
import numpy as np
import torch
device = torch.device("cuda")
for step, (x, y) in enumerate(loader):
    x, y = x.to(device), y.to(device)
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    mask = logits.argmax(1) == y
    losses = torch.stack([loss, loss])
"""


def _sync(line: str) -> list[str]:
    src = HEAD + textwrap.indent(line, "    ") + "\n"
    return [dict(f.evidence)["sync"] for f in lint_source(src, select=("LT001",))]


@pytest.mark.parametrize(("line", "sync"), [
    ('print("loss %.4f" % loss)', "format"),
    ('print("%s %s" % (step, loss))', "format"),
    ('s = ("%10s" * 2 + "%10.4g") % ("a", "b", *losses)', "format"),
    ('print(f"{step}: {loss:.3f}")', "format"),
    ('print("{} {}".format(*losses))', "format"),
    ("assert torch.isfinite(loss).all()", "control-flow"),
    ("value = float(loss)", "float"),
    ("ids = logits.argmax(1).tolist()", "tolist"),
    ("hit = bool(mask.any())", "bool"),
    ("if torch.isnan(loss):\n    break", "control-flow"),
    ("idx = mask.nonzero()", "nonzero"),
    ("wrong = x[mask]", "boolean-mask"),
    ("part = logits[:, mask]", "boolean-mask"),
    ("ok = math.isfinite(loss)", "math.isfinite"),
    ("arr = np.asarray(logits)", "numpy"),
    ("host = torch.zeros(2)\nhost[0] = loss", "setitem"),
    ("head = logits[: mask.sum()]", "slice"),
    ("progress.set_postfix(loss=loss)", "progress"),
    # a list of GPU tensors concatenated is a GPU tensor (yolov7-style target assignment)
    ("parts = []\nfor k in range(3):\n    parts.append(logits[k])\nkept = torch.cat(parts)[mask]",
     "boolean-mask"),
])
def test_sync_forms(line, sync) -> None:
    assert _sync(line) == [sync], line


@pytest.mark.parametrize("line", [
    "images = x.to(device)",                       # host-to-device: no sync
    "y2 = y.cuda(non_blocking=True)",
    'print(f"step {step}")',                       # only host values
    "n = x.size(0) * len(loader)",
    "value = loss.detach()",                       # stays on the device
    "total = total + loss.detach()",
    "if step % 100 == 0:\n    print(loss.item())",  # a rare guard
    "params = list(model.parameters())",
    "batch = tuple(t.to(device) for t in (x, y))",
    "seen = []\nseen.append(loss)\nif seen:\n    pass",  # a list's truth is its length
])
def test_not_syncs(line) -> None:
    assert _sync(line) == [], line


def test_host_to_device_copy_is_never_called_a_sync() -> None:
    # An evaluation loop with a device chosen at run time: `.to(device)` is an upload.
    src = textwrap.dedent("""
        import torch
        device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() \\
            else torch.device("cpu")
        model.eval()
        with torch.no_grad():
            for images, target in val_loader:
                images = images.to(device)
                target = target.to(device)
                output = model(images)
                correct += output.argmax(1).eq(target).sum().item()
        """)
    found = lint_source(src, select=("LT001",))
    assert [f.line for f in found] == [11]
    assert not any("to the host" in f.message and ".to(device)" in f.message for f in found)


def test_values_derived_by_functions_we_cannot_see() -> None:
    # timm's accuracy(): its result is read on the host, so it is a tensor.
    src = textwrap.dedent("""
        import torch
        from timm.utils import accuracy
        for images, target in val_loader:
            images, target = images.cuda(), target.cuda()
            output = model(images)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            meter.update(acc1.item(), images.size(0))
        """)
    found = lint_source(src, select=("LT001",))
    assert [f.line for f in found] == [8]


def test_module_level_lambdas_and_the_module_seen_through_sys_modules() -> None:
    # a book's library: helpers are lambdas, the module calls itself through an alias
    src = textwrap.dedent("""
        import sys
        import torch
        d2l = sys.modules[__name__]
        reduce_sum = lambda x, *args, **kwargs: x.sum(*args, **kwargs)
        argmax = lambda x, *args, **kwargs: x.argmax(*args, **kwargs)
        size = lambda x: 3

        def accuracy(y_hat, y):
            y_hat = d2l.argmax(y_hat, axis=1)
            return float(d2l.reduce_sum(y_hat == y))

        def train(net, loader, opt, loss):
            device = torch.device("cuda")
            for X, y in loader:
                X, y = X.to(device), y.to(device)
                pred = net(X)
                l = loss(pred, y)
                l.sum().backward()
                opt.step()
                acc = d2l.accuracy(pred, y)
                n = float(size(pred))
        """)
    got = [(f.line, dict(f.evidence)["sync"]) for f in lint_source(src, select=("LT001",))]
    assert got == [(11, "float")]


def test_constants_moved_to_the_device_of_a_forward_input() -> None:
    # normalisation constants built on the CPU and moved to the input's device on every
    # forward (also inside `map(lambda ...)`, which runs at once); `.to(images)` takes the
    # input's dtype as well, so no `device=images` rewrite is offered
    src = textwrap.dedent("""
        import torch
        from torch import nn

        class VAE(nn.Module):
            def __init__(self, normalization=((0.5,) * 3, (0.5,) * 3)):
                super().__init__()
                self.normalization = normalization
                self.enc = nn.Conv2d(3, 8, 3)

            def norm(self, images):
                means, stds = map(lambda t: torch.as_tensor(t).to(images), self.normalization)
                return (images - means) / stds

            def forward(self, img):
                return self.enc(self.norm(img))

        def train(loader, opt):
            vae = VAE().cuda()
            for x in loader:
                loss = vae(x.cuda()).mean()
                loss.backward()
                opt.step()
        """)
    got = lint_source(src, select=("LT012",))
    assert [(f.line, f.fix) for f in got] == [(12, None)]


def test_a_metric_moved_to_the_device_computes_a_gpu_tensor() -> None:
    src = textwrap.dedent("""
        import torch
        from torchmetrics.aggregation import RunningMean
        device = torch.device("cuda")

        def fit(model, optimizer, loader):
            smoothed = RunningMean(window=8).to(device)
            for batch in loader:
                loss = model(batch.to(device)).mean()
                loss.backward()
                optimizer.step()
                smoothed.update(loss.detach())
                print(f"loss {smoothed.compute().item():.3f}")
                lr = optimizer.param_groups[0]["lr"]
        """)
    assert [f.line for f in lint_source(src, select=("LT001",))] == [13]
