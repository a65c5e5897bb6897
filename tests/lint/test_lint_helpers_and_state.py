"""Shapes of the fourth round (2026-12-01): per-batch work that hides in helpers and in
module state -- constants rebuilt on the CPU in forward(), tensors returned by a helper,
module buffers read with `.item()`, duck-typed trainer methods, validation loops that run
the model through a helper -- and the guards that make code rare (a cache refill, a
switch stored on `self` that defaults to False)."""

from __future__ import annotations

from lint_helpers import found, line_of, program

TRAIN = """
import torch
from torch.utils.data import DataLoader
from net import Net

device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True,
                    persistent_workers=True)
for epoch in range(3):
    for x in loader:
        x = x.to(device, non_blocking=True)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _net(body: str, extra: str = "") -> str:
    return (f"import numpy as np\nimport torch\nfrom torch import nn\n{extra}\n"
            f"class Net(nn.Module):\n{body}")


# ---------------------------------------------------------------- LT012 in forward()
def test_identity_built_from_a_numpy_literal_and_moved_in_forward(tmp_path):
    net = _net("""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 9)

    def forward(self, x):
        out = self.fc(x)
        eye = torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))
        eye = eye.view(1, 9).repeat(x.size(0), 1)
        if out.is_cuda:
            eye = eye.cuda()
        return out + eye
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT012",))
    assert found(run) == {("net.py", line_of(net, "eye = eye.cuda()"), "LT012")}
    assert "NumPy data" in run.findings[0].message


def test_numpy_uploads_the_gpu_could_avoid_and_those_it_cannot(tmp_path):
    """Class weights or host-computed metrics uploaded every step could live on the GPU
    (LT012); the batch the loader delivered, or an array a host routine filled in place,
    has to be copied (no LT012)."""
    src = """
import numpy as np
import torch
from torch.utils.data import DataLoader

def fill_path(p):
    p[0, 0] = 1

def fit(model, opt, loader, cls_weights):
    for batch in loader:
        x = torch.from_numpy(batch.data).cuda()
        weights = torch.from_numpy(cls_weights)
        weights = weights.cuda()
        out = model(x)
        hits = np.bincount(out.argmax(1).cpu().numpy(), minlength=4)
        hits_gpu = torch.from_numpy(hits).cuda()
        path = np.zeros((4, 4))
        fill_path(path)
        align = torch.from_numpy(path).cuda()
        loss = (out * weights).sum() + hits_gpu.sum() + align.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

model = torch.nn.Linear(4, 4).cuda()
fit(model, torch.optim.Adam(model.parameters()), DataLoader(list(range(8))), np.ones(4))
"""
    run = program(tmp_path, {"fit.py": src}, select=("LT012",))
    assert found(run) == {("fit.py", line_of(src, "weights = weights.cuda()"), "LT012"),
                          ("fit.py", line_of(src, "hits_gpu = "), "LT012")}


