"""Shapes of the sixth round (2026-12-02): boolean masks that reach a model's forward()
through a helper method, `~`, a sub-module's outputs or their names; models reached only
through a registry (files that the imports do not join); and code that runs only when the
user asks (`if not args.eval: train() else: test()`)."""

from __future__ import annotations

from lint_helpers import found, line_of, program

# ---------------------------------------------------------------- masks in forward()
MASKED_ENCODER = """
import numpy as np
import torch
from torch import nn


class MaskedEncoder(nn.Module):
    def __init__(self, ratio):
        super().__init__()
        self.ratio = ratio
        self.embed = nn.Linear(3, 16)

    def _random_mask(self, center):
        B, G, _ = center.shape
        if self.ratio == 0:
            return torch.zeros(center.shape[:2]).bool()
        m = np.zeros([B, G])
        m[:, : int(self.ratio * G)] = 1
        m = torch.from_numpy(m).to(torch.bool)
        return m.to(center.device)

    def forward(self, center):
        hidden = self.embed(center)
        masked = self._random_mask(center)
        visible = hidden[~masked]
        return visible, masked


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.MAE_encoder = MaskedEncoder(0.6)
        self.head = nn.Linear(16, 3)

    def forward(self, center):
        visible, mask = self.MAE_encoder(center)
        kept = center[~mask]
        hidden_mask = center[mask]
        return self.head(visible).mean() + kept.mean() + hidden_mask.mean()
"""

MASKED_TRAIN = """
import torch
from torch.utils.data import DataLoader
from mae import Autoencoder


def main():
    model = Autoencoder().cuda()
    opt = torch.optim.AdamW(model.parameters())
    loader = DataLoader(torch.randn(64, 32, 3), batch_size=8)
    for epoch in range(10):
        for points in loader:
            points = points.cuda()
            loss = model(points)
            opt.zero_grad()
            loss.backward()
            opt.step()


main()
"""


def test_masks_made_by_a_helper_method_and_moved_to_the_inputs_device(tmp_path):
    run = program(tmp_path, {"mae.py": MASKED_ENCODER, "train.py": MASKED_TRAIN})
    got = found(run, "LT001")
    # `hidden[~masked]`: `~` of a GPU tensor selects by a mask
    assert ("mae.py", line_of(MASKED_ENCODER, "visible = hidden[~masked]"), "LT001") in got
    # the mask comes back through a sub-module named in capitals (a call, not a class)
    assert ("mae.py", line_of(MASKED_ENCODER, "kept = center[~mask]"), "LT001") in got
    # a GPU tensor named `mask` used as an index is a boolean mask
    assert ("mae.py", line_of(MASKED_ENCODER, "hidden_mask = center[mask]"), "LT001") in got


POSITIONS = """
import torch
from torch import nn


class Picker(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 8)

    def forward(self, x, mask_idx):
        picked = x[mask_idx]
        return self.embed(picked).sum()


model = Picker().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.arange(100), batch_size=10)
for x in loader:
    x = x.cuda()
    loss = model(x, torch.arange(5).cuda())
    loss.backward()
    opt.step()
"""


def test_an_index_named_as_positions_is_not_taken_for_a_mask(tmp_path):
    run = program(tmp_path, {"pick.py": POSITIONS})
    assert not any(line == line_of(POSITIONS, "picked = x[mask_idx]")
                   for _, line, _ in found(run, "LT001"))


# ---------------------------------------------------------------- registries
REGISTRY = """
class Registry:
    def __init__(self):
        self.classes = {}

    def register(self, name):
        def wrap(cls):
            self.classes[name] = cls
            return cls
        return wrap

    def build(self, name, *args):
        return self.classes[name](*args)


HEADS = Registry()
"""

HEAD = """
import torch
from torch import nn
import torch.nn.functional as F
from registry import HEADS


@HEADS.register("box")
class BoxHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Linear(16, 5)

    def forward(self, features, labels):
        logits = self.cls(features)
        pos_mask = labels > 0
        return F.cross_entropy(logits[pos_mask], labels[pos_mask])
"""

REGISTRY_TRAIN = """
import torch
from registry import HEADS


def train(cfg):
    device = torch.device("cuda")
    head = HEADS.build(cfg.head).to(device)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(64, 16), batch_size=8)
    for epoch in range(3):
        for feats in loader:
            feats = feats.to(device)
            loss = head(feats, torch.ones(8, dtype=torch.long, device=device))
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_a_model_built_through_a_registry_runs_with_the_training_program(tmp_path):
    # the head's module is imported by nobody that the run shows (a package __init__
    # left out of it): it still runs on the GPU of the program that trains it
    run = program(tmp_path, {"registry.py": REGISTRY, "models/box_head.py": HEAD,
                             "train.py": REGISTRY_TRAIN})
    line = line_of(HEAD, "return F.cross_entropy(logits[pos_mask]")
    assert ("box_head.py", line, "LT001") in found(run, "LT001")


# ---------------------------------------------------------------- on request only
ON_REQUEST = """
import argparse
import torch
from torch import nn


