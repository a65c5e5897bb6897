"""Shapes of the seventh round (2026-12-02): trainer classes with dicts of models and
losses accumulated from 0.0, evaluation steps named `*_step`, scripts whose training runs
under `--do_train`, models subclassing a transformers class, dev loaders that hold the
whole split in one batch, and optimizers written in the program."""

from __future__ import annotations

from lint_helpers import found, line_of, program

# ---------------------------------------------------------------- a vocoder-style trainer
GAN_TRAINER = """
import torch
from torch import nn
from torch.utils.data import DataLoader


class AdversarialLoss(nn.Module):
    def forward(self, outputs):
        if isinstance(outputs, (tuple, list)):
            adv_loss = 0.0
            for out in outputs:
                adv_loss += nn.functional.mse_loss(out, out.new_ones(out.size()))
        else:
            adv_loss = nn.functional.mse_loss(outputs, outputs.new_ones(outputs.size()))
        return adv_loss


class Trainer:
    def __init__(self, loaders, model, criterion, optimizer, config, device):
        self.data_loader = loaders
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.config = config
        self.device = device
        self.steps = 0
        self.total_train_loss = {}
        self.total_eval_loss = {}

    def run(self):
        for epoch in range(self.config["epochs"]):
            self._train_epoch()

    def _train_epoch(self):
        for batch in self.data_loader["train"]:
            self._train_step(batch)
            self.steps += 1
            self._check_eval_interval()

    def _train_step(self, batch):
        x, y = batch
        x, y = x.to(self.device), y.to(self.device)
        y_ = self.model["generator"](x)
        gen_loss = 0.0
        if self.config["use_mel_loss"]:
            mel_loss = self.criterion["mel"](y_, y)
            gen_loss += mel_loss
        adv_loss = self.criterion["gen_adv"](self.model["discriminator"](y_))
        self.total_train_loss["adversarial_loss"] = adv_loss.item()
        gen_loss += adv_loss
        self.total_train_loss["generator_loss"] = gen_loss.item()
        self.optimizer["generator"].zero_grad()
        gen_loss.backward()
        self.optimizer["generator"].step()

    def _check_eval_interval(self):
        if self.steps % self.config["eval_interval_steps"] == 0:
            self._eval_epoch()

    def _eval_epoch(self):
        for key in self.model.keys():
            self.model[key].eval()
        for batch in self.data_loader["dev"]:
            self._eval_step(batch)

    @torch.no_grad()
    def _eval_step(self, batch):
        x, y = batch
        x, y = x.to(self.device), y.to(self.device)
        y_ = self.model["generator"](x)
        mel_loss = self.criterion["mel"](y_, y)
        self.total_eval_loss["mel_loss"] = mel_loss.item()


def main():
    device = torch.device("cuda")
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
    loaders = {"train": DataLoader(data, batch_size=8, num_workers=2),
               "dev": DataLoader(data, batch_size=8, num_workers=2)}
    model = {"generator": nn.Linear(8, 8).to(device),
             "discriminator": nn.Linear(8, 1).to(device)}
    criterion = {"mel": nn.L1Loss().to(device), "gen_adv": AdversarialLoss().to(device)}
    optimizer = {"generator": torch.optim.Adam(model["generator"].parameters())}
    config = {"epochs": 10, "use_mel_loss": True, "eval_interval_steps": 1000}
    Trainer(loaders, model, criterion, optimizer, config, device).run()


if __name__ == "__main__":
    main()
"""


def test_a_loss_started_at_zero_and_added_to_is_a_gpu_tensor(tmp_path):
    run = program(tmp_path, {"train.py": GAN_TRAINER})
    got = found(run, "LT001")
    # `gen_loss = 0.0` ... `gen_loss += mel_loss` (in a branch): a GPU tensor after it
    assert ("train.py", line_of(GAN_TRAINER, '["generator_loss"] = gen_loss.item()'),
            "LT001") in got
    # the loss module's forward starts from 0.0 too, on one of its paths
    assert ("train.py", line_of(GAN_TRAINER, '["adversarial_loss"] = adv_loss.item()'),
            "LT001") in got


def test_an_evaluation_step_called_per_batch_makes_an_evaluation_loop(tmp_path):
    run = program(tmp_path, {"train.py": GAN_TRAINER})
    # `self._eval_step(batch)` has "step" in its name and still trains nothing
    assert ("train.py", line_of(GAN_TRAINER, '["mel_loss"] = mel_loss.item()'),
            "LT001") in found(run, "LT001")