def test_an_indexed_factory_in_a_loss_helper_called_per_batch(tmp_path):
    """`torch.eye(d)[None, :, :]` then `.cuda()` in a regulariser that forward() calls."""
    net = _net("""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        t = self.fc(x).view(-1, 2, 2)
        return t.sum() + orthogonality(t)
""", extra="""
def orthogonality(t):
    d = t.size(1)
    ident = torch.eye(d)[None, :, :]
    if t.is_cuda:
        ident = ident.cuda()
    return (torch.bmm(t, t.transpose(2, 1)) - ident).norm()
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT012",))
    assert found(run) == {("net.py", line_of(net, "ident = ident.cuda()"), "LT012")}


def test_a_tensor_a_helper_method_returns_from_a_cpu_factory(tmp_path):
    """`noise.pick_steps(n).to(device)` where pick_steps only returns `torch.randint(...)`:
    the message names the helper and where it builds the tensor."""
    src = """
import torch
from torch.utils.data import DataLoader

class Schedule:
    def __init__(self, steps):
        self.steps = steps

    def pick_steps(self, n):
        return torch.randint(low=1, high=self.steps, size=(n,))

device = "cuda"
model = torch.nn.Linear(4, 4).to(device)
opt = torch.optim.Adam(model.parameters())
sched = Schedule(1000)
for images in DataLoader(list(range(8)), batch_size=2):
    images = images.to(device)
    t = sched.pick_steps(images.shape[0]).to(device)
    loss = model(images * t).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    run = program(tmp_path, {"diffuse.py": src}, select=("LT012",))
    assert found(run) == {("diffuse.py", line_of(src, "t = sched"), "LT012")}
    assert "`pick_steps` (" in run.findings[0].message


def test_batches_filled_from_host_lists_are_not_constants(tmp_path):
    """`seq = torch.zeros(b, n).long()` filled row by row from Python lists, then
    `.cuda()`: the batch is built on the host (not a factory that device= would fix). The
    same buffer filled from GPU results should have been made on the GPU."""
    src = """
import torch

def batchify(rows, n):
    seq = torch.zeros(len(rows), n).long()
    for i, r in enumerate(rows):
        seq[i, :len(r)] = torch.LongTensor(r)
    return seq.cuda()

def decode(scores):
    best = torch.LongTensor(scores.size(0), scores.size(1))
    for t in range(scores.size(0)):
        best[t] = scores[t].argmax(-1)
    return best.cuda()

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [[1, 2], [3]]
for epoch in range(5):
    for b in range(10):
        x = batchify(data, 4)
        out = model(x.float())
        path = decode(out)
        loss = out.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    run = program(tmp_path, {"tagger.py": src}, select=("LT012",))
    assert found(run) == {("tagger.py", line_of(src, "return best.cuda()"), "LT012")}


# ---------------------------------------------------------------- guards that make code rare
def test_a_cache_refilled_when_the_shape_changes_is_not_per_batch(tmp_path):
    net = _net("""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.grid = torch.zeros(1)

    def forward(self, x):
        y = self.conv(x)
        if self.grid.shape[2:4] != y.shape[2:4]:
            self.grid = make_grid(y.shape[2], y.shape[3]).to(y.device)
        return y + self.grid
""", extra="""
def make_grid(ny, nx):
    yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx))
    return torch.stack((xv, yv), 2).float()
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT012",))
    assert found(run) == set()


VARIATIONAL = """
    def __init__(self, p=0.5, variational=False):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.p = p
        self.variational = variational

    def forward(self, x):
        if self.variational:
            mask = torch.ones(x.size(0), 1)
            if x.is_cuda:
                mask = mask.cuda()
            x = x * mask
        return self.fc(x)
"""


def test_a_switch_stored_on_self_that_defaults_to_false_is_rare(tmp_path):
    run = program(tmp_path, {"train.py": TRAIN, "net.py": _net(VARIATIONAL)}, select=("LT012",))
    assert found(run) == set()


def test_the_switch_counts_once_the_module_turns_it_on(tmp_path):
    """A call in the module that passes `variational=True` builds it that way."""
    net = _net(VARIATIONAL) + "\n\ndef build():\n    return Net(variational=True)\n"
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT012",))
    assert found(run) == {("net.py", line_of(net, "mask = mask.cuda()"), "LT012")}


# ---------------------------------------------------------------- batches and loops
def test_batches_drawn_with_next_in_a_counted_loop_keep_their_loader(tmp_path):
    """`x, y = next(it)` in `for step in range(iters)`, the iterator rebuilt from a
    helper's pinned loader (not the unpinned one this module builds for evaluation), and
    the labels shifted on the host before the copy."""
    files = {
        "utils.py": """
from torch.utils.data import DataLoader

def get_loader(ds, bs, cuda=False):
    return DataLoader(ds, batch_size=bs, shuffle=True,
                      **({"num_workers": 0, "pin_memory": True} if cuda else {}))
""",
        "train.py": """
import torch
from torch.utils.data import DataLoader
from utils import get_loader

def evaluate(model, ds):
    return [model(x) for x in DataLoader(ds, batch_size=64)]

def train(model, ds, iters, per_task=False):
    device = model.device
    left = 1
    for step in range(iters):
        left -= 1
        if left == 0:
            it = iter(get_loader(ds, 32, cuda=True))
            left = len(it)
        x, y = next(it)
        y = y - 10 if per_task else y
        x, y = x.to(device), y.to(device)
        loss = model(x, y)
        model.optimizer.zero_grad()
        loss.backward()
        model.optimizer.step()
""",
    }
    run = program(tmp_path, files, select=("LT008",))
    assert found(run) == {("train.py", line_of(files["train.py"], "x, y = x.to"), "LT008")}
    assert {f.message.split("`")[1] for f in run.findings} <= {"x.to(device)", "y.to(device)"}