def train(args, model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


def test(args, model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        correct += (model(x).argmax(1) == y).sum().item()
    print(correct)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--eval", type=bool, default=False)
    p.add_argument("--dp", action="store_true")
    p.add_argument("--epochs", type=int, default=10)
    args = p.parse_args()
    model = nn.Linear(8, 2).cuda()
    if args.dp:
        model = nn.DataParallel(model)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    if not args.eval:
        train(args, model, loader)
    else:
        test(args, model, loader)
"""


def test_per_batch_reads_of_code_run_only_under_an_opt_in_flag_are_quiet(tmp_path):
    run = program(tmp_path, {"main.py": ON_REQUEST})
    got = found(run)
    # test() runs only with --eval (off by default): its per-batch read is the user's
    # request, not every run's cost; its evaluation without no_grad costs memory and
    # time whenever it does run, and is still reported
    assert not any(line == line_of(ON_REQUEST, "correct += (model(x)") for _, line, _ in got)
    assert any(code == "LT013" for _, _, code in got)
    # (DataParallel under `--dp` still is: a training program's multi-GPU mode, whose
    # users are those DistributedDataParallel would serve)
    assert any(code == "LT015" for _, _, code in got)


def test_the_same_code_run_by_default_is_reported(tmp_path):
    src = ON_REQUEST.replace("if not args.eval:\n        train(args, model, loader)\n"
                             "    else:\n        test(args, model, loader)",
                             "train(args, model, loader)\n    test(args, model, loader)")
    assert src != ON_REQUEST
    run = program(tmp_path, {"main.py": src})
    got = found(run)
    assert ("main.py", line_of(src, "correct += (model(x)"), "LT001") in got
    assert any(code == "LT013" for _, _, code in got)


# ---------------------------------------------------------------- a training loop that evaluates
MODE_SWITCHED = """
import torch
from torch import nn

device = torch.device("cuda")
model = nn.Linear(8, 1).to(device)
optimizer = torch.optim.Adam(model.parameters())
loaders = {s: torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8)
           for s in ("train", "valid")}


def run_epoch(epoch, loader, partition="train"):
    total = 0.0
    for i, x in enumerate(loader):
        if partition == "train":
            model.train()
            optimizer.zero_grad()
        else:
            model.eval()
        x = x.to(device)
        loss = model(x).pow(2).mean()
        if partition == "train":
            loss.backward()
            optimizer.step()
        total += loss.detach()
    return total


for epoch in range(100):
    run_epoch(epoch, loaders["train"], partition="train")
    if epoch % 5 == 0:
        run_epoch(epoch, loaders["valid"], partition="valid")
"""


def test_a_training_loop_called_as_an_evaluation_pass_with_autograd_on(tmp_path):
    run = program(tmp_path, {"main.py": MODE_SWITCHED})
    loop = line_of(MODE_SWITCHED, "for i, x in enumerate(loader):")
    assert ("main.py", loop, "LT013") in found(run, "LT013")


def test_an_evaluation_pass_under_no_grad_is_quiet(tmp_path):
    src = MODE_SWITCHED.replace(
        '        run_epoch(epoch, loaders["valid"], partition="valid")',
        '        with torch.no_grad():\n            run_epoch(epoch, loaders["valid"], partition="valid")')
    assert src != MODE_SWITCHED
    assert not found(program(tmp_path, {"main.py": src}), "LT013")


# ---------------------------------------------------------------- a step function from a factory
STEP_FACTORY = """
import torch


def GAN_training_function(G, D, opt):
    def train(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(D(G(x)), y)
        loss.backward()
        opt.step()
        return {"loss": float(loss.item())}
    return train
"""

STEP_FACTORY_TRAIN = """
import torch
import train_fns


def main():
    device = "cuda"
    G = torch.nn.Linear(4, 4).to(device)
    D = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.Adam(list(G.parameters()) + list(D.parameters()))
    train = train_fns.GAN_training_function(G, D, opt)
    loader = torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8)
    for epoch in range(10):
        for x in loader:
            x = x.to(device)
            metrics = train(x, torch.ones(8, 1, device=device))
            print(metrics)


main()
"""


def test_a_step_function_made_by_a_factory_with_a_capital_in_its_name(tmp_path):
    # `GAN_training_function(...)` is a function, not a class: it hands back the step
    run = program(tmp_path, {"train_fns.py": STEP_FACTORY, "train.py": STEP_FACTORY_TRAIN})
    item = line_of(STEP_FACTORY, 'return {"loss": float(loss.item())}')
    assert ("train_fns.py", item, "LT001") in found(run, "LT001")


# ---------------------------------------------------------------- pinned loaders
PIN_BY_DEVICE = """
import torch
from torch.utils.data import DataLoader


def build_dataloader(data, batch_size=4, num_workers=1, device="cpu"):
    return DataLoader(data, batch_size=batch_size, num_workers=num_workers,
                      persistent_workers=True, pin_memory=(device != "cpu"))


class Trainer:
    def __init__(self, model, loader, device):
        self.model, self.loader, self.device = model, loader, device
        self.opt = torch.optim.Adam(model.parameters())

    def train_epoch(self):
        for batch in self.loader:
            batch = [b.to(self.device) for b in batch]
            loss = self.model(batch[0]).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


def main():
    device = "cuda"
    data = torch.utils.data.TensorDataset(torch.randn(64, 8))
    loader = build_dataloader(data, device=device)
    trainer = Trainer(torch.nn.Linear(8, 1).to(device), loader, device)
    for epoch in range(10):
        trainer.train_epoch()


main()
"""


def test_a_loader_pinned_exactly_when_the_device_is_not_the_cpu(tmp_path):
    run = program(tmp_path, {"train.py": PIN_BY_DEVICE})
    copy = line_of(PIN_BY_DEVICE, "batch = [b.to(self.device) for b in batch]")
    assert ("train.py", copy, "LT008") in found(run, "LT008")
    assert not found(run, "LT003")  # the loader does pin on a GPU run


YACS_DEFAULTS = """
from yacs.config import CfgNode as CN

_C = CN()
_C.MODEL = CN()
_C.MODEL.DEVICE = "cuda"
_C.DATA_LOADER = CN()
_C.DATA_LOADER.NUM_WORKERS = 8
_C.DATA_LOADER.PIN_MEMORY = True
cfg = _C
"""

YACS_BUILD = """
import torch
from torch.utils.data import DataLoader


def make_data_loader(cfg, dataset):
    return DataLoader(dataset, num_workers=cfg.DATA_LOADER.NUM_WORKERS, batch_size=32,
                      pin_memory=cfg.DATA_LOADER.PIN_MEMORY)
"""

YACS_TRAIN = """
import torch
from defaults import cfg
from build import make_data_loader


def do_train(cfg, model, data_loader, optimizer, device):
    for iteration, (images, targets) in enumerate(data_loader):
        images = images.to(device)
        targets = targets.to(device)
        loss = torch.nn.functional.cross_entropy(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    device = torch.device(cfg.MODEL.DEVICE)
    model = torch.nn.Linear(8, 2).to(device)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = make_data_loader(cfg, data)
    do_train(cfg, model, loader, torch.optim.SGD(model.parameters(), lr=0.1), device)


main()
"""


def test_a_loader_pinned_by_a_nested_yacs_default(tmp_path):
    run = program(tmp_path, {"defaults.py": YACS_DEFAULTS, "build.py": YACS_BUILD,
                             "train.py": YACS_TRAIN})
    got = found(run, "LT008")
    assert ("train.py", line_of(YACS_TRAIN, "images = images.to(device)"), "LT008") in got
    assert ("train.py", line_of(YACS_TRAIN, "targets = targets.to(device)"), "LT008") in got


def test_a_training_mode_chosen_by_a_flag_is_still_linted(tmp_path):
    # `if args.moco: train_moco(...) else: train_ins(...)`: two ways to train, each run
    # whenever the user picks it; only functions that train nothing are a request
    src = ON_REQUEST.replace("if not args.eval:\n        train(args, model, loader)\n"
                             "    else:\n        test(args, model, loader)",
                             "if args.eval:\n        train(args, model, loader)")
    src = src.replace("x, y = x.cuda(), y.cuda()\n            loss =",
                      "x, y = x.cuda(), y.cuda()\n            print(loss_of(x).item())\n"
                      "            loss =")
    src = src.replace("def test(args", "def loss_of(x):\n    return x.sum()\n\n\ndef test(args")
    run = program(tmp_path, {"main.py": src})
    assert ("main.py", line_of(src, "print(loss_of(x).item())"), "LT001") in found(run, "LT001")


# ---------------------------------------------------------------- evaluation over handed batches
HANDED = """
import torch
from torch import nn


def train(model, iterator, optimizer, criterion):
    model.train()
    for batch in iterator:
        optimizer.zero_grad()
        loss = criterion(model(batch.src), batch.trg)
        loss.backward()
        optimizer.step()


def evaluate(model, iterator, criterion):
    model.eval()
    epoch_loss = 0
    with torch.no_grad():
        for i, batch in enumerate(iterator):
            output = model(batch.src)
            loss = criterion(output, batch.trg)
            epoch_loss += loss.item()
            lengths = batch.lengths.cuda()
            longest = max(lengths)
    return epoch_loss / len(iterator)


def run(model, train_iter, valid_iter):
    model = model.cuda()
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss()
    for epoch in range(10):
        train(model, train_iter, optimizer, criterion)
        evaluate(model, valid_iter, criterion)
"""


def test_an_evaluation_function_over_the_batches_it_is_handed(tmp_path):
    # a torchtext iterator the program model cannot follow: `evaluate` switches the model
    # to eval mode and runs it on each batch: an evaluation loop
    run = program(tmp_path, {"seq2seq.py": HANDED})
    got = found(run, "LT001")
    assert ("seq2seq.py", line_of(HANDED, "epoch_loss += loss.item()"), "LT001") in got
    # Python's max() over a GPU tensor compares its elements on the host
    assert ("seq2seq.py", line_of(HANDED, "longest = max(lengths)"), "LT001") in got


# ---------------------------------------------------------------- the same host data every step
TRANSDUCTIVE = """
import torch
import torch.nn.functional as F
from utils import load_citation

device = torch.device("cuda")
adj, features, labels, idx_train, idx_val = load_citation("cora")
features = features.to(device)
adj = adj.to(device)
model = torch.nn.Linear(16, 7).to(device)
optimizer = torch.optim.Adam(model.parameters())


def train():
    model.train()
    optimizer.zero_grad()
    output = model(features)
    loss = F.nll_loss(output[idx_train], labels[idx_train].to(device))
    loss = loss + output[perm.to(device)].mean()
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(200):
    perm = load_citation(epoch)
    train()
"""


def test_the_same_host_tensor_uploaded_on_every_step(tmp_path):
    run = program(tmp_path, {"train.py": TRANSDUCTIVE, "utils.py": "def load_citation(n):\n"
                             "    return None, None, None, None, None\n"})
    got = found(run, "LT012")
    assert ("train.py", line_of(TRANSDUCTIVE, "labels[idx_train].to(device)"), "LT012") in got
    # `perm`, loaded anew on every epoch: a different tensor each time
    assert not any(line == line_of(TRANSDUCTIVE, "output[perm.to(device)]")
                   for _, line, _ in got)


# ---------------------------------------------------------------- look-alikes that stay quiet
RUN_LONG_SAMPLER = """
import torch
from torch.utils.data import DataLoader, BatchSampler, RandomSampler


class IterationBasedBatchSampler:
    def __init__(self, batch_sampler, num_iterations):
        self.batch_sampler, self.num_iterations = batch_sampler, num_iterations

    def __iter__(self):
        iteration = 0
        while iteration < self.num_iterations:
            for batch in self.batch_sampler:
                iteration += 1
                yield batch


def make_loader(dataset, max_iter=None):
    batch_sampler = BatchSampler(RandomSampler(dataset), batch_size=32, drop_last=False)
    if max_iter is not None:
        batch_sampler = IterationBasedBatchSampler(batch_sampler, max_iter)
    return DataLoader(dataset, num_workers=8, batch_sampler=batch_sampler, pin_memory=True)


def main():
    device = torch.device("cuda")
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(torch.randn(512, 8), max_iter=10000)
    for epoch in range(3):
        for x in loader:
            loss = model(x.to(device, non_blocking=True)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


main()
"""


def test_a_sampler_that_spans_the_run_needs_no_persistent_workers(tmp_path):
    assert not found(program(tmp_path, {"train.py": RUN_LONG_SAMPLER}), "LT004")


def test_the_same_loader_with_a_plain_sampler_is_reported(tmp_path):
    src = RUN_LONG_SAMPLER.replace(
        "        batch_sampler = IterationBasedBatchSampler(batch_sampler, max_iter)\n",
        "        print(max_iter)\n")
    assert src != RUN_LONG_SAMPLER
    assert found(program(tmp_path, {"train.py": src}), "LT004")


DETERMINISM_ON_REQUEST = """
import random
import torch
from torch import nn


def set_random_seed(seed, deterministic=False):
    random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def main():
    set_random_seed(0)
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(64, 3, 32, 32), batch_size=8)
    for epoch in range(3):
        for x in loader:
            loss = model(x.to(device)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


main()
"""


def test_benchmark_switched_off_only_for_reproducibility_on_request(tmp_path):
    assert not found(program(tmp_path, {"train.py": DETERMINISM_ON_REQUEST}), "LT005")
    src = DETERMINISM_ON_REQUEST.replace("    if deterministic:\n"
                                         "        torch.backends.cudnn.deterministic = True\n"
                                         "        torch.backends.cudnn.benchmark = False\n",
                                         "    torch.backends.cudnn.benchmark = False\n")
    assert src != DETERMINISM_ON_REQUEST
    assert found(program(tmp_path, {"train.py": src}), "LT005")


EDGE_CACHE = """
import torch
from torch import nn


class EGNN(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.device = device
        self._edges = {}

    def get_edges(self, n_nodes):
        if n_nodes in self._edges:
            return self._edges[n_nodes]
        else:
            rows = [i for i in range(n_nodes) for j in range(n_nodes)]
            edges = torch.LongTensor(rows).to(self.device)
            self._edges[n_nodes] = edges
            return edges

    def forward(self, h):
        edges = self.get_edges(h.shape[0])
        return self.lin(h)[edges].sum()
"""


def test_a_tensor_built_on_a_cache_miss_only(tmp_path):
    run = program(tmp_path, {"egnn.py": EDGE_CACHE, "train.py": MASKED_TRAIN.replace(
        "from mae import Autoencoder", "from egnn import EGNN as Autoencoder").replace(
        "Autoencoder()", 'Autoencoder("cuda")')})
    assert not found(run, "LT012")
    # without the store, the `else:` builds and uploads on every call
    uncached = EDGE_CACHE.replace("            self._edges[n_nodes] = edges\n", "")
    assert uncached != EDGE_CACHE
    run = program(tmp_path, {"egnn.py": uncached})
    assert ("egnn.py", line_of(uncached, "edges = torch.LongTensor(rows)"), "LT012") \
        in found(run, "LT012")


# ---------------------------------------------------------------- PyTorch 0.3-era code
LEGACY = """
import torch
from torch.autograd import Variable


def train(model, optimizer, loss_fn, dataloader, params):
    model.train()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        if params.cuda:
            train_batch, labels_batch = train_batch.cuda(async=True), \\
                                        labels_batch.cuda(async=True)
        train_batch, labels_batch = Variable(train_batch), Variable(labels_batch)
        output_batch = model(train_batch)
        loss = loss_fn(output_batch, labels_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.data[0])


def main(params):
    model = torch.nn.Linear(8, 2).cuda()
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=4,
                                         persistent_workers=True, pin_memory=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(params.epochs):
        train(model, optimizer, torch.nn.functional.cross_entropy, loader, params)
"""


def test_pre_37_code_that_passes_async_is_linted_with_a_warning(tmp_path):
    run = program(tmp_path, {"train.py": LEGACY})
    warnings = [d for d in run.all_diagnostics if d.kind == "warning"]
    assert len(warnings) == 1 and "async=" in warnings[0].message
    assert warnings[0].line == line_of(LEGACY, "train_batch.cuda(async=True)")
    got = found(run)
    # `async=True` was non_blocking: the pinned copy is asynchronous already
    assert not any(code == "LT008" for _, _, code in got)
    # `loss.data[0]` read the loss into a Python number, as `.item()` does today
    assert ("train.py", line_of(LEGACY, "print(loss.data[0])"), "LT001") in got


def test_a_real_syntax_error_is_still_one(tmp_path):
    broken = LEGACY.replace("model.train()", "model.train(")
    run = program(tmp_path, {"train.py": broken})
    assert [d.kind for d in run.all_diagnostics] == ["error"]
    assert "syntax error" in run.all_diagnostics[0].message and not run.findings


# ---------------------------------------------------------------- a mode flag, not a log gate
MODE_FLAG = """
import torch


class Trainer:
    def __init__(self, model):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters())
        self._do_log = False
        self.values = {}

    def train(self):
        self._do_log = True
        self.model.train()

    def val(self):
        self._do_log = False
        self.model.eval()

    def do_pass(self, x, it):
        loss = self.model(x.cuda()).mean()
        if self._do_log:
            self.values["loss"] = loss.item()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def main(loader):
    trainer = Trainer(torch.nn.Linear(8, 1))
    trainer.train()
    for it, x in enumerate(loader):
        trainer.do_pass(x, it)
"""


def test_a_flag_the_trainer_sets_for_a_whole_pass_is_not_a_log_gate(tmp_path):
    run = program(tmp_path, {"trainer.py": MODE_FLAG})
    item = line_of(MODE_FLAG, 'self.values["loss"] = loss.item()')
    assert ("trainer.py", item, "LT001") in found(run, "LT001")
    # `should_log = it % 100 == 0` would be a gate: quiet
    gated = MODE_FLAG.replace("        if self._do_log:", "        self._do_log = it % 100 == 0\n"
                              "        if self._do_log:")
    assert not found(program(tmp_path, {"trainer.py": gated}), "LT001")


# ---------------------------------------------------------------- incremental learners
LEARNER_BASE = """
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader


class BaseLearner:
    def __init__(self, device):
        self._network = None
        self._device = device

    def _eval_cnn(self, loader):
        self._network.eval()
        y_pred = []
        for _, (inputs, targets) in enumerate(loader):
            inputs = inputs.to(self._device)
            with torch.no_grad():
                outputs = self._network(inputs)
            y_pred.append(outputs.argmax(1).cpu().numpy())
        return np.concatenate(y_pred)

    def _extract_vectors(self, loader):
        self._network.eval()
        vectors = []
        for inputs, _ in loader:
            vectors.append(self._network.extract_vector(inputs.to(self._device)))
        return vectors

    def build_exemplars(self, datasets):
        for ds in datasets:
            idx_loader = DataLoader(ds, batch_size=64, shuffle=False, num_workers=4)
            vectors = self._extract_vectors(idx_loader)
            print(len(vectors))
"""

LEARNER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from base import BaseLearner


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def extract_vector(self, x):
        return self.fc(x)

    def forward(self, x):
        return self.fc(x)


class iCaRL(BaseLearner):
    def __init__(self):
        super().__init__(torch.device("cuda"))
        self._network = Net().to(self._device)

    def train_task(self, train_loader, test_loader, datasets):
        opt = torch.optim.SGD(self._network.parameters(), lr=0.1)
        for epoch in range(10):
            for inputs, targets in train_loader:
                loss = nn.functional.cross_entropy(self._network(inputs.to(self._device)),
                                                   targets.to(self._device))
                opt.zero_grad()
                loss.backward()
                opt.step()
            self._eval_cnn(test_loader)
        self.build_exemplars(datasets)


data = TensorDataset(torch.randn(64, 8), torch.randint(0, 4, (64,)))
learner = iCaRL()
learner.train_task(DataLoader(data, batch_size=8), DataLoader(data, batch_size=8), [data, data])
"""


def test_an_incremental_learner_evaluates_through_its_base_class(tmp_path):
    run = program(tmp_path, {"base.py": LEARNER_BASE, "icarl.py": LEARNER})
    got = found(run)
    # `self._network = None` in the base is a placeholder, not a host value
    assert ("base.py", line_of(LEARNER_BASE, "y_pred.append(outputs.argmax(1).cpu()"),
            "LT001") in got
    # features extracted in eval mode without no_grad
    assert ("base.py", line_of(LEARNER_BASE, "for inputs, _ in loader:"), "LT013") in got
    # a fresh loader per dataset, iterated once by the helper: nothing to keep alive
    loader = line_of(LEARNER_BASE, "idx_loader = DataLoader(")
    assert not any(line == loader and code == "LT004" for _, line, code in got)


MODEL_BY_NAME = """
import torch
from torch import optim
import register


class BPRLoss:
    def __init__(self, recmodel, config):
        self.model = recmodel
        self.opt = optim.Adam(recmodel.parameters(), lr=config["lr"])

    def stageOne(self, users, pos, neg):
        loss, reg_loss = self.model.bpr_loss(users, pos, neg)
        loss = loss + reg_loss * 1e-4
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.cpu().item()


def train(config, users, pos, neg):
    device = torch.device("cuda")
    Recmodel = register.MODELS[config["model"]](config).to(device)
    bpr = BPRLoss(Recmodel, config)
    for epoch in range(100):
        for i in range(0, len(users), 2048):
            bpr.stageOne(users[i:i + 2048], pos[i:i + 2048], neg[i:i + 2048])
"""


def test_a_model_method_of_a_class_chosen_by_name(tmp_path):
    run = program(tmp_path, {"procedure.py": MODEL_BY_NAME,
                             "register.py": "MODELS = {}\n"})
    assert ("procedure.py", line_of(MODEL_BY_NAME, "return loss.cpu().item()"), "LT001") \
        in found(run, "LT001")


PRELOADED = """
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class NBodyDataset(Dataset):
    def __init__(self, partition="train", dataset_name="nbody_small"):
        self.dataset_name = dataset_name
        self.data = torch.Tensor(np.load(f"loc_{partition}.npy")), torch.Tensor(
            np.load(f"vel_{partition}.npy"))

    def __getitem__(self, i):
        loc, vel = self.data
        loc, vel = loc[i], vel[i]
        if self.dataset_name == "nbody_small":
            frame_0, frame_T = 30, 40
        else:
            raise Exception("Wrong dataset partition %s" % self.dataset_name)
        return loc[frame_0], vel[frame_0], loc[frame_T]

    def __len__(self):
        return len(self.data[0])


def main():
    device = torch.device("cuda")
    model = torch.nn.Linear(3, 3).to(device)
    opt = torch.optim.Adam(model.parameters())
    loader = DataLoader(NBodyDataset(), batch_size=100, shuffle=True, pin_memory=True)
    for epoch in range(100):
        for loc, vel, target in loader:
            loc = loc.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            loss = (model(loc) - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


main()
"""


def test_items_indexed_from_preloaded_tensors_need_no_workers(tmp_path):
    # the `raise` on a bad configuration builds no item: nothing is loaded per item
    assert not found(program(tmp_path, {"main_nbody.py": PRELOADED}), "LT002")


# ---------------------------------------------------------------- the architecture the program builds
ZOO = """
import torch
from torch import nn


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


def get_encoder(channels):
    return nn.Sequential(conv_block(channels, 64), conv_block(64, 64), nn.Flatten())


class AttentionLSTM(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.cell = nn.LSTMCell(size, size)
        self.proj = nn.Linear(size, size)

    def forward(self, support, queries):
        attention = torch.matmul(queries, support.t()).softmax(dim=1)
        return self.proj(torch.mm(attention, support))


class MatchingNetwork(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.encoder = get_encoder(1)
        self.g = AttentionLSTM(size)
"""

PROTO_TRAIN = """
import torch
from zoo import get_encoder


def main():
    device = torch.device("cuda")
    model = get_encoder(1).to(device)
    opt = torch.optim.Adam(model.parameters())
    loader = torch.utils.data.DataLoader(torch.randn(64, 1, 28, 28), batch_size=8)
    for epoch in range(10):
        for x in loader:
            loss = model(x.to(device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


main()
"""


def test_tf32_follows_the_models_the_program_builds(tmp_path):
    # the zoo's attention model is never built by this program: a conv-only network,
    # whose cuDNN convolutions use TF32 already
    run = program(tmp_path, {"zoo.py": ZOO, "train.py": PROTO_TRAIN})
    assert not found(run, "LT011")
    matching = PROTO_TRAIN.replace("from zoo import get_encoder",
                                   "from zoo import MatchingNetwork").replace(
        "get_encoder(1)", "MatchingNetwork(64)")
    run = program(tmp_path, {"zoo.py": ZOO, "train.py": matching})
    assert found(run, "LT011")  # its attention multiplies matrices in fp32


SWITCHED_BY_CALLER = """
import torch
import torch.nn.functional as F


def compute_d_loss(nets, x_real, y_org, y_trg, use_adv_cls=False):
    out = nets.discriminator(x_real, y_org)
    loss = F.softplus(-out).mean()
    if use_adv_cls:
        out_de = nets.discriminator.classifier(x_real)
        loss = loss + F.cross_entropy(out_de[y_org != y_trg], y_org[y_org != y_trg])
    return loss


def train(nets, optimizer, loader, epochs, adv_cls_epoch=50):
    for epoch in range(epochs):
        use_adv_cls = epoch >= adv_cls_epoch
        for x_real, y_org, y_trg in loader:
            x_real, y_org, y_trg = x_real.cuda(), y_org.cuda(), y_trg.cuda()
            loss = compute_d_loss(nets, x_real, y_org, y_trg, use_adv_cls=use_adv_cls)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_switch_parameter_that_the_caller_turns_on(tmp_path):
    run = program(tmp_path, {"losses.py": SWITCHED_BY_CALLER})
    line = line_of(SWITCHED_BY_CALLER, "loss = loss + F.cross_entropy(out_de[y_org != y_trg]")
    assert ("losses.py", line, "LT001") in found(run, "LT001")
    # left at its default by every caller: an opt-in, quiet
    off = SWITCHED_BY_CALLER.replace(", use_adv_cls=use_adv_cls)", ")")
    assert off != SWITCHED_BY_CALLER
    assert not found(program(tmp_path, {"losses.py": off}), "LT001")


# ---------------------------------------------------------------- a module of constants as config
CONFIG_MODULE = """
debug = False
batch_size = 32
num_workers = 0
lr = 1e-3
"""

CLIP_MAIN = """
import torch
import config as CFG
from dataset import CLIPDataset


def build_loaders(frame):
    dataset = CLIPDataset(frame)
    return torch.utils.data.DataLoader(dataset, batch_size=CFG.batch_size,
                                       num_workers=CFG.num_workers, shuffle=True)


def main(frame):
    device = torch.device("cuda")
    model = torch.nn.Linear(8, 8).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=CFG.lr)
    loader = build_loaders(frame)
    for epoch in range(10):
        for batch in loader:
            loss = model(batch["image"].to(device)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""

CLIP_DATASET = """
import cv2
import torch


class CLIPDataset(torch.utils.data.Dataset):
    def __init__(self, frame):
        self.paths = list(frame["image"])

    def __getitem__(self, i):
        image = cv2.imread(self.paths[i])
        return {"image": torch.tensor(image).float()}

    def __len__(self):
        return len(self.paths)
"""


def test_loader_settings_read_from_a_module_of_constants(tmp_path):
    files = {"config.py": CONFIG_MODULE, "main.py": CLIP_MAIN, "dataset.py": CLIP_DATASET}
    got = found(program(tmp_path, files))
    loader = line_of(CLIP_MAIN, "return torch.utils.data.DataLoader(")
    # `CFG.num_workers` is 0 in config.py: the images are decoded in the training process
    assert ("main.py", loader, "LT002") in got
    # and no workers means none to keep alive between epochs
    assert ("main.py", loader, "LT004") not in got


FSDP_EVAL = """
import torch
import torch.distributed as dist


def run_classifier(model, dataloader, args, use_fsdp_eval=False):
    with torch.inference_mode():
        top1 = 0
        if use_fsdp_eval:
            signal = torch.zeros(1, device=args.device, dtype=torch.long)
            it = iter(dataloader)
            while True:
                batch = next(it, None)
                signal.fill_(0 if batch is None else 1)
                dist.broadcast(signal, src=0)
                if signal.item() == 0:
                    break
                top1 += (model(batch[0].to(args.device)).argmax(1) == batch[1].to(args.device)).sum()
        else:
            for images, target in dataloader:
                top1 += (model(images.to(args.device)).argmax(1) == target.to(args.device)).sum()
    return top1


def zero_shot_eval(model, data, args):
    use_fsdp_eval = getattr(args, "fsdp", False) and getattr(args, "distributed", False)
    return run_classifier(model, data["val"], args, use_fsdp_eval=use_fsdp_eval)
"""


def test_a_switch_passed_on_from_an_option_that_is_off(tmp_path):
    # `use_fsdp_eval` comes from `getattr(args, "fsdp", False)`, an option this program
    # does not even declare: the FSDP branch is a request, its per-batch read is quiet
    run = program(tmp_path, {"zero_shot.py": FSDP_EVAL})
    assert not any(line == line_of(FSDP_EVAL, "if signal.item() == 0:")
                   for _, line, _ in found(run, "LT001"))


OPTIONAL_LOSS = """
import torch


class SRModel:
    def __init__(self, opt, net):
        self.net_g = net.cuda()
        self.optimizer = torch.optim.Adam(self.net_g.parameters())
        if opt.get("pixel_opt"):
            self.cri_pix = torch.nn.L1Loss().cuda()
        else:
            self.cri_pix = None

    def optimize_parameters(self, lq, gt):
        self.optimizer.zero_grad()
        output = self.net_g(lq)
        l_total = 0
        if self.cri_pix:
            l_total += self.cri_pix(output, gt)
        l_total.backward()
        self.optimizer.step()


def train(model, loader):
    for epoch in range(10):
        for lq, gt in loader:
            model.optimize_parameters(lq.cuda(), gt.cuda())
"""


def test_an_attribute_that_may_be_none_is_tested_for_being_there(tmp_path):
    run = program(tmp_path, {"sr_model.py": OPTIONAL_LOSS})
    assert not any(line == line_of(OPTIONAL_LOSS, "        if self.cri_pix:")
                   for _, line, _ in found(run, "LT001"))


# ---------------------------------------------------------------- look-alikes found in review
LOOKALIKES = """
import contextlib
import torch
from torch import nn


def freeze_bn(model):
    model.eval()
    for name, module in model.named_modules():
        if isinstance(module, nn.BatchNorm2d):
            module.momentum = 0.0


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model.cuda(), loader
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.should_log = False

    def fit(self):
        for step, (x, y) in enumerate(self.loader):
            if step % 100 == 0:
                self.should_log = True
            else:
                self.should_log = False
            loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if self.should_log:
                print(f"step {step} loss {loss.item():.4f}")


def gather(model, loader, device):
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in loader:
        logits = model(batch["x"].to(device))
        mask_pos = batch["mask_pos"].to(device)
        picked = logits[torch.arange(logits.size(0), device=device), mask_pos]
        loss = picked.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def run_epoch(model, loader, opt, partition="train"):
    ctx = contextlib.nullcontext() if partition == "train" else torch.no_grad()
    with ctx:
        for x in loader:
            loss = model(x.cuda()).mean()
            if partition == "train":
                opt.zero_grad()
                loss.backward()
                opt.step()


def main(model, train_loader, val_loader, opt):
    for epoch in range(10):
        run_epoch(model, train_loader, opt)
        run_epoch(model, val_loader, opt, partition="valid")
"""


def test_review_look_alikes_stay_quiet(tmp_path):
    run = program(tmp_path, {"lookalikes.py": LOOKALIKES})
    got = found(run)
    # walking a model's modules in eval mode runs no model
    assert not any(code == "LT013" and line == line_of(LOOKALIKES, "for name, module in")
                   for _, line, code in got)
    # a flag set every step under `if step % 100 == 0:` is a log gate, not a mode
    assert not any(line == line_of(LOOKALIKES, 'print(f"step {step} loss {loss.item()')
                   for _, line, _ in got)
    # an integer gather beside `arange`, named `mask_pos`: positions, no boolean mask
    assert not any(line == line_of(LOOKALIKES, "picked = logits[torch.arange(")
                   for _, line, _ in got)
    # the evaluation pass runs under the `no_grad()` its context manager picks
    assert not any(code == "LT013" for _, _, code in got)


DIVERGED = """
import torch


def train(model, loader, opt):
    diverged = None
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = torch.nn.functional.mse_loss(model(x), y)
        diverged = torch.isnan(loss)
        if diverged:
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_local_tensor_once_none_is_still_read_on_the_host(tmp_path):
    run = program(tmp_path, {"train.py": DIVERGED})
    assert ("train.py", line_of(DIVERGED, "        if diverged:"), "LT001") in found(run, "LT001")


CLASS_ONLY_ZOO = """
import torch
import torch.nn as nn


class ConvEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)

    def forward(self, x):
        return self.conv(x)


class AttnModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)

    def forward(self, x):
        return self.q(x) @ self.q(x).t()
"""


def test_tf32_follows_the_models_built_from_a_module_of_classes_only(tmp_path):
    train = PROTO_TRAIN.replace("from zoo import get_encoder", "from models import ConvEncoder"
                                ).replace("get_encoder(1)", "ConvEncoder()")
    run = program(tmp_path, {"models.py": CLASS_ONLY_ZOO, "train.py": train})
    assert not found(run, "LT011")


EARLY_RETURN_CACHE = """
import torch
from torch import nn


class RelPos(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cache = {}

    def bias(self, n, device):
        if n in self.cache:
            return self.cache[n]
        b = torch.arange(n).float().to(device)
        self.cache[n] = b
        return b

    def forward(self, x):
        return self.lin(x) + self.bias(x.shape[-1], x.device).mean()
"""


def test_a_tensor_built_after_an_early_return_of_the_cached_one(tmp_path):
    run = program(tmp_path, {"relpos.py": EARLY_RETURN_CACHE, "train.py": MASKED_TRAIN.replace(
        "from mae import Autoencoder", "from relpos import RelPos as Autoencoder")})
    assert not found(run, "LT012")


POSITIONAL_SWITCH = """
import torch


def train_epoch(model, loader, opt, check_nan=False):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        if check_nan:
            assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()


def main(model, loader, opt):
    for epoch in range(10):
        train_epoch(model, loader, opt, True)
"""


def test_a_switch_turned_on_by_position(tmp_path):
    run = program(tmp_path, {"train.py": POSITIONAL_SWITCH})
    assert ("train.py", line_of(POSITIONAL_SWITCH, "assert torch.isfinite(loss)"), "LT001") \
        in found(run, "LT001")


def test_fix_leaves_pre_37_files_alone(tmp_path, pitstop_cli):
    legacy = LEGACY.replace("persistent_workers=True, ", "")
    (tmp_path / "train.py").write_text(legacy.lstrip("\n"))
    r = pitstop_cli("lint", str(tmp_path), "--fix", "--unsafe-fixes", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert "not fixed" in r.stderr
    assert (tmp_path / "train.py").read_text() == legacy.lstrip("\n")


CONDITIONAL_READS = """
import numpy as np
import torch
from torch import nn


def generate_binomial_mask(B, T, p=0.5):
    return torch.from_numpy(np.random.binomial(1, p, size=(B, T))).to(torch.bool)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        mask = generate_binomial_mask(x.size(0), x.size(1)).to(x.device)
        return self.fc(x) * mask.unsqueeze(-1)


def evaluate(model, loader):
    model.eval()
    hits = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            pred = model(x).argmax(-1)
            hits += sum([1 if pred[j] == y[j] else 0 for j in range(len(y))])
            kept = [p for p in model(x).max(-1).values if p > 0.5]
    return hits
"""


def test_conditions_inside_expressions_and_random_masks_from_numpy(tmp_path):
    train = MASKED_TRAIN.replace("from mae import Autoencoder",
                                 "from enc import Encoder as Autoencoder, evaluate").replace(
        "            opt.step()\n", "            opt.step()\n        evaluate(model, loader)\n")
    assert "evaluate(model, loader)" in train
    run = program(tmp_path, {"enc.py": CONDITIONAL_READS, "train.py": train})
    got = found(run)
    # `1 if pred[j] == y[j] else 0` and a comprehension's `if p > 0.5` read GPU booleans
    assert ("enc.py", line_of(CONDITIONAL_READS, "hits += sum([1 if pred[j]"), "LT001") in got
    assert ("enc.py", line_of(CONDITIONAL_READS, "kept = [p for p in"), "LT001") in got
    # a NumPy random draw made on the host and uploaded in every forward (torch's own
    # generator could draw it on the device)
    assert ("enc.py", line_of(CONDITIONAL_READS, "mask = generate_binomial_mask("), "LT012") \
        in got


RESUMED = """
import torch
from tqdm import tqdm


def train(opt, params, model, optimizer, training_generator, step=0):
    num_iter_per_epoch = len(training_generator)
    if params.num_gpus > 0:
        model = model.cuda()
    for epoch in range(opt.num_epochs):
        last_epoch = step // num_iter_per_epoch
        progress_bar = tqdm(training_generator)
        for iter, data in enumerate(progress_bar):
            if iter < step - last_epoch * num_iter_per_epoch:
                progress_bar.update()
                continue
            imgs = data["img"]
            if params.num_gpus == 1:
                imgs = imgs.cuda()
            optimizer.zero_grad()
            loss = model(imgs).mean()
            loss.backward()
            optimizer.step()
            print(loss.item())
            step += 1


def check(dtype, image):
    if dtype == torch.float16:
        return image.numpy().astype("float16")
    return image
"""


def test_a_resumed_run_skips_its_first_iterations_once(tmp_path):
    run = program(tmp_path, {"train.py": RESUMED})
    got = found(run)
    # `if iter < resume_at: continue` skips ahead once: the rest runs on every iteration
    assert ("train.py", line_of(RESUMED, "print(loss.item())"), "LT001") in got
    # `dtype == torch.float16` asks about a dtype and lowers no precision: fp32 training
    assert any(code == "LT006" for _, _, code in got)


def test_a_copy_under_a_setup_switch_runs_every_iteration(tmp_path):
    src = RESUMED.replace("def train(opt, params, model, optimizer, training_generator, step=0):",
                          "def train(opt, params, model, optimizer, training_generator, step=0):\n"
                          "    training_generator = torch.utils.data.DataLoader(\n"
                          "        training_generator, batch_size=8, num_workers=2,\n"
                          "        persistent_workers=True)")
    run = program(tmp_path, {"train.py": src})
    # the batch moved under `if params.num_gpus == 1:` goes to the GPU every step: the
    # loader should pin it
    assert any(code == "LT003" for _, _, code in found(run))


LOSS_DICT = """
import torch
from torch import nn


class LossComputer:
    def __init__(self, weight):
        self.weight = weight

    def compute(self, pred, target):
        losses = {}
        losses["l1"] = (pred - target).abs().mean()
        losses["total"] = losses["l1"] * self.weight
        return losses


def train(model, loader, opt):
    model = model.cuda()
    computer = LossComputer(2.0)
    for epoch in range(10):
        for x, y in loader:
            losses = computer.compute(model(x.cuda()), y.cuda())
            opt.zero_grad()
            losses["total"].backward()
            opt.step()
            print(losses["total"].item())
"""


def test_a_dict_of_losses_filled_item_by_item_in_a_helper(tmp_path):
    run = program(tmp_path, {"train.py": LOSS_DICT})
    assert ("train.py", line_of(LOSS_DICT, 'print(losses["total"].item())'), "LT001") \
        in found(run, "LT001")


PRECISION_FROM_CONFIG = """
import torch


class Recipe:
    def __init__(self, cfg, model):
        self._dtype = getattr(torch, cfg.dtype)
        self.model = model.to(device="cuda", dtype=self._dtype)
        self.opt = torch.optim.AdamW(self.model.parameters())

    def train(self, loader):
        for epoch in range(3):
            for batch in loader:
                loss = self.model(batch.cuda()).mean()
                if self._dtype == torch.bfloat16:
                    loss = loss.float()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
"""


def test_a_precision_chosen_by_the_config_is_not_called_fp32(tmp_path):
    # `self._dtype == torch.bfloat16` asks about a setting that a config file decides
    assert not found(program(tmp_path, {"recipe.py": PRECISION_FROM_CONFIG}), "LT006")