TRAINS_WITH_A_STEP = """
import torch
from torch import nn
from torch.utils.data import DataLoader


def val_step(model, x, y):
    return nn.functional.mse_loss(model(x), y)


def fit(model, loader, opt):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = val_step(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())


data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
model = nn.Linear(8, 8).cuda()
fit(model, DataLoader(data, batch_size=8), torch.optim.SGD(model.parameters(), 0.1))
"""


def test_a_loop_that_steps_the_optimizer_trains_whatever_its_helpers_are_named(tmp_path):
    run = program(tmp_path, {"train.py": TRAINS_WITH_A_STEP})
    syncs = [f for f in run.findings if f.code == "LT001"]
    assert [f.line for f in syncs] == [line_of(TRAINS_WITH_A_STEP, "print(loss.item())")]
    assert dict(syncs[0].evidence)["loop_kind"] == "train"


# ---------------------------------------------------------------- `--do_train`, HF-style
NER_SCRIPT = """
import argparse

import torch
from pytorch_transformers import BertForTokenClassification
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Ner(BertForTokenClassification):
    def forward(self, input_ids, labels=None, valid_ids=None, lengths=None):
        sequence_output = self.bert(input_ids)[0]
        batch_size, max_len, feat_dim = sequence_output.shape
        for i in range(batch_size):
            for j in range(max_len):
                if valid_ids[i][j].item() == 1:
                    pass
        if lengths is not None:
            print(lengths.tolist())
        return self.classifier(sequence_output)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--do_train", action="store_true")
    parser.add_argument("--do_eval", action="store_true")
    parser.add_argument("--do_predict", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    model = Ner.from_pretrained("bert-base-cased").to(device)
    opt = torch.optim.AdamW(model.parameters())
    data = TensorDataset(torch.zeros(64, 16, dtype=torch.long))
    if args.do_train:
        for epoch in range(3):
            tr_loss = 0
            for step, batch in enumerate(DataLoader(data, batch_size=8)):
                batch = tuple(t.to(device) for t in batch)
                loss = model(batch[0]).mean()
                loss.backward()
                tr_loss += loss.item()
                opt.step()
    if args.do_eval:
        model.eval()
        for batch in DataLoader(data, batch_size=8):
            with torch.no_grad():
                logits = model(batch[0].to(device))
            logits = logits.detach().cpu().numpy()
    if args.do_predict:
        model.eval()
        for batch in DataLoader(data, batch_size=8):
            with torch.no_grad():
                out = model(batch[0].to(device))
            print(out.sum().item())


if __name__ == "__main__":
    main()
"""


def test_the_modes_of_a_do_train_do_eval_script_are_its_run(tmp_path):
    run = program(tmp_path, {"run_ner.py": NER_SCRIPT})
    got = found(run, "LT001")
    assert ("run_ner.py", line_of(NER_SCRIPT, "tr_loss += loss.item()"), "LT001") in got
    assert ("run_ner.py", line_of(NER_SCRIPT, "logits = logits.detach().cpu()"), "LT001") in got
    # predicting is a request the training run does not make: its loop is not the run
    assert ("run_ner.py", line_of(NER_SCRIPT, "print(out.sum().item())"), "LT001") not in got


def test_a_subclass_of_a_transformers_model_runs_its_forward_per_batch(tmp_path):
    run = program(tmp_path, {"run_ner.py": NER_SCRIPT})
    got = found(run, "LT001")
    # `valid_ids=None`: an optional input, a tensor on the model's device when given
    assert ("run_ner.py", line_of(NER_SCRIPT, "if valid_ids[i][j].item() == 1:"), "LT001") in got
    # lengths are host values (pack_padded_sequence wants them on the CPU)
    assert ("run_ner.py", line_of(NER_SCRIPT, "print(lengths.tolist())"), "LT001") not in got


TRAIN_UNDER_A_MODE_FLAG = """
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--finetune", action="store_true")
args = parser.parse_args()
model = nn.Linear(8, 2).cuda()
opt = torch.optim.SGD(model.parameters(), 0.1)
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long))
if args.finetune:
    for x, y in DataLoader(data, batch_size=8):
        x, y = x.cuda(), y.cuda()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
"""


