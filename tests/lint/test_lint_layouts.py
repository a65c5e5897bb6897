"""Programs laid out the way research repositories are: entry scripts in ``tools/`` that
put a sibling ``lib/`` folder on ``sys.path`` and import its modules by bare names, and
loss modules that fill Python lists in a loop and return them."""

from __future__ import annotations

from lint_helpers import found, program

ENTRY = """
import _init_paths
import torch
from torch.utils.data import DataLoader
from engine.loop import fit
from data.sets import Frames

model = torch.nn.Conv2d(3, 8, 3).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
frames = DataLoader(Frames(), batch_size=8, num_workers=4, pin_memory=True,
                    persistent_workers=True)
for epoch in range(10):
    fit(model, frames, opt)
"""

PATHS = """
import os.path as osp
import sys
sys.path.insert(0, osp.join(osp.dirname(__file__), "..", "src"))
"""

LOOP = """
def fit(model, frames, opt):
    for step, (clip, mask) in enumerate(frames):
        clip = clip.cuda()
        mask = mask.cuda()
        loss = model(clip).mul(mask).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_bare_imports_of_a_sibling_folder_put_on_the_path(tmp_path):
    """`from engine.loop import fit` in tools/run.py means src/engine/loop.py: the loop
    there copies batches of the pinned loader built in the script."""
    files = {"tools/run.py": ENTRY, "tools/_init_paths.py": PATHS, "src/engine/loop.py": LOOP,
             "src/data/sets.py": "class Frames:\n    pass\n"}
    got = found(program(tmp_path, files, select=("LT008",)))
    assert got == {("loop.py", 3, "LT008"), ("loop.py", 4, "LT008")}


def test_a_package_beside_the_script_wins_over_a_folder_on_the_path(tmp_path):
    """`from engine.loop import fit` with an `engine/` package beside the script: Python
    imports that one, not src/engine/loop.py (whose loop then is not this program's)."""
    files = {"tools/run.py": ENTRY, "tools/_init_paths.py": PATHS, "src/engine/loop.py": LOOP,
             "tools/engine/__init__.py": "", "tools/engine/loop.py": "def fit(*a):\n    pass\n",
             "src/data/sets.py": "class Frames:\n    pass\n"}
    run = program(tmp_path, files, select=("LT008",),
                  only=["tools/run.py", "src/engine/loop.py", "tools/engine/loop.py"])
    assert found(run) == set()


def test_a_name_found_in_two_folders_on_the_path_is_not_guessed(tmp_path):
    files = {"tools/run.py": ENTRY, "tools/_init_paths.py": PATHS, "src/engine/loop.py": LOOP,
             "lib/engine/loop.py": LOOP.replace("clip.cuda()", "clip.cuda(non_blocking=True)"),
             "src/data/sets.py": "class Frames:\n    pass\n"}
    assert found(program(tmp_path, files, select=("LT008",))) == set()


def test_a_package_is_not_a_folder_on_the_path(tmp_path):
    """`from model import Loss` in a script that extends the path: `utils/model.py` (utils
    is a package, imported by its own name) is not what it means; `lib/model.py` (lib is
    a plain folder, the kind put on the path) is."""
    train = "import _init_paths\nimport torch\nfrom model import Loss\n"
    loss = "import torch\nclass Loss(torch.nn.Module):\n    pass\n"
    run = program(tmp_path / "a", {"train.py": train, "utils/__init__.py": "",
                                   "utils/model.py": loss})
    key = run.program.key(str(tmp_path / "a" / "train.py"))
    assert run.program.resolve_module(key, "model", 0) is None
    run = program(tmp_path / "b", {"train.py": train, "lib/model.py": loss})
    key = run.program.key(str(tmp_path / "b" / "train.py"))
    assert run.program.resolve_module(key, "model", 0) == run.program.key(
        str(tmp_path / "b" / "lib" / "model.py"))


LOSSES = """
import torch
import torch.nn as nn


class Heat(nn.Module):
    def forward(self, pred, gt):
        return ((pred - gt) ** 2).mean(dim=(1, 2, 3))


class StagedLoss(nn.Module):
    def __init__(self, stages):
        super().__init__()
        self.terms = nn.ModuleList([Heat() for _ in range(stages)])

    def forward(self, outputs, targets):
        per_stage, extra = [], []
        for i, out in enumerate(outputs):
            per_stage.append(self.terms[i](out, targets[i]))
            extra.append(None)
        return per_stage, extra
"""

TRAINER = """
import torch


def train_epoch(model, loader, crit, opt, meter):
    for images, targets in loader:
        outputs = model(images)
        targets = list(map(lambda t: t.cuda(non_blocking=True), targets))
        per_stage, extra = crit(outputs, targets)
        loss = 0
        for k in range(2):
            term = per_stage[k].mean()
            meter.update(term.item())
            loss = loss + term
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


MAIN = """
import torch
from torch.utils.data import DataLoader
from losses import StagedLoss
from trainer import train_epoch

model = torch.nn.DataParallel(torch.nn.Conv2d(3, 3, 1)).cuda()
crit = StagedLoss(2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Poses(), batch_size=4, num_workers=2, persistent_workers=True)
for epoch in range(3):
    train_epoch(model, loader, crit, opt, Meter())
"""


def test_items_of_a_list_a_loss_fills_in_a_loop_are_gpu_values(tmp_path):
    """The loss's forward appends what its sub-modules return (beyond what the analysis
    follows): its results are computed from GPU targets, so reading one per step syncs,
    as it would for a loss the analysis cannot see at all."""
    run = program(tmp_path, {"losses.py": LOSSES, "trainer.py": TRAINER,
                             "main.py": MAIN})
    assert found(run, "LT001") == {("trainer.py", 12, "LT001")}


SEQ_MODEL = """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.chars = nn.Conv1d(32, 64, 3, padding=1)
        self.rnn = nn.LSTM(64, 128, batch_first=True)
        self.out = nn.Linear(128, 9)

    def forward(self, x):
        h = self.chars(x.transpose(1, 2)).transpose(1, 2)
        return self.out(self.rnn(h)[0])