LEARNER = """
import torch
import torch.nn.functional as F
from torch import nn

class Learner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        self.buffers_on = False

    def update_on_batch(self, x, y=None):
        out = self.fc(x)
        if y is not None:
            pred_loss = F.cross_entropy(out, y)
        else:
            pred_loss = None
        loss = out.sum() if pred_loss is None else pred_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        for n, p in self.named_parameters():
            n = n.replace(".", "__")
            print("{}_grad".format(n))
        return {"loss": loss.item(),
                "pred": pred_loss.item() if pred_loss is not None else 0}
"""

DRIVER = """
import torch
from torch.utils.data import DataLoader

def run_tasks(model, tasks):
    for task in tasks:
        for x, y in DataLoader(task, batch_size=8):
            x, y = x.cuda(), y.cuda()
            stats = model.update_on_batch(x, y)
"""


def test_a_distinctive_method_of_an_unknown_object_is_the_one_class_that_defines_it(tmp_path):
    """`model.update_on_batch(x, y)` on a parameter whose callers are not linted: the
    program's one class with that method trains, and its `.item()` calls run per batch;
    a name from `named_parameters()` formatted into a string is no tensor."""
    run = program(tmp_path, {"learner.py": LEARNER, "driver.py": DRIVER}, select=("LT001",))
    assert found(run) == {("learner.py", line_of(LEARNER, "loss.item()"), "LT001"),
                          ("learner.py", line_of(LEARNER, "pred_loss.item()"), "LT001")}


def test_a_module_buffer_read_with_item_in_forward(tmp_path):
    net = _net("""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("params", torch.tensor([16.0, 0.07]))

    def forward(self, x):
        k = int(self.params[0].item())
        return self.fc(x) * k
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT001",))
    assert found(run) == {("net.py", line_of(net, ".item()"), "LT001")}


VALIDATE = """
import torch
from torch.utils.data import DataLoader

class Experiment:
    def __init__(self, model):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters())

    def _one_batch(self, x):
        x = x.float().cuda()
        return self.model(x)

    def vali(self, loader):
        self.model.eval()
        losses = []
        for x in loader:
            pred = self._one_batch(x)
            losses.append(pred.mean())
        self.model.train()
        return losses

    def train(self, loader, val_loader):
        for epoch in range(10):
            for x in loader:
                loss = self._one_batch(x).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            self.vali(val_loader)
"""


def test_a_validation_loop_that_runs_the_model_through_a_helper(tmp_path):
    run = program(tmp_path, {"exp.py": VALIDATE}, select=("LT013",))
    assert found(run) == {("exp.py", line_of(VALIDATE, "for x in loader:"), "LT013")}


def test_no_finding_when_the_helper_turns_autograd_off_itself(tmp_path):
    src = VALIDATE.replace("    def _one_batch(self, x):", "    @torch.no_grad()\n"
                           "    def _one_batch(self, x):")
    assert found(program(tmp_path, {"exp.py": src}, select=("LT013",))) == set()


def test_a_models_own_test_loop_over_its_methods(tmp_path):
    """`model.test_loop(val_loader)` after `model.eval()`: the module's loop calls its own
    methods, which run it."""
    files = {
        "meta.py": """
import torch
from torch import nn