def test_a_training_loop_under_an_opt_in_flag_is_a_mode_the_user_picks(tmp_path):
    run = program(tmp_path, {"finetune.py": TRAIN_UNDER_A_MODE_FLAG})
    assert ("finetune.py", line_of(TRAIN_UNDER_A_MODE_FLAG, "print(loss.item())"), "LT001") \
        in found(run, "LT001")


# ---------------------------------------------------------------- one batch per split
WHOLE_SPLIT = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Texts(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor([ord(c) for c in self.rows[i]][:8]), len(self.rows[i]) % 2


def evaluate(model, dev_iter):
    model.eval()
    with torch.no_grad():
        for feature, target in dev_iter:
            feature, target = feature.cuda(), target.cuda()
            correct = (model(feature.float()).argmax(1) == target).sum().item()
    return correct


train_set, dev_set = Texts(["abcdefgh"] * 64), Texts(["hgfedcba"] * 16)
train_iter = DataLoader(train_set, batch_size=8, shuffle=True)
dev_iter = DataLoader(dev_set, batch_size=len(dev_set), shuffle=False)
model = nn.Linear(8, 2).cuda()
opt = torch.optim.SGD(model.parameters(), 0.1)
for epoch in range(10):
    for feature, target in train_iter:
        feature, target = feature.cuda(), target.cuda()
        loss = nn.functional.cross_entropy(model(feature.float()), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for feature, target in dev_iter:
        feature, target = feature.cuda(), target.cuda()
        acc = (model(feature.float()).argmax(1) == target).float().mean().item()
"""


def test_a_loader_holding_the_whole_split_in_one_batch_needs_no_workers_or_pinning(tmp_path):
    run = program(tmp_path, {"main.py": WHOLE_SPLIT})
    train_line = line_of(WHOLE_SPLIT, "train_iter = DataLoader(")
    dev_line = line_of(WHOLE_SPLIT, "dev_iter = DataLoader(")
    loader_findings = found(run, "LT002") | found(run, "LT003")
    assert ("main.py", train_line, "LT002") in loader_findings
    assert ("main.py", train_line, "LT003") in loader_findings
    assert not any(line == dev_line for _, line, _ in loader_findings)


def test_a_pass_over_a_one_batch_loader_is_no_hot_loop(tmp_path):
    run = program(tmp_path, {"main.py": WHOLE_SPLIT})
    # the epoch's dev pass reads one batch: its `.item()` runs once per epoch
    assert ("main.py", line_of(WHOLE_SPLIT, "acc = (model(feature.float())"), "LT001") \
        not in found(run, "LT001")


TORCHTEXT_DEV = """
import torch
from torch import nn


def test(model, data):
    model.eval()
    loss = 0
    with torch.set_grad_enabled(False):
        for batch in iter(data.dev_iter):
            p1 = model(batch)
            batch_loss = nn.functional.cross_entropy(p1, batch.s_idx)
            loss += batch_loss.item()
    return loss


def train(model, data, opt):
    for i, batch in enumerate(data.train_iter):
        loss = nn.functional.cross_entropy(model(batch), batch.s_idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (i + 1) % 100 == 0:
            test(model, data)


device = torch.device("cuda")
"""


def test_a_torchtext_dev_iterator_is_a_batch_source(tmp_path):
    run = program(tmp_path, {"run.py": TORCHTEXT_DEV})
    assert ("run.py", line_of(TORCHTEXT_DEV, "loss += batch_loss.item()"), "LT001") \
        in found(run, "LT001")


# ---------------------------------------------------------------- an optimizer of its own
LARS = """
import math

import torch
from torch.optim.optimizer import Optimizer


class LARS(Optimizer):
    def __init__(self, params, lr=0.1, eta=1e-3):
        super().__init__(params, dict(lr=lr, eta=eta, exclude=False))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr = group["lr"]
            if group["exclude"]:
                continue
            for p in group["params"]:
                if p.grad is None:
                    continue
                weight_norm = torch.norm(p).item()
                grad_norm = torch.norm(p.grad).item()
                local_lr = group["eta"] * weight_norm / (grad_norm + 1e-8)
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["momentum_buffer"] = torch.zeros_like(p)
                state["step"] += 1
                state.setdefault("n_iter", 0)
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    state["momentum_buffer"].zero_()
                bias_correction = 1 - 0.9 ** state["step"]
                step_size = lr * math.sqrt(bias_correction)
                if lr > 0 and step_size > 0:
                    state["momentum_buffer"].mul_(0.9).add_(p.grad, alpha=-local_lr * step_size)
                    p.add_(state["momentum_buffer"])
                if state["momentum_buffer"].abs().max().item() > 1e3:
                    raise RuntimeError("diverged")
"""

LARS_TRAIN = """
import torch
from torch import nn
from torch.utils.data import DataLoader
from lars import LARS

model = nn.Linear(8, 2).cuda()
opt = LARS(model.parameters())
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long))
for epoch in range(10):
    for x, y in DataLoader(data, batch_size=8, num_workers=2, pin_memory=True):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_an_optimizer_of_the_program_syncs_in_its_step(tmp_path):
    run = program(tmp_path, {"lars.py": LARS, "train.py": LARS_TRAIN})
    got = found(run, "LT001")
    assert ("lars.py", line_of(LARS, "weight_norm = torch.norm(p).item()"), "LT001") in got
    assert ("lars.py", line_of(LARS, "grad_norm = torch.norm(p.grad).item()"), "LT001") in got
    assert ("lars.py", line_of(LARS, '.abs().max().item() > 1e3:'), "LT001") in got
    # the group's settings and the state's step count are Python numbers, the state a dict
    assert not {line for _, line, _ in got} & {
        line_of(LARS, "if lr > 0 and step_size > 0:"), line_of(LARS, 'if group["exclude"]:'),
        line_of(LARS, "if not state:"), line_of(LARS, "step_size = lr * math.sqrt("),
        line_of(LARS, 'if state["n_iter"] == 1:')}
    messages = [f.message for f in run.findings if f.code == "LT001"]
    assert all("optimizer's `step`" in m for m in messages), messages


def test_an_optimizer_no_program_uses_is_not_walked(tmp_path):
    run = program(tmp_path, {"lars.py": LARS, "train.py": LARS_TRAIN.replace(
        "from lars import LARS", "").replace("LARS(model.parameters())",
                                             "torch.optim.SGD(model.parameters(), 0.1)")})
    assert not found(run, "LT001")


# ---------------------------------------------------------------- modules imported whole
AGENT = """
import numpy as np
import torch
from torch import nn


class Agent:
    def __init__(self, device):
        self.device = device
        self.Q = nn.Sequential(nn.Conv2d(4, 16, 8, 4), nn.ReLU(), nn.Flatten(),
                               nn.Linear(16 * 20 * 20, 6)).to(device)
        self.opt = torch.optim.Adam(self.Q.parameters())

    def train(self, buffer):
        state, action = buffer.sample()
        loss = nn.functional.cross_entropy(self.Q(state), action)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        print(loss.item())


class Behavioral(Agent):
    def train(self, buffer):
        state, action = buffer.sample()
        loss = nn.functional.cross_entropy(self.Q(state), action) * 0.5
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


class Buffer:
    def __init__(self, device):
        self.device = device
        self.state = np.zeros((1000, 4, 84, 84), dtype=np.uint8)
        self.action = np.zeros(1000, dtype=np.int64)

    def sample(self):
        ind = np.random.randint(0, 1000, size=32)
        return (torch.ByteTensor(self.state[ind]).to(self.device).float(),
                torch.LongTensor(self.action[ind]).to(self.device))
"""

AGENT_MAIN = """
import torch

import bcq


def train_offline(device, max_timesteps, eval_freq):
    policy = bcq.Agent(device)
    buffer = bcq.Buffer(device)
    iters = 0
    while iters < max_timesteps:
        for _ in range(eval_freq):
            policy.train(buffer)
        iters += eval_freq


if __name__ == "__main__":
    train_offline(torch.device("cuda"), 100000, 5000)
"""


def test_a_loop_training_through_a_module_imported_whole_is_a_training_loop(tmp_path):
    # (`bcq/main.py` imports `bcq/bcq.py`, a module named as its folder; two classes of
    # it have a `train` method: the call alone does not say which)
    run = program(tmp_path, {"bcq/bcq.py": AGENT, "bcq/main.py": AGENT_MAIN})
    assert ("main.py", line_of(AGENT_MAIN, "for _ in range(eval_freq):"), "LT006") \
        in found(run, "LT006")
    assert ("bcq.py", line_of(AGENT, "print(loss.item())"), "LT001") in found(run, "LT001")


# ---------------------------------------------------------------- a base trainer's loop
BASE_TRAINER = """
import torch
from torch import nn


class BaseModel:
    def __init__(self, loader):
        self.loader = loader
        self.device = torch.device("cuda")

    def train_one_epoch(self):
        for data in self.loader:
            self.set_input(data)
            self.optimize_params()

    def set_input(self, data):
        self.x = data[0].to(self.device)


class Gan(BaseModel):
    def __init__(self, loader):
        super().__init__(loader)
        self.net = nn.Linear(8, 1).to(self.device)
        self.opt = torch.optim.Adam(self.net.parameters())

    def optimize_params(self):
        self.err = self.net(self.x).mean()
        self.opt.zero_grad()
        self.err.backward()
        self.opt.step()
        if self.err.item() < 1e-5:
            self.net.reset_parameters()


def main():
    loader = torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8, num_workers=2)
    model = Gan(loader)
    for epoch in range(10):
        model.train_one_epoch()


main()
"""


def test_a_base_class_loop_runs_the_method_only_its_subclass_defines(tmp_path):
    run = program(tmp_path, {"model.py": BASE_TRAINER})
    assert ("model.py", line_of(BASE_TRAINER, "if self.err.item() < 1e-5:"), "LT001") \
        in found(run, "LT001")


TYPE_NAMES = """
import torch
from torch import nn


class FocalLoss(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = torch.tensor(alpha)

    def forward(self, input, target):
        if self.alpha.type() != input.data.type():
            self.alpha = self.alpha.type_as(input.data)
        return (nn.functional.cross_entropy(input, target, reduction="none") * self.alpha[target]).mean()


model = nn.Linear(8, 2).cuda()
criterion = FocalLoss([0.25, 0.75])
opt = torch.optim.SGD(model.parameters(), 0.1)
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long))
for x, y in torch.utils.data.DataLoader(data, batch_size=8):
    x, y = x.cuda(), y.cuda()
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_comparing_the_names_of_tensor_types_reads_nothing(tmp_path):
    run = program(tmp_path, {"train.py": TYPE_NAMES})
    assert ("train.py", line_of(TYPE_NAMES, "if self.alpha.type() != input.data.type():"),
            "LT001") not in found(run, "LT001")


# ---------------------------------------------------------------- evaluation in disguise
SESSION_GNN = """
import numpy as np
import torch
from torch import nn


class SessionGraph(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(100, 16)
        self.optimizer = torch.optim.Adam(self.parameters())

    def forward(self, items):
        return self.embedding(items).mean(1)


def forward(model, i, data):
    items = torch.as_tensor(data.inputs[i]).cuda()
    return data.targets[i], model(items)


def train_test(model, train_data, test_data):
    model.train()
    for i in train_data.slices(32):
        model.optimizer.zero_grad()
        targets, scores = forward(model, i, train_data)
        loss = nn.functional.cross_entropy(scores, torch.as_tensor(targets).cuda())
        loss.backward()
        model.optimizer.step()
    model.eval()
    hit = []
    for i in test_data.slices(32):
        targets, scores = forward(model, i, test_data)
        hit.append(scores.topk(20)[1].cpu().numpy())
    for step in range(10):
        sample = model(torch.zeros(1, 4, dtype=torch.long).cuda())
        print(sample.sum().item())
    return np.mean(hit)
"""


def test_a_loop_over_untyped_pieces_after_model_eval_is_an_evaluation_loop(tmp_path):
    run = program(tmp_path, {"model.py": SESSION_GNN})
    line = line_of(SESSION_GNN, "for i in test_data.slices(32):")
    assert ("model.py", line, "LT013") in found(run, "LT013")
    assert ("model.py", line_of(SESSION_GNN, "hit.append(scores.topk(20)[1].cpu()"), "LT001") \
        in found(run, "LT001")
    # a `range()` loop after eval() counts sampling steps: no evaluation loop of batches
    assert ("model.py", line_of(SESSION_GNN, "print(sample.sum().item())"), "LT001") \
        not in found(run, "LT001")


VSE = """
import torch
from torch import nn
from torch.utils.data import DataLoader


class VSE(object):
    def __init__(self):
        self.img_enc = nn.Linear(8, 4).cuda()
        self.txt_enc = nn.Linear(8, 4).cuda()
        self.optimizer = torch.optim.Adam(list(self.img_enc.parameters()) +
                                          list(self.txt_enc.parameters()))

    def train_start(self):
        self.img_enc.train()
        self.txt_enc.train()

    def val_start(self):
        self.img_enc.eval()
        self.txt_enc.eval()

    def forward_emb(self, images, captions):
        return self.img_enc(images.cuda()), self.txt_enc(captions.cuda())

    def train_emb(self, images, captions):
        img, cap = self.forward_emb(images, captions)
        loss = (img - cap).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def encode_data(model, data_loader):
    model.val_start()
    embs = []
    for images, captions in data_loader:
        img_emb, cap_emb = model.forward_emb(images, captions)
        embs.append(img_emb.data.cpu().numpy().copy())
    return embs


def main():
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
    train_loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True,
                              pin_memory=True)
    val_loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True,
                            pin_memory=True)
    model = VSE()
    for epoch in range(10):
        model.train_start()
        for images, captions in train_loader:
            model.train_emb(images, captions)
        encode_data(model, val_loader)