model = Tagger().cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(5):
    for words, tags in batches():
        x = pad_sequence(words, batch_first=True).cuda()
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), tags.cuda().flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_no_autotuner_advice_for_1d_convolutions_of_a_recurrent_sequence_model(tmp_path):
    """A char CNN in front of an LSTM runs over padded sentences whose length changes
    every batch: the autotuner would time its algorithms again for each new length."""
    assert found(program(tmp_path, {"tagger.py": SEQ_MODEL}, select=("LT005",))) == set()


def test_autotuner_advice_stays_for_image_convolutions_before_a_recurrent_decoder(tmp_path):
    """A ResNet-style encoder on fixed crops feeding an LSTM captioner: the convolutions
    see one input size, the advice holds."""
    src = SEQ_MODEL.replace("nn.Conv1d(32, 64, 3, padding=1)", "nn.Conv2d(3, 64, 3, padding=1)")
    assert found(program(tmp_path, {"tagger.py": src}, select=("LT005",))) == {
        ("tagger.py", 21, "LT005")}


VIT = """
import torch
import timm.models.vision_transformer as vit


class TokenViT(vit.VisionTransformer):
    def forward_features(self, x):
        tokens = self.patch_embed(x)
        cls = torch.zeros(tokens.size(0), 1, tokens.size(2)).cuda()
        return self.blocks(torch.cat([cls, tokens], dim=1))


model = TokenViT().cuda()
opt = torch.optim.AdamW(model.parameters())
for epoch in range(3):
    for images, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_forward_features_of_a_library_model_subclass_runs_per_batch(tmp_path):
    """timm's VisionTransformer.forward() calls forward_features(): a subclass that
    overrides only forward_features builds its class token on the CPU once per batch."""
    assert found(program(tmp_path, {"vit_train.py": VIT}, select=("LT012",))) == {
        ("vit_train.py", 8, "LT012")}


def test_forward_features_next_to_an_own_forward_is_not_assumed_hot(tmp_path):
    """With a forward() of its own, forward_features runs only where forward calls it."""
    src = VIT.replace("    def forward_features(self, x):",
                      "    def forward(self, x):\n        return self.head(x)\n\n"
                      "    def forward_features(self, x):")
    assert found(program(tmp_path, {"vit_train.py": src}, select=("LT012",))) == set()


AUDIO_DATA = """
import torch
from torch.utils import data