class Meta(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature = nn.Linear(4, 4)

    def correct(self, x):
        return (self.feature(x).argmax(1) == 0).sum()

    def test_loop(self, test_loader):
        hits = []
        for i, (x, _) in enumerate(test_loader):
            hits.append(self.correct(x))
        return hits
""",
        "train.py": """
import torch
from torch.utils.data import DataLoader
from meta import Meta

model = Meta().cuda()
opt = torch.optim.Adam(model.parameters())
base = DataLoader(list(range(8)), batch_size=2)
val_loader = DataLoader(list(range(8)), batch_size=2)
for epoch in range(5):
    model.train()
    for x, y in base:
        loss = model.feature(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.test_loop(val_loader)
""",
    }
    assert found(program(tmp_path, files, select=("LT013",))) == {("meta.py", line_of(files["meta.py"], "for i, (x, _)"), "LT013")}


def test_dataparallel_in_a_model_factory_whose_class_validates_in_a_loop(tmp_path):
    """A model class built by name (a registry the run does not show) that has its own
    validation loop still belongs to the linted training run (LT015)."""
    files = {
        "base_model.py": """
from torch.nn import DataParallel

class BaseModel:
    def wrap(self, net):
        if self.opt["num_gpu"] > 1:
            net = DataParallel(net)
        return net
""",
        "sr_model.py": """
import torch
from base_model import BaseModel

class SRModel(BaseModel):
    def validation(self, loader):
        self.net.eval()
        for batch in loader:
            self.out = self.net(batch.cuda())
""",
        "train.py": """
import torch
import importlib

model = importlib.import_module("models").build(opt)
loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=2,
                                     persistent_workers=True)
for epoch in range(3):
    for batch in loader:
        model.feed(batch)
        loss = model.net(batch.cuda()).sum()
        loss.backward()
        model.optimizer.step()
""",
    }
    assert found(program(tmp_path, files, select=("LT015",))) == {("base_model.py", line_of(files["base_model.py"], "net = DataParallel"), "LT015")}


# ---------------------------------------------------------------- LT016 shapes
def test_batchnorm_on_by_default_in_a_conditional_expression(tmp_path):
    """`nn.BatchNorm2d(c) if use_bn else nn.Sequential()` with `use_bn=True`: built unless
    asked otherwise (no automatic fix: the other path has no BatchNorm)."""
    net = _net("""
    def __init__(self, c=8, use_bn=True):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(c, c, 3, 1, 1),
            nn.BatchNorm2d(c) if use_bn else nn.Sequential(),
            nn.ReLU(),
        )

    def forward(self, x):
        return self.enc(x)
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT016",))
    assert found(run) == {("net.py", line_of(net, "nn.Conv2d(c, c, 3, 1, 1)"), "LT016")}
    assert run.findings[0].fix is None
    off = net.replace("use_bn=True", "use_bn=False")
    assert found(program(tmp_path / "off", {"train.py": TRAIN, "net.py": off},
                         select=("LT016",))) == set()