main()
"""


def test_a_method_that_switches_the_encoders_to_eval_makes_its_loop_need_no_grad(tmp_path):
    run = program(tmp_path, {"vse.py": VSE})
    assert ("vse.py", line_of(VSE, "for images, captions in data_loader:"), "LT013") \
        in found(run, "LT013")


BEAM = """
import torch
from torch import nn
from torch.utils.data import DataLoader


def beam_search(model, src, size):
    hyps = src[:, :1]
    for step in range(size):
        logits = model(hyps.float())
        if (logits.argmax(-1) == 0).all().item():
            break
    return hyps


def validate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for src, trg in loader:
            src, trg = src.cuda(), trg.cuda()
            total += nn.functional.mse_loss(model(src), trg).item()
            beam_search(model, src.long(), 4)
    return total


data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
model = nn.Linear(8, 8).cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(5):
    for src, trg in DataLoader(data, batch_size=8):
        loss = nn.functional.mse_loss(model(src.cuda()), trg.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
    validate(model, DataLoader(data, batch_size=8))
"""


def test_the_reads_of_a_beam_search_are_the_decoding_not_a_habit(tmp_path):
    run = program(tmp_path, {"nmt.py": BEAM})
    got = found(run, "LT001")
    assert ("nmt.py", line_of(BEAM, "total += nn.functional.mse_loss(model(src), trg).item()"),
            "LT001") in got
    assert ("nmt.py", line_of(BEAM, "if (logits.argmax(-1) == 0).all().item():"), "LT001") \
        not in got


PIN_BY_DEFAULT = """
import torch
from torch import nn
from torch.utils.data import DataLoader


def get_data_loader(batch_size=8, num_workers=2, pin_memory=True):
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
    return DataLoader(data, batch_size=batch_size, num_workers=num_workers,
                      pin_memory=pin_memory, persistent_workers=True)


device = torch.device("cuda")
model = nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(model.parameters(), 0.1)
loader = get_data_loader(batch_size=16)
for epoch in range(3):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_loader_pinned_by_its_factorys_default_wants_non_blocking_copies(tmp_path):
    run = program(tmp_path, {"train.py": PIN_BY_DEFAULT})
    assert ("train.py", line_of(PIN_BY_DEFAULT, "x, y = x.to(device), y.to(device)"), "LT008") \
        in found(run, "LT008")



def test_a_learning_rate_scheduler_is_no_optimizer():
    """A scheduler's step() may run once per epoch: it is not walked as an optimizer's."""
    import ast

    from pitstop.lint.steps import is_optimizer_class

    aliases = {"_LRScheduler": "torch.optim.lr_scheduler._LRScheduler",
               "Optimizer": "torch.optim.Optimizer", "torch": "torch"}
    classes = {c.name: c for c in ast.parse(
        "class WarmupLR(_LRScheduler): pass\n"
        "class Swa(torch.optim.swa_utils.SWALR): pass\n"
        "class LARS(Optimizer): pass\n"
        "class Lamb(torch.optim.AdamW): pass\n").body if isinstance(c, ast.ClassDef)}
    assert {n for n, c in classes.items() if is_optimizer_class(c, aliases)} == {"LARS", "Lamb"}