class ClipLoader(data.DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.collate_fn = pad_clips


class RepeatingDataLoader(data.DataLoader):
    def __iter__(self):
        while True:
            yield from super().__iter__()


if __name__ == "__main__":
    for clip in ClipLoader(Clips("dev/"), batch_size=2, num_workers=2):
        print(clip.shape)
"""

AUDIO_TRAIN = """
import torch
from clips import ClipLoader, RepeatingDataLoader, Clips

net = torch.nn.Conv1d(1, 8, 9).cuda()
opt = torch.optim.Adam(net.parameters())
train = ClipLoader(Clips("train/"), batch_size=4, num_workers=4)
extra = RepeatingDataLoader(Clips("extra/"), batch_size=4, num_workers=4)
for epoch in range(20):
    for clip in train:
        loss = net(clip.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_dataloader_subclass_of_another_module_is_a_loader(tmp_path):
    """`ClipLoader(ds, num_workers=4)` hands its arguments to DataLoader: no pinning and
    no persistent workers, as for DataLoader itself; the subclass with an iteration of
    its own may keep its workers (no LT004). The defining module's self-test under
    `if __name__ == "__main__":` is not this program's loader."""
    run = program(tmp_path, {"clips.py": AUDIO_DATA, "train.py": AUDIO_TRAIN},
                  select=("LT003", "LT004"))
    got = found(run)
    assert ("train.py", 6, "LT003") in got and ("train.py", 6, "LT004") in got
    assert ("train.py", 7, "LT004") not in got
    assert not {f for f in got if f[0] == "clips.py"}


def test_a_factory_function_named_like_a_loader_is_not_one(tmp_path):
    files = {"loaders.py": "def CreateDataLoader(opt):\n    return opt.loader\n",
             "train.py": AUDIO_TRAIN.replace("from clips import ClipLoader, RepeatingDataLoader, Clips",
                                             "from loaders import CreateDataLoader as ClipLoader")}
    assert found(program(tmp_path, files, select=("LT002", "LT003", "LT004"))) == set()


SLICES = """
import torch
from torch.utils.data import DataLoader, Dataset


class Windows(Dataset):
    def __init__(self, data, seq_len):
        self.data, self.seq_len = data, seq_len

    def __len__(self):
        return self.data.size(0) // self.seq_len

    def __getitem__(self, i):
        start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))
        return self.data[start: start + self.seq_len + 1].long()


class Sentences(Dataset):
    def __init__(self, rows, vocab):
        self.rows, self.vocab = rows, vocab

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self._ids(self.rows[i])

    def _ids(self, row):
        return torch.tensor([self.vocab.get(w, 0) for w in row.split()])


net = torch.nn.Linear(8, 8).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
cheap = DataLoader(Windows(torch.zeros(10000), 64), batch_size=8)
costly = DataLoader(Sentences(["a b"], {}), batch_size=8)
for epoch in range(3):
    for a, b in zip(cheap, costly):
        loss = net(a.cuda().float()).sum() + net(b.cuda().float()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_workers_are_advised_only_where_items_cost_something_to_make(tmp_path):
    """A random slice of a tensor in memory costs nothing next to the hops between
    processes; a sentence turned into ids word by word (a helper method's loop) does."""
    got = found(program(tmp_path, {"lm.py": SLICES}, select=("LT002",)))
    assert got == {("lm.py", 34, "LT002")}


TRAINERS = """
import torch


class SupervisedTrainer:
    def __init__(self, model):
        super(SupervisedTrainer, self).__init__()
        self.model = model

    def train(self, loader, opt):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(self.model(x.cuda()), y.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())


class ClusterTrainer:
    def __init__(self, model):
        super(ClusterTrainer, self).__init__()
        self.model = model

    def train(self, loader, opt):
        for x, y in loader:
            loss = self.model(x.cuda()).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
"""

PRETRAIN = """
import torch
from trainers import SupervisedTrainer

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
trainer = SupervisedTrainer(model)
for epoch in range(10):
    trainer.train(batches(), opt)
"""


def test_a_trainer_class_the_program_never_uses_is_not_its_loop(tmp_path):
    """The entry script uses SupervisedTrainer; ClusterTrainer (mentioned nowhere but in
    its own `super()` call) belongs to another program of the repository."""
    run = program(tmp_path, {"trainers.py": TRAINERS, "pretrain.py": PRETRAIN},
                  select=("LT001",))
    assert found(run) == {("trainers.py", 15, "LT001")}


def test_a_module_linted_on_its_own_keeps_all_its_loops(tmp_path):
    run = program(tmp_path, {"trainers.py": TRAINERS}, select=("LT001",))
    assert found(run) == {("trainers.py", 15, "LT001"), ("trainers.py", 29, "LT001")}


def test_a_class_picked_by_name_at_run_time_is_kept(tmp_path):
    """`getattr(trainers, args.trainer)`: any class of the module may run."""
    entry = PRETRAIN.replace("from trainers import SupervisedTrainer",
                             "import trainers").replace(
        "trainer = SupervisedTrainer(model)", "trainer = getattr(trainers, name)(model)")
    run = program(tmp_path, {"trainers.py": TRAINERS, "pretrain.py": entry}, select=("LT001",))
    assert found(run) == {("trainers.py", 15, "LT001"), ("trainers.py", 29, "LT001")}


BASE_MODEL = """
import torch
from torch.nn.parallel import DataParallel


class BaseModel:
    def to_device(self, net):
        net = net.cuda()
        return DataParallel(net)
"""

SR_TRAIN = """
import torch
from models.factory import define_model

model = define_model(opt)
for epoch in range(100):
    for batch in loader:
        model.feed(batch)
        model.optimize_parameters()
"""


def test_dataparallel_in_a_model_module_the_imports_do_not_connect(tmp_path):
    """The model module is reached through a factory module left out of the run: the
    linted files are one program, and it trains."""
    run = program(tmp_path, {"models/base_model.py": BASE_MODEL, "train.py": SR_TRAIN},
                  select=("LT015",))
    assert found(run) == {("base_model.py", 8, "LT015")}


def test_dataparallel_beside_an_inference_loop_is_left_alone(tmp_path):
    infer = BASE_MODEL + """

def predict(net, loader):
    net = BaseModel().to_device(net)
    net.eval()
    with torch.no_grad():
        for x in loader:
            print(net(x.cuda()).argmax(1))
"""
    run = program(tmp_path, {"models/base_model.py": infer, "train.py": SR_TRAIN},
                  select=("LT015",))
    assert found(run) == set()


def test_a_dataparallel_subclass_of_the_program_is_dataparallel(tmp_path):
    files = {"parallel.py": """
        import torch

        class ChunkedDataParallel(torch.nn.DataParallel):
            def scatter(self, inputs, kwargs, device_ids):
                return super().scatter(inputs, kwargs, device_ids)

        class ChunkedDistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
            pass
        """,
             "train.py": """
        import torch
        from parallel import ChunkedDataParallel, ChunkedDistributedDataParallel

        net = ChunkedDataParallel(torch.nn.Linear(8, 8).cuda())
        other = ChunkedDistributedDataParallel(torch.nn.Linear(8, 8).cuda())
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x in loader:
            loss = net(x.cuda()).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}
    assert found(program(tmp_path, files, select=("LT015",))) == {("train.py", 4, "LT015")}


RECSYS = """
import numpy as np
import torch


def evaluate(model, users, seqs):
    model.eval()
    hits = 0
    for u in users:
        scores = -model.predict(np.array([u]), np.array([seqs[u]]))
        hits += int(scores[0].argsort().argsort()[0] < 10)
    return hits / len(users)


def evaluate_quietly(model, users, seqs):
    model.eval()
    with torch.no_grad():
        for u in users:
            model.predict(np.array([u]), np.array([seqs[u]]))


model = Recommender().cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(20):
    model.train()
    for step in range(100):
        loss = model(*sample()).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(evaluate(model, range(1000), SEQS), evaluate_quietly(model, range(10), SEQS))
"""


def test_an_evaluation_loop_over_users_after_model_eval_without_no_grad(tmp_path):
    """No loader feeds it: the loop runs the model after `model.eval()` and trains
    nothing; the one under `torch.no_grad()` is fine."""
    assert found(program(tmp_path, {"sasrec.py": RECSYS}, select=("LT013",))) == {
        ("sasrec.py", 8, "LT013")}


BASE_TRAINER = """
import argparse
import torch
from tqdm import tqdm

ap = argparse.ArgumentParser()
ap.add_argument("--debug", type=int, default=0)
opt = ap.parse_args()


class BaseTrainer:
    def __init__(self, model, loader, device, rank=0):
        self.model, self.loader, self.device, self.rank = model, loader, device, rank

    def train_on_batch(self, batch):
        raise NotImplementedError

    def show(self, batch, out):
        raise NotImplementedError

    def train(self, epochs):
        for epoch in range(epochs):
            pbar = tqdm(enumerate(self.loader)) if self.rank == 0 else enumerate(self.loader)
            for i, batch in pbar:
                out = self.train_on_batch(batch)
                if opt.debug > 0:
                    self.show(batch, out)
"""

DEPTH_TRAINER = """
import torch
from base import BaseTrainer


class DepthTrainer(BaseTrainer):
    def train_on_batch(self, batch):
        image = batch["image"].to(self.device)
        loss = self.model(image).mean()
        loss.backward()
        self.opt.step()
        return loss

    def show(self, batch, out):
        print(out.item(), batch["image"].cpu().numpy().shape)
"""

DEPTH_DATA = """
from torch.utils.data import DataLoader


def make_loader(ds):
    return DataLoader(ds, batch_size=8, num_workers=4, pin_memory=True, persistent_workers=True)
"""


def test_a_base_trainer_loop_runs_the_subclass_override_per_batch(tmp_path):
    """`self.train_on_batch(batch)` in the base class's loop (over a `tqdm(...) if rank
    == 0 else enumerate(...)` choice) runs DepthTrainer's method: its copy of the pinned
    batch (from a loader built in a module the imports do not connect) blocks; the
    visualisation under `if opt.debug > 0:` (off by default) is rare."""
    files = {"base.py": BASE_TRAINER, "depth.py": DEPTH_TRAINER, "data.py": DEPTH_DATA}
    got = found(program(tmp_path, files, select=("LT001", "LT008")))
    assert got == {("depth.py", 7, "LT008")}


BLOCKS = """
import torch.nn as nn


class Residual(nn.Module):
    def __init__(self, cin, cout, norm="group"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        if norm == "group":
            self.norm = nn.GroupNorm(8, cout)
        elif norm == "batch":
            self.norm = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.norm(self.conv(x))


class Bottleneck(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))
"""


def test_batchnorm_on_a_branch_the_default_turns_off_and_an_unused_block(tmp_path):
    """`elif norm == "batch":` with norm="group" the default is not built unless a caller
    asks for it; Bottleneck is a block no model of the program builds."""
    net = "import torch\nfrom blocks import Residual\nnet = Residual(3, 16).cuda()\n"
    assert found(program(tmp_path, {"blocks.py": BLOCKS, "net.py": net},
                         select=("LT016",))) == set()
    # (a model of the same module asking for it: the branch is built)
    asked = BLOCKS + "\n\ndef stem():\n    return Residual(3, 16, norm=\"batch\")\n"
    assert found(program(tmp_path / "b", {"blocks.py": asked, "net.py": net},
                         select=("LT016",))) == {("blocks.py", 7, "LT016")}


# ---- cases a reviewer found against the first version of the rules above

WARMUP = """
import argparse
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--warmup_epochs", type=int, default=0)
args = ap.parse_args()
net = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if args.warmup_epochs > 0:
    for epoch in range(args.warmup_epochs):
        for x in loader:
            loss = net(x.cuda()).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
"""


def test_a_whole_loop_under_an_option_that_is_0_by_default_is_still_linted(tmp_path):
    assert found(program(tmp_path, {"w.py": WARMUP}, select=("LT001",))) == {("w.py", 16, "LT001")}


EVAL_CASES = """
import torch


def attack(model, loader, eps):
    model.eval()
    for x, y in loader:
        x = x.cuda().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(model(x), y.cuda())
        grad, = torch.autograd.grad(loss, x)
        print((x + eps * grad.sign()).shape)


def score(model, chunks):
    model.eval()
    for chunk in chunks:
        for x in chunk:
            print(model(x))


net = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(3):
    for x in train_loader:
        loss = net(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    attack(net, val_loader, 0.03)
    score(net, CHUNKS)
"""


def test_no_grad_advice_skips_loops_that_need_gradients_and_reports_a_nest_once(tmp_path):
    """An adversarial attack takes gradients after `model.eval()`: no_grad would break
    it. A nest of loops running the model is one evaluation loop."""
    assert found(program(tmp_path, {"e.py": EVAL_CASES}, select=("LT013",))) == {
        ("e.py", 15, "LT013")}


def test_the_sum_of_sizes_of_gpu_tensors_is_a_host_number(tmp_path):
    src = """
        import torch
        net = torch.nn.Linear(4, 4).cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        seen = 0
        for xs in loader:
            xs = [x.cuda() for x in xs]
            loss = sum(net(x).sum() for x in xs)
            seen += sum(x.size(0) for x in xs)
            if seen > 1000:
                seen = 0
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert found(program(tmp_path, {"s.py": src}, select=("LT001",))) == set()


def test_dataparallel_in_an_export_script_beside_the_training_script(tmp_path):
    files = {"train.py": SR_TRAIN,
             "export.py": "import torch\nnet = torch.nn.DataParallel(torch.nn.Linear(4, 4))\n"
                          "net.load_state_dict(torch.load('w.pt'))\n"
                          "torch.onnx.export(net.module, torch.zeros(1, 4), 'm.onnx')\n"}
    assert found(program(tmp_path, files, select=("LT015",))) == set()


def test_a_dataparallel_subclass_imported_into_a_helper_module(tmp_path):
    """The helper asks only whether the name is such a class: the answer must bring the
    second look (the first pass sees the helper alone)."""
    files = {"parallel.py": "import torch\n\nclass SplitDataParallel(torch.nn.DataParallel):\n"
                            "    pass\n",
             "helper.py": "from parallel import SplitDataParallel\n\n\ndef wrap(net):\n"
                          "    return SplitDataParallel(net)\n",
             "train.py": "import torch\nfrom helper import wrap\nnet = wrap(torch.nn.Linear(4, 4).cuda())\n"
                         "opt = torch.optim.SGD(net.parameters(), lr=0.1)\nfor x in loader:\n"
                         "    loss = net(x.cuda()).sum()\n    opt.zero_grad()\n    loss.backward()\n"
                         "    opt.step()\n"}
    assert found(program(tmp_path, files, select=("LT015",))) == {("helper.py", 5, "LT015")}


def test_a_dataset_calling_a_helper_of_the_program_is_costly(tmp_path):
    src = SLICES.replace("        start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))\n"
                         "        return self.data[start: start + self.seq_len + 1].long()",
                         "        return fbank(self.data[i])")
    got = found(program(tmp_path, {"lm.py": src, "feats.py": "def fbank(x):\n    return x\n"},
                        select=("LT002",)))
    assert ("lm.py", 33, "LT002") in got