def test_a_conv_chosen_on_branches_and_normalised_in_forward(tmp_path):
    """`self.conv` assigned on either branch of the shapes, then `x = self.conv(x)` and
    `self.bn(x)` inside an `if` of forward(): every branch's conv feeds the BatchNorm."""
    net = _net("""
    def __init__(self, s, t, use_relu=True):
        super().__init__()
        self.use_relu = use_relu
        if s == 2 * t:
            self.conv = nn.Conv2d(8, 8, kernel_size=3, stride=2, padding=1)
        else:
            self.conv = nn.Conv2d(8, 8, kernel_size=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.conv(x)
        if self.use_relu:
            return self.relu(self.bn(x))
        return self.bn(x)
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT016",))
    assert found(run) == {("net.py", line_of(net, "stride=2"), "LT016"),
                          ("net.py", line_of(net, "kernel_size=1)"), "LT016")}


def test_a_list_of_the_blocks_layers_made_into_a_sequential(tmp_path):
    """`self.layers = [self.C, self.BN, self.relu]` then `nn.Sequential(*self.layers)`."""
    net = _net("""
    def __init__(self, cin=3, cout=8):
        super().__init__()
        self.C = nn.Conv2d(cin, cout, 3, padding=1)
        self.BN = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.layers = [self.C, self.BN, self.relu]
        self.trunk = nn.Sequential(*self.layers)

    def forward(self, x):
        return self.trunk(x)
""")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT016",))
    assert found(run) == {("net.py", line_of(net, "self.C = nn.Conv2d"), "LT016")}


# ---------------------------------------------------------------- opt-in switches, loaders
OPTIONS = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--enable_tensorboard", action="store_true")
parser.add_argument("--visdom_epoch", type=int, default=0)
args = parser.parse_args()
config = {k: getattr(args, k) for k in vars(args)}

class Solver:
    def __init__(self, model, args):
        self.model = model
        self.visdom_epoch = args.visdom_epoch
        self.opt = torch.optim.Adam(model.parameters())

    def run(self, loader):
        for epoch in range(10):
            for x in loader:
                loss = self.model(x.cuda()).sum()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                if config["enable_tensorboard"]:
                    print(loss.item())
                if self.visdom_epoch:
                    print(loss.item() * 2)

Solver(torch.nn.Linear(4, 4).cuda(), args).run(DataLoader(list(range(8)), batch_size=2))
"""


def test_switches_read_from_a_config_dict_or_copied_onto_self_are_opt_in(tmp_path):
    """`if config["enable_tensorboard"]:` (store_true) and `if self.visdom_epoch:` with
    `self.visdom_epoch = args.visdom_epoch` (default 0): off unless asked."""
    run = program(tmp_path, {"solve.py": OPTIONS}, select=("LT001",))
    assert found(run) == set()
    on = OPTIONS.replace('action="store_true"', 'default=True').replace("default=0", "default=5")
    run = program(tmp_path / "on", {"solve.py": on}, select=("LT001",))
    assert found(run) == {("solve.py", line_of(on, "print(loss.item())"), "LT001"),
                          ("solve.py", line_of(on, "print(loss.item() * 2)"), "LT001")}


def test_a_dataset_factory_method_that_returns_a_tensor_dataset(tmp_path):
    """`processor.make_dataset(features)` returns a TensorDataset of tokenised features:
    items are slices of tensors in memory, workers would only copy them (no LT002)."""
    files = {
        "proc.py": """
import torch
from torch.utils.data import TensorDataset

class Processor:
    def make_dataset(self, features):
        ids = torch.tensor([f[0] for f in features], dtype=torch.long)
        labels = torch.tensor([f[1] for f in features], dtype=torch.long)
        return TensorDataset(ids, labels)
""",
        "run.py": """
import torch
from torch.utils.data import DataLoader
from proc import Processor

model = torch.nn.Embedding(100, 4).cuda()
opt = torch.optim.Adam(model.parameters())
processor = Processor()
train_ds = processor.make_dataset([(1, 0), (2, 1)])
for epoch in range(3):
    for ids, labels in DataLoader(train_ds, batch_size=2):
        loss = model(ids.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    }
    assert found(program(tmp_path, files, select=("LT002",))) == set()



def test_a_cache_keyed_like_its_test_is_filled_once(tmp_path):
    """`if key not in basis: basis[key] = torch.from_numpy(mel).to(y.device)` runs once per
    key; a cache filled under another key than the one tested is refilled every call."""
    src = """
import numpy as np
import torch
from torch.utils.data import DataLoader

basis = {}

def spectrogram(y, n):
    key = str(n) + str(y.device)
    if key not in basis:
        basis[key] = torch.from_numpy(np.eye(n)).to(y.device)
    if n not in basis:
        basis[str(n) + "_"] = torch.from_numpy(np.eye(n)).to(y.device)
    return y @ basis[key]

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(3):
    for y in DataLoader(list(range(8))):
        loss = model(spectrogram(y.cuda(), 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    run = program(tmp_path, {"mel.py": src}, select=("LT012",))
    assert found(run) == {("mel.py", line_of(src, 'basis[str(n) + "_"]'), "LT012")}


def test_boolean_masks_index_tensors_of_unknown_device_and_update_in_place(tmp_path):
    """`sim[~mask]` with `mask` a GPU bool tensor: `sim` (a parameter) must be on the GPU
    too, so the selection syncs; `l[(u > 0) * (l == u)] -= 1` reads the selection first."""
    src = """
import torch
from torch.utils.data import DataLoader

def contrastive(sim, device):
    mask = torch.eye(sim.shape[0], dtype=torch.bool).to(device)
    return sim[~mask].mean()

def project(l, u):
    l[(u > 0) * (l == u)] -= 1
    return l

device = torch.device("cuda")
model = torch.nn.Linear(4, 4).to(device)
opt = torch.optim.Adam(model.parameters())
for x in DataLoader(list(range(8))):
    out = model(x.to(device))
    b = out.floor().long()
    idx = project(b, out.ceil().long())
    loss = contrastive(out @ out.T, device) + idx.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    run = program(tmp_path, {"nce.py": src}, select=("LT001",))
    assert found(run) == {("nce.py", line_of(src, "sim[~mask]"), "LT001"),
                          ("nce.py", line_of(src, "-= 1"), "LT001")}


def test_a_model_built_by_a_factory_runs_the_override_of_its_base_method(tmp_path):
    """`model = define_model(opt)` (a factory that imports its class by name) then
    `model.feed_data(batch)`: of the base's `feed_data` and its one override, the override
    runs -- and copies the pinned batch without non_blocking (LT008)."""
    files = {
        "models/base.py": """
class ModelBase:
    def __init__(self, opt):
        self.device = "cuda"

    def feed_data(self, data):
        pass
""",
        "models/plain.py": """
import torch
from models.base import ModelBase

class ModelPlain(ModelBase):
    def __init__(self, opt):
        super().__init__(opt)
        self.net = torch.nn.Conv2d(3, 3, 3).to(self.device)
        self.opt = torch.optim.Adam(self.net.parameters())

    def feed_data(self, data):
        self.L = data["L"].to(self.device)

    def optimize_parameters(self):
        loss = self.net(self.L).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
""",
        "train.py": """
import importlib
from torch.utils.data import DataLoader

def define_model(opt):
    cls = getattr(importlib.import_module("models." + opt["model"]), opt["class"])
    return cls(opt)

model = define_model({"model": "plain", "class": "ModelPlain"})
loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True,
                    persistent_workers=True)
for epoch in range(100):
    for batch in loader:
        model.feed_data(batch)
        model.optimize_parameters()
""",
    }
    run = program(tmp_path, files, select=("LT008",))
    assert found(run) == {("plain.py", line_of(files["models/plain.py"], 'data["L"]'), "LT008")}


# ---------------------------------------------------------------- review of the round
LOOP = """
import numpy as np
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.Adam(model.parameters())
"""


def test_environment_observations_and_per_batch_weights_must_be_uploaded(tmp_path):
    """An env's observation (`obs, r, done, info = env.step(a.cpu().numpy())`) and the
    per-batch `sample_weights` a replay buffer hands back are data, not tables."""
    src = LOOP + """
def train_step(x, sample_weights):
    w = torch.from_numpy(sample_weights).cuda()
    loss = (model(x) * w).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss

obs = env.reset()
for t in range(1000):
    obs_t = torch.from_numpy(obs).float().cuda()
    action = model(obs_t)
    obs, r, done, info = env.step(action.detach().cpu().numpy())
    train_step(obs_t, replay.importance_weights(4))
"""
    assert found(program(tmp_path, {"rl.py": src}, select=("LT012",))) == set()


def test_a_running_average_updated_when_present_is_per_step(tmp_path):
    """`if self.smooth is not None: self.smooth = 0.9 * self.smooth + loss.item()` runs
    every step: it is no cache refill."""
    src = LOOP + """
class Meter:
    def __init__(self):
        self.smooth = None

    def update(self, loss):
        if self.smooth is not None:
            self.smooth = 0.9 * self.smooth + 0.1 * loss.item()
        else:
            self.smooth = loss.item()

meter = Meter()
for x in DataLoader(list(range(8))):
    loss = model(x.cuda()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    meter.update(loss)
"""
    run = program(tmp_path, {"avg.py": src}, select=("LT001",))
    assert ("avg.py", line_of(src, "0.9 * self.smooth"), "LT001") in found(run)


def test_a_no_grad_metric_helper_does_not_cover_the_model_call(tmp_path):
    """The loop runs `model(x)` with autograd on; only `accuracy()` (which the loop also
    calls) turns it off inside: still LT013."""
    src = LOOP + """
def accuracy(logits, y):
    with torch.no_grad():
        return (logits.argmax(1) == y).float().mean()

def evaluate(loader):
    model.eval()
    accs = []
    for x, y in loader:
        logits = model(x.cuda())
        accs.append(accuracy(logits, y.cuda()))
    return accs

for epoch in range(5):
    for x, y in DataLoader(list(range(8))):
        loss = model(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    evaluate(DataLoader(list(range(8))))
"""
    run = program(tmp_path, {"ev.py": src}, select=("LT013",))
    assert found(run) == {("ev.py", line_of(src, "for x, y in loader:"), "LT013")}


VAE = """
import torch
from torch import nn

class VAE(nn.Module):
    def __init__(self, d, variational=False):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.variational = variational

    def forward(self, x):
        if self.variational:
            print(self.fc(x).mean().item())
        return self.fc(x)
"""


def test_a_switch_turned_on_in_another_module_by_keyword_position_or_kwargs(tmp_path):
    """`VAE(16, variational=True)` in train.py turns the switch on, as `VAE(16, True)` and
    `VAE(16, **cfg)` may: the finding is the same whether the code is in one file or two."""
    train = """
import torch
from torch.utils.data import DataLoader
from vae import VAE

model = VAE(16, ARGS).cuda()
opt = torch.optim.Adam(model.parameters())
for x in DataLoader(list(range(8))):
    loss = model(x.cuda()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    line = line_of(VAE, ".item()")
    for i, args in enumerate(("variational=True", "True", "**cfg")):
        files = {"vae.py": VAE, "train.py": train.replace("ARGS", args)}
        run = program(tmp_path / str(i), files, select=("LT001",))
        assert found(run) == {("vae.py", line, "LT001")}, args
    off = {"vae.py": VAE, "train.py": train.replace("ARGS", "variational=False")}
    assert found(program(tmp_path / "off", off, select=("LT001",))) == set()


def test_a_library_object_is_not_duck_typed_onto_a_program_class(tmp_path):
    """`writer = SummaryWriter(...)`; `writer.add_scalars(...)` is the library's, not the
    unused `CsvLog.add_scalars` of utils.py (whose `.item()` runs nowhere)."""
    files = {"train.py": LOOP + """
from torch.utils.tensorboard import SummaryWriter

writer = SummaryWriter("runs")
for x in DataLoader(list(range(8))):
    loss = model(x.cuda()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    writer.add_scalars("loss", {"l": loss}, 0)
""", "utils.py": """
class CsvLog:
    def add_scalars(self, tag, values, step):
        for k, v in values.items():
            print(v.item())
"""}
    run = program(tmp_path, files, select=("LT001",))
    assert {f for f in found(run) if f[0] == "utils.py"} == set()


def test_conv_bn_pairs_of_attributes_only_where_they_make_the_sequential(tmp_path):
    """`nn.Sequential(self.conv, self.bn)` pairs them; `for m in [self.conv, self.bn]:` is
    no layer order; a BatchNorm applied under `if self.use_bn:` gets no automatic fix."""
    net = _net("""
    def __init__(self, use_bn=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 8, 1)
        self.norm = nn.BatchNorm2d(8)
        self.trunk = nn.Sequential(self.conv, self.bn)
        self.use_bn = use_bn
        self.c2 = nn.Conv2d(8, 8, 3)
        self.b2 = nn.BatchNorm2d(8)

    def freeze(self):
        for m in [self.head, self.norm]:
            m.eval()

    def forward(self, x):
        x = self.c2(self.trunk(x))
        if self.use_bn:
            x = self.b2(x)
        return self.head(self.norm(x))
""", extra="")
    run = program(tmp_path, {"train.py": TRAIN, "net.py": net}, select=("LT016",))
    assert found(run) == {("net.py", line_of(net, "self.conv = nn.Conv2d"), "LT016"),
                          ("net.py", line_of(net, "self.c2 = nn.Conv2d"), "LT016")}
    c2 = next(f for f in run.findings if f.line == line_of(net, "self.c2 = nn.Conv2d"))
    assert c2.fix is None


def test_a_dataset_factory_returning_a_dotted_tensor_dataset(tmp_path):
    files = {
        "data.py": """
import torch
import torch.utils.data as tud

def make_dataset(n):
    return tud.TensorDataset(torch.zeros(n, 4), torch.zeros(n))
""",
        "train.py": LOOP + """
from data import make_dataset

for epoch in range(3):
    for x, y in DataLoader(make_dataset(8), batch_size=2):
        loss = model(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    }
    assert found(program(tmp_path, files, select=("LT002",))) == set()


def test_a_batch_buffer_filled_with_the_rows_as_they_are(tmp_path):
    """`ids[i, :len(s)] = s` for each sequence of the batch: a batch built on the host."""
    src = LOOP + """
def collate(seqs):
    ids = torch.zeros(len(seqs), 8, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
    return ids

for epoch in range(3):
    for seqs in DataLoader(list(range(8))):
        ids = collate(seqs).cuda()
        loss = model(ids.float()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    assert found(program(tmp_path, {"c.py": src}, select=("LT012",))) == set()


def test_a_gpu_value_on_a_branch_that_leaves_the_iteration_does_not_reach_below(tmp_path):
    src = LOOP + """
for step, x in enumerate(DataLoader(list(range(8)))):
    loss = model(x.cuda()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        status = loss.detach()
        print(status.item())
        continue
    else:
        status = "running"
    print(f"step {step}: {status}")
"""
    run = program(tmp_path, {"b.py": src}, select=("LT001",))
    assert ("b.py", line_of(src, 'print(f"step'), "LT001") not in found(run)
