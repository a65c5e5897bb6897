"""Shapes of the fifth round (2026-12-01): training that hides in a model's forward() or in
a callback handed to a trainer, names a module only gets through star imports, loaders
and models of config objects filled field by field (easydict, yacs, a dict of options),
abstract trainer methods, and look-alikes that must stay quiet (multi-GPU inference, a
loader rebuilt for every pass, `zeros_like` of a GPU input, integer switches of
forward())."""

from __future__ import annotations

from lint_helpers import found, line_of, program

# ---------------------------------------------------------------- training in forward()
META = """
import torch
import torch.nn.functional as F
from torch import nn, optim


class Meta(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 1, 3, 3))
        self.meta_optim = optim.Adam(self.parameters(), lr=1e-3)

    def forward(self, x_spt, y_spt):
        corrects = 0
        for i in range(4):
            logits = F.conv2d(x_spt[i], self.w).flatten(1)
            loss = F.cross_entropy(logits, y_spt[i])
            corrects += torch.eq(logits.argmax(1), y_spt[i]).sum().item()
        self.meta_optim.zero_grad()
        loss.backward()
        self.meta_optim.step()
        return corrects
"""

META_TRAIN = """
import argparse
import numpy as np
import torch
from meta import Meta


def main(args):
    device = torch.device("cuda")
    maml = Meta(args.n).to(device)
    db = np.load("tasks.npy")
    for step in range(args.epoch):
        x_spt, y_spt = db[step % 10]
        x_spt = torch.from_numpy(x_spt).to(device)
        y_spt = torch.from_numpy(y_spt).to(device)
        accs = maml(x_spt, y_spt)
        if step % 50 == 0:
            print(np.array(accs).astype(np.float16))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--epoch", type=int, default=1000)
    p.add_argument("--n", type=int, default=5)
    main(p.parse_args())
"""


def test_a_meta_learner_whose_forward_trains_makes_the_calling_loop_a_training_loop(tmp_path):
    # the script never steps itself (the first pass only skims it); its loop trains
    # because the model it calls does, in another file
    run = program(tmp_path, {"train.py": META_TRAIN, "meta.py": META})
    got = found(run)
    assert ("meta.py", line_of(META, ".sum().item()"), "LT001") in got
    loop = line_of(META_TRAIN, "for step in range")
    # F.conv2d is a convolution; np.float16 of host arrays is no reduced GPU precision
    assert {("train.py", loop, "LT005"), ("train.py", loop, "LT006")} <= got


# ---------------------------------------------------------------- callbacks
TRAINER = """
import torch
import torch.nn as nn
from tqdm import tqdm


class Trainer:
    def __init__(self, model, data_iter, optimizer, device):
        self.model, self.data_iter = model, data_iter
        self.optimizer, self.device = optimizer, device

    def train(self, get_loss, data_parallel=True):
        model = self.model.to(self.device)
        if data_parallel:
            model = nn.DataParallel(model)
        for e in range(10):
            for batch in tqdm(self.data_iter):
                batch = [t.to(self.device) for t in batch]
                self.optimizer.zero_grad()
                loss = get_loss(model, batch)
                loss.backward()
                self.optimizer.step()

    def eval(self, evaluate, data_parallel=True):
        self.model.eval()
        model = self.model.to(self.device)
        if data_parallel:
            model = nn.DataParallel(model)
        bar = tqdm(self.data_iter)
        for batch in bar:
            batch = [t.to(self.device) for t in batch]
            with torch.no_grad():
                accuracy = evaluate(model, batch)
            bar.set_description('acc=%5.3f' % accuracy)
"""

CALLBACK_MAIN = """
import torch
from torch.utils.data import DataLoader
from train import Trainer
from net import Net


def main():
    device = torch.device("cuda")
    model = Net()
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True,
                        persistent_workers=True)
    trainer = Trainer(model, loader, torch.optim.Adam(model.parameters()), device)

    def get_loss(model, batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        print(loss.item())
        return loss

    def evaluate(model, batch):
        x, y = batch
        return (model(x).argmax(1) == y).float().mean()

    trainer.train(get_loss)
    trainer.eval(evaluate)


main()
"""

NET = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""


def test_callbacks_handed_to_a_trainer_run_once_per_batch(tmp_path):
    run = program(tmp_path, {"main.py": CALLBACK_MAIN, "train.py": TRAINER, "net.py": NET},
                  select=("LT001", "LT015"))
    got = found(run)
    assert ("main.py", line_of(CALLBACK_MAIN, "print(loss.item())"), "LT001") in got
    assert ("train.py", line_of(TRAINER, "'acc=%5.3f' % accuracy"), "LT001") in got
    # DataParallel where the trainer trains; not in the method that only evaluates
    dp = [f.line for f in run.findings if f.code == "LT015"]
    assert dp == [line_of(TRAINER, "model = nn.DataParallel(model)")]


# ---------------------------------------------------------------- star imports
STAR_MODULE = """
import torch as t
import torch.nn as nn
"""

STAR_NETWORK = """
from module import *


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
"""

STAR_DATA = """
from torch.utils.data import Dataset, DataLoader
import numpy as np


class Frames(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return np.load(f"frames/{i}.npy")
"""

STAR_TRAIN = """
from preprocess import Frames, DataLoader
from network import *


def main():
    m = nn.DataParallel(Model().cuda())
    optimizer = t.optim.Adam(m.parameters())
    for epoch in range(10):
        dataloader = DataLoader(Frames(), batch_size=8, shuffle=True, num_workers=16)
        for data in dataloader:
            data = data.cuda()
            loss = m(data).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


main()
"""


def test_torch_names_that_only_star_imports_bring_in(tmp_path):
    run = program(tmp_path, {"train_transformer.py": STAR_TRAIN, "network.py": STAR_NETWORK,
                             "module.py": STAR_MODULE, "preprocess.py": STAR_DATA},
                  select=("LT003", "LT004", "LT015"))
    loader = line_of(STAR_TRAIN, "dataloader = DataLoader")
    # nn.DataParallel through two star imports; DataLoader re-exported by preprocess.py.
    # A loader built anew for each epoch has nothing for persistent_workers to keep.
    assert found(run) == {("train_transformer.py", line_of(STAR_TRAIN, "nn.DataParallel"), "LT015"),
                          ("train_transformer.py", loader, "LT003")}


# ---------------------------------------------------------------- quiet look-alikes
SHIFT = """
import torch
from torch import nn


class TemporalShift(nn.Module):
    def __init__(self, net, n_segment=3):
        super().__init__()
        self.net, self.n_segment = net, n_segment

    def forward(self, x, layer):
        if layer <= 0:
            return x
        return self.net(self.shift(x, self.n_segment))

    @staticmethod
    def shift(x, n_segment, fold_div=3):
        fold = x.size(1) // fold_div
        out = torch.zeros_like(x)
        out[:, :-1, :fold] = x[:, 1:, :fold]
        return out
"""

SHIFT_TRAIN = """
import torch
from shift import TemporalShift

device = torch.device("cuda")
model = TemporalShift(torch.nn.Conv2d(3, 3, 3)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(list(range(10)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for x in loader:
    x = x.to(device, non_blocking=True)
    loss = model(x, 7).sum()
    loss.backward()
    opt.step()
"""


def test_zeros_like_a_gpu_input_and_an_integer_switch_of_forward_are_no_syncs(tmp_path):
    run = program(tmp_path, {"train.py": SHIFT_TRAIN, "shift.py": SHIFT}, select=("LT001",))
    assert found(run) == set()


# ---------------------------------------------------------------- abstract trainer methods
BASE_TRAINER = """
import torch
from abc import ABCMeta, abstractmethod


class AbstractTrainer(metaclass=ABCMeta):
    def __init__(self, model, val_loader, device):
        self.model, self.val_loader, self.device = model.to(device), val_loader, device

    @abstractmethod
    def calculate_metrics(self, batch):
        pass

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            for batch in self.val_loader:
                batch = [x.to(self.device) for x in batch]
                metrics = self.calculate_metrics(batch)
"""

BERT_TRAINER = """
from base import AbstractTrainer


class BERTTrainer(AbstractTrainer):
    def __init__(self, model, val_loader, device):
        super().__init__(model, val_loader, device)

    def calculate_metrics(self, batch):
        seqs, labels = batch
        return self.model(seqs).argmax(-1).eq(labels)
"""

BERT_MAIN = """
import torch
from torch.utils.data import DataLoader
from bert import BERTTrainer
from net import Net

loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True,
                    persistent_workers=True)
trainer = BERTTrainer(Net(), loader, torch.device("cuda"))
trainer.validate()
"""


def test_a_validation_loop_that_runs_the_model_through_an_abstract_method(tmp_path):
    run = program(tmp_path, {"main.py": BERT_MAIN, "base.py": BASE_TRAINER,
                             "bert.py": BERT_TRAINER, "net.py": NET}, select=("LT008",))
    assert found(run) == {("base.py", line_of(BASE_TRAINER, "x.to(self.device)"), "LT008")}


# ---------------------------------------------------------------- datasets and options
HDF5_TRAIN = """
import argparse
import h5py
import torch
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
parser.add_argument("--threads", type=int, default=0)
opt = parser.parse_args()


class DatasetFromHdf5(Dataset):
    def __init__(self, path):
        hf = h5py.File(path)
        self.data = hf.get("data")
        self.target = hf.get("label")

    def __getitem__(self, index):
        return torch.from_numpy(self.data[index]).float(), torch.from_numpy(self.target[index]).float()

    def __len__(self):
        return self.data.shape[0]


loader = DataLoader(DatasetFromHdf5("train.h5"), num_workers=opt.threads, batch_size=16)
model = torch.nn.Linear(4, 4)
if opt.cuda:
    model = model.cuda()
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(10):
    for batch in loader:
        input, target = Variable(batch[0]), Variable(batch[1], requires_grad=False)
        if opt.cuda:
            input = input.cuda()
            target = target.cuda()
        loss = (model(input) - target).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_an_hdf5_dataset_read_per_item_behind_a_cuda_switch(tmp_path):
    run = program(tmp_path, {"main.py": HDF5_TRAIN}, select=("LT002", "LT003"))
    loader = line_of(HDF5_TRAIN, "loader = DataLoader")
    # h5py datasets read from disk when indexed; `if opt.cuda:` is the GPU run itself
    assert found(run) == {("main.py", loader, "LT002"), ("main.py", loader, "LT003")}


EDICT_CONFIG = """
from easydict import EasyDict as edict

config = edict()
config.WORKERS = 4
config.TEST = edict()
config.TEST.FLIP_TEST = False
"""

EDICT_VALIDATE = """
import numpy as np
import torch
from config import config


def validate(config, val_loader, model):
    model.eval()
    with torch.no_grad():
        for input, target in val_loader:
            output = model(input.cuda(non_blocking=True))
            if config.TEST.FLIP_TEST:
                flipped = np.flip(input.cpu().numpy(), 3).copy()
                output = (output + model(torch.from_numpy(flipped).cuda())) * 0.5


def main(config):
    model = torch.nn.Conv2d(3, 3, 3).cuda()
    loader = torch.utils.data.DataLoader(list(range(8)), num_workers=config.WORKERS,
                                         pin_memory=True, persistent_workers=True)
    for epoch in range(10):
        validate(config, loader, model)


main(config)
"""


def test_a_flip_test_off_in_an_easydict_config_is_rare(tmp_path):
    run = program(tmp_path, {"main.py": EDICT_VALIDATE, "config.py": EDICT_CONFIG},
                  select=("LT001", "LT012"))
    assert found(run) == set()


DICT_OPTIONS = """
import argparse
import torch
from torch.utils.data import DataLoader, Dataset


class Windows(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return torch.load(f"w/{i}.pt")


parser = argparse.ArgumentParser()
parser.add_argument("--num_workers", type=int, default=0)
config = vars(parser.parse_args())
loader = DataLoader(Windows(), batch_size=8, num_workers=config['num_workers'])
model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(3):
    for x in loader:
        loss = model(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_workers_read_from_a_dict_of_the_options(tmp_path):
    run = program(tmp_path, {"main.py": DICT_OPTIONS}, select=("LT002",))
    assert found(run) == {("main.py", line_of(DICT_OPTIONS, "loader = DataLoader"), "LT002")}


# ---------------------------------------------------------------- models of a family
JOINT = """
import torch.nn as nn
from transformers.modeling_bert import BertPreTrainedModel, BertModel


class JointBERT(BertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config)
        self.slot_classifier = nn.Linear(768, 9)

    def forward(self, input_ids, attention_mask, slot_labels_ids):
        slot_logits = self.slot_classifier(self.bert(input_ids, attention_mask=attention_mask)[0])
        active_loss = attention_mask.view(-1) == 1
        active_logits = slot_logits.view(-1, 9)[active_loss]
        return nn.functional.cross_entropy(active_logits, slot_labels_ids.view(-1)[active_loss])
"""


def test_a_subclass_of_a_transformers_family_base_is_a_module(tmp_path):
    run = program(tmp_path, {"train.py": TRAIN_ANY.format(model="JointBERT", module="joint"),
                             "joint.py": JOINT}, select=("LT001",))
    # boolean-mask indexing in forward(): found because the class is a module
    assert {("joint.py", line_of(JOINT, "active_logits = "), "LT001"),
            ("joint.py", line_of(JOINT, "slot_labels_ids.view(-1)[active_loss]"), "LT001")} \
        <= found(run)


TRAIN_ANY = """
import torch
from {module} import {model}

device = torch.device("cuda")
model = {model}(None).to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for epoch in range(3):
    for ids, mask, labels in loader:
        loss = model(ids.to(device, non_blocking=True), mask.to(device, non_blocking=True),
                     labels.to(device, non_blocking=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


# ---------------------------------------------------------------- helpers and sums
CAUSAL = """
from functools import lru_cache
import numpy as np
import torch
from torch import nn


@lru_cache(maxsize=64)
def causal_mask(size):
    mask = np.triu(np.ones([size, size]), k=1).astype(np.uint8).T
    return torch.from_numpy(mask).unsqueeze(0), torch.ones(size)


class CausalAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.query = nn.Linear(c, c)

    def forward(self, query, key, mask_in):
        q = self.query(query)
        mask, start_mask = causal_mask(q.shape[1])
        mask = mask.type_as(query)
        return q.masked_fill(mask == 0, -1e4)
"""


def test_a_constant_mask_a_cached_helper_returns_in_a_tuple(tmp_path):
    run = program(tmp_path, {"train.py": TRAIN_ANY.format(model="CausalAttention",
                                                          module="causal"),
                             "causal.py": CAUSAL}, select=("LT012",))
    assert found(run) == {("causal.py", line_of(CAUSAL, "mask = mask.type_as(query)"), "LT012")}
    assert "`causal_mask`" in run.findings[0].message


SUM_TRAIN = """
import torch
from net import Net

device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)


def evaluate(model, loader):
    with torch.no_grad():
        for x in loader:
            out = model.forward(x.to(device, non_blocking=True))
            print(out.sum().item())


for epoch in range(3):
    for x in loader:
        out = model(x.to(device, non_blocking=True))
        losses_dict = {"a": out.sum(), "b": out.mean()}
        loss = sum([l.mean() for l in losses_dict.values()])
        opt.zero_grad()
        loss.backward()
        opt.step()
        logged = loss.cpu().detach().numpy()
    evaluate(model, loader)
"""


def test_a_loss_summed_from_a_dict_and_a_model_called_by_its_forward(tmp_path):
    run = program(tmp_path, {"train.py": SUM_TRAIN, "net.py": NET}, select=("LT001",))
    assert found(run) == {("train.py", line_of(SUM_TRAIN, "loss.cpu()"), "LT001"),
                          ("train.py", line_of(SUM_TRAIN, "out.sum().item()"), "LT001")}


# ---------------------------------------------------------------- models chosen on branches
SEQ_MODELS = """
import torch
from torch import nn


class SeqLabel(nn.Module):
    def __init__(self, data):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def calculate_loss(self, x, y):
        out = self.fc(x)
        return nn.functional.cross_entropy(out, y), out.argmax(1)


class SentClassifier(nn.Module):
    def __init__(self, data):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def calculate_loss(self, x, y):
        out = self.fc(x)
        return nn.functional.cross_entropy(out, y), out.argmax(1)
"""

SEQ_MAIN = """
import torch
from seqmodels import SentClassifier, SeqLabel


def train(data, batches):
    if data.sentence_classification:
        model = SentClassifier(data)
    else:
        model = SeqLabel(data)
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in batches:
            loss, tag_seq = model.calculate_loss(x.cuda(), y.cuda())
            total_loss = loss.item()
            loss.backward()
            optimizer.step()
"""


def test_a_loss_method_of_a_model_class_chosen_on_branches(tmp_path):
    run = program(tmp_path, {"main.py": SEQ_MAIN, "seqmodels.py": SEQ_MODELS},
                  select=("LT001",))
    assert found(run) == {("main.py", line_of(SEQ_MAIN, "loss.item()"), "LT001")}


# ---------------------------------------------------------------- in-memory datasets, conv wrappers
FEATURES = """
import torch
from torch.utils.data import DataLoader, TensorDataset


class Processor:
    def create_dataset(self, features):
        ids = torch.tensor([f.input_ids for f in features], dtype=torch.long)
        labels = torch.tensor([f.label for f in features], dtype=torch.float)
        return TensorDataset(ids, labels)


def run(features, model):
    processor = Processor()
    loader = DataLoader(processor.create_dataset(features), batch_size=32)
    model.cuda()
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(3):
        for ids, labels in loader:
            loss = (model(ids.cuda()) - labels.cuda()).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_a_tensor_dataset_a_factory_builds_needs_no_pinning_nor_workers(tmp_path):
    run = program(tmp_path, {"main.py": FEATURES}, select=("LT002", "LT003"))
    assert found(run) == set()


CONV_WRAPPER = """
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=1, bias=True):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, bias=bias)

    def forward(self, x):
        return self.conv(x)


class EncoderPrenet(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.conv1 = Conv(in_channels=hidden, out_channels=hidden, kernel_size=5)
        self.conv2 = Conv(hidden, hidden, kernel_size=5, bias=False)
        self.batch_norm1 = nn.BatchNorm1d(hidden)
        self.batch_norm2 = nn.BatchNorm1d(hidden)

    def forward(self, x):
        x = self.batch_norm1(self.conv1(x)).relu()
        return self.batch_norm2(self.conv2(x)).relu()
"""


def test_a_conv_wrapper_attribute_that_feeds_a_batchnorm_attribute(tmp_path):
    run = program(tmp_path, {"module.py": CONV_WRAPPER}, select=("LT016",))
    # only the wrapper whose bias stays on (its default)
    assert found(run) == {("module.py", line_of(CONV_WRAPPER, "self.conv1 = Conv("), "LT016")}


METER_TRAIN = """
import torch
from net import Net


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0, 0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
top1, losses = AverageMeter(), AverageMeter()
for epoch in range(3):
    for x, y in loader:
        out = model(x.to(device, non_blocking=True))
        loss = torch.nn.functional.cross_entropy(out, y.to(device, non_blocking=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        top1.update((out.argmax(1) == y.to(device)).float().mean(), x.size(0))
        losses.update(loss.detach().cpu().numpy().mean(), x.size(0))
        msg = "loss {:.4f} top1 {:.3f}".format(losses.avg, top1.avg)
"""


def test_an_average_meter_fed_gpu_tensors_is_read_on_the_host_when_formatted(tmp_path):
    run = program(tmp_path, {"train.py": METER_TRAIN, "net.py": NET}, select=("LT001",))
    assert found(run) == {("train.py", line_of(METER_TRAIN, "loss.detach().cpu()"), "LT001"),
                          ("train.py", line_of(METER_TRAIN, "msg = "), "LT001")}


# ---------------------------------------------------------------- datasets handed to a trainer
HANDED_TRAINER = """
import numpy as np
import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, train_dataset, dev_dataset):
        self.model = model.cuda()
        self.train_dataset, self.dev_dataset = train_dataset, dev_dataset
        self.opt = torch.optim.Adam(self.model.parameters())

    def train(self):
        loader = DataLoader(self.train_dataset, batch_size=32, shuffle=True)
        for epoch in range(3):
            for ids, labels in loader:
                loss = self.model(ids.cuda(), labels.cuda())
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.evaluate()

    def evaluate(self):
        loader = DataLoader(self.dev_dataset, batch_size=64)
        preds = None
        self.model.eval()
        with torch.no_grad():
            for ids, labels in loader:
                logits = self.model(ids.cuda())
                if preds is None:
                    preds = logits.detach().cpu().numpy()
                else:
                    preds = np.append(preds, logits.detach().cpu().numpy(), axis=0)
        return preds
"""

HANDED_MAIN = """
import torch
from torch.utils.data import TensorDataset
from trainer import Trainer
from net import Net


def load_and_cache_examples(features):
    ids = torch.tensor([f.ids for f in features], dtype=torch.long)
    labels = torch.tensor([f.label for f in features], dtype=torch.long)
    return TensorDataset(ids, labels)


def main(args):
    train_dataset = load_and_cache_examples(torch.load(args.train))
    dev_dataset = load_and_cache_examples(torch.load(args.dev))
    trainer = Trainer(Net(), train_dataset, dev_dataset)
    trainer.train()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", default="train.pt")
    parser.add_argument("--dev", default="dev.pt")
    main(parser.parse_args())
"""


def test_tensor_datasets_handed_to_a_trainer_and_predictions_gathered_per_batch(tmp_path):
    run = program(tmp_path, {"main.py": HANDED_MAIN, "trainer.py": HANDED_TRAINER,
                             "net.py": NET}, select=("LT001", "LT002", "LT003"))
    # in-memory datasets: no workers or pinning to ask for; the first batch's `preds`
    # branch runs once, the `else:` on every batch
    assert found(run) == {("trainer.py", line_of(HANDED_TRAINER, "preds = np.append"), "LT001")}


PRIOR = """
import torch
from torch import nn


class TabNetEncoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.attention_dim = d

    def forward(self, x, prior=None):
        if prior is None:
            prior = torch.ones((x.shape[0], self.attention_dim)).to(x.device)
        return self.fc(x) * prior
"""


def test_a_default_filled_in_forward_is_built_on_every_call(tmp_path):
    run = program(tmp_path, {"train.py": TRAIN_ANY.format(model="TabNetEncoder",
                                                          module="prior"),
                             "prior.py": PRIOR}, select=("LT012",))
    assert found(run) == {("prior.py", line_of(PRIOR, "prior = torch.ones"), "LT012")}


CRITERION = """
import torch
from torch import nn


class SetCriterion(nn.Module):
    def forward(self, outputs, targets):
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.as_tensor([num_boxes], dtype=torch.float,
                                    device=next(iter(outputs.values())).device)
        num_boxes = torch.clamp(num_boxes, min=1).item()
        return outputs["pred_logits"].sum() / num_boxes
"""

CRITERION_TRAIN = """
import torch
from torch.utils.tensorboard import SummaryWriter
from criterion import SetCriterion
from net import Net

device = torch.device("cuda")
model, criterion = Net().to(device), SetCriterion()
writer = SummaryWriter()
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        out = model(x.to(device, non_blocking=True))
        loss = criterion({"pred_logits": out}, y)
        l1 = torch.nn.L1Loss()(out, y.to(device, non_blocking=True))
        opt.zero_grad()
        (loss + l1).backward()
        opt.step()
        writer.add_scalars("training_loss", {"l1": l1}, step)
"""


def test_a_tensor_on_the_device_of_the_outputs_and_a_loss_applied_where_built(tmp_path):
    run = program(tmp_path, {"train.py": CRITERION_TRAIN, "criterion.py": CRITERION,
                             "net.py": NET}, select=("LT001",))
    assert found(run) == {("criterion.py", line_of(CRITERION, ".item()"), "LT001"),
                          ("train.py", line_of(CRITERION_TRAIN, "writer.add_scalars"), "LT001")}


MASK_HELPER = """
import torch


def get_non_pad_mask(padded_input, input_lengths):
    non_pad_mask = padded_input.new_ones(padded_input.size()[:-1])
    for i in range(padded_input.size(0)):
        non_pad_mask[i, input_lengths[i]:] = 0
    return non_pad_mask
"""

MASK_TRAIN = """
import torch
from masks import get_non_pad_mask
from net import Net

device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for epoch in range(3):
    for x, lengths in loader:
        x, lengths = x.to(device, non_blocking=True), lengths.to(device, non_blocking=True)
        loss = (model(x) * get_non_pad_mask(x, lengths)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_gpu_length_as_the_bound_of_a_store_in_a_per_batch_helper(tmp_path):
    run = program(tmp_path, {"train.py": MASK_TRAIN, "masks.py": MASK_HELPER, "net.py": NET},
                  select=("LT001",))
    assert found(run) == {("masks.py", line_of(MASK_HELPER, "input_lengths[i]:] = 0"), "LT001")}


# ---------------------------------------------------------------- glue without torch
SELECT_MODEL = """
def define_Model(opt):
    if opt['model'] == 'plain':
        from models.model_plain import ModelPlain as M
    else:
        raise NotImplementedError(opt['model'])
    return M(opt)
"""

MODEL_PLAIN = """
import torch
from torch import nn


class ModelPlain:
    def __init__(self, opt):
        self.netG = nn.Sequential(nn.Conv2d(3, 3, 3), nn.ReLU()).cuda()
        self.G_lossfn = nn.L1Loss().cuda()
        self.G_optimizer = torch.optim.Adam(self.netG.parameters())
        self.log_dict = {}

    def feed_data(self, data):
        self.L = data['L'].cuda(non_blocking=True)
        self.H = data['H'].cuda(non_blocking=True)

    def optimize_parameters(self, current_step):
        self.G_optimizer.zero_grad()
        self.E = self.netG(self.L)
        G_loss = self.G_lossfn(self.E, self.H)
        G_loss.backward()
        self.G_optimizer.step()
        self.log_dict['G_loss'] = G_loss.item()
"""

GLUE_MAIN = """
import argparse
import torch
from torch.utils.data import DataLoader
from models.select_model import define_Model

parser = argparse.ArgumentParser()
parser.add_argument('--opt', default='train.json')
opt = {'model': 'plain'}
model = define_Model(opt)
loader = DataLoader(torch.load('patches.pt'), batch_size=16, num_workers=8, pin_memory=True,
                    persistent_workers=True)
for epoch in range(100):
    for i, train_data in enumerate(loader):
        model.feed_data(train_data)
        model.optimize_parameters(i)
"""


def test_a_model_factory_module_that_names_no_torch_still_links_the_program(tmp_path):
    run = program(tmp_path, {"main_train_psnr.py": GLUE_MAIN,
                             "models/select_model.py": SELECT_MODEL,
                             "models/model_plain.py": MODEL_PLAIN},
                  select=("LT001", "LT005"))
    loop = line_of(GLUE_MAIN, "for i, train_data")
    assert found(run) == {("main_train_psnr.py", loop, "LT005"),
                          ("model_plain.py", line_of(MODEL_PLAIN, "G_loss.item()"), "LT001")}


GRAD_NORM = """
def get_grad_norm(parameters, norm_type=2):
    parameters = list(filter(lambda p: p.grad is not None, parameters))
    total_norm = 0
    for p in parameters:
        param_norm = p.grad.data.norm(norm_type)
        total_norm += param_norm.item() ** norm_type
    return total_norm ** (1. / norm_type)
"""

GRAD_TRAIN = """
import torch
from utils import get_grad_norm
from net import Net

device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for epoch in range(3):
    for x in loader:
        loss = model(x.to(device, non_blocking=True)).sum()
        opt.zero_grad()
        loss.backward()
        grad_norm = get_grad_norm(model.parameters())
        opt.step()
"""


def test_the_parameters_of_a_gpu_model_read_one_by_one_in_a_per_step_helper(tmp_path):
    run = program(tmp_path, {"train.py": GRAD_TRAIN, "utils.py": GRAD_NORM, "net.py": NET},
                  select=("LT001",))
    assert found(run) == {("utils.py", line_of(GRAD_NORM, "param_norm.item()"), "LT001")}


# ---------------------------------------------------------------- look-alikes from review
OWN_LOADER = """
import random


class DataLoader(object):
    def __init__(self, examples, batch_size, shuffle=True):
        self.examples, self.batch_size, self.shuffle = examples, batch_size, shuffle

    def __iter__(self):
        if self.shuffle:
            random.shuffle(self.examples)
        for i in range(0, len(self.examples), self.batch_size):
            yield self.examples[i:i + self.batch_size]
"""

OWN_LOADER_TRAIN = """
import torch
from data import DataLoader
from net import Net

model = Net().cuda()
opt = torch.optim.Adam(model.parameters())
loader = DataLoader([([1.0] * 4, 0)] * 100, batch_size=8)
for epoch in range(3):
    for batch in loader:
        x = torch.tensor([b[0] for b in batch], device="cuda")
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_class_of_the_project_named_dataloader_is_not_torchs(tmp_path):
    run = program(tmp_path, {"train.py": OWN_LOADER_TRAIN, "data.py": OWN_LOADER, "net.py": NET},
                  select=("LT002", "LT003", "LT004"))
    assert found(run) == set()


RESET_EACH_STEP = """
import torch
from net import Net

device = torch.device("cuda")
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                     persistent_workers=True)
for epoch in range(3):
    for x, y in loader:
        weights = None
        if weights is None:
            weights = torch.ones(10).to(device)
        loss = (model(x.to(device, non_blocking=True)).sum() * weights).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

LOADER_KEPT = """
import torch
from net import Net

model = Net().cuda()
opt = torch.optim.Adam(model.parameters())
loader = None
for epoch in range(10):
    if loader is None or epoch == 5:
        loader = torch.utils.data.DataLoader(torch.load("d.pt"), batch_size=8, num_workers=8,
                                             pin_memory=True)
    for x in loader:
        loss = model(x.cuda(non_blocking=True)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_name_reset_every_step_and_a_loader_built_under_a_condition(tmp_path):
    run = program(tmp_path, {"a.py": RESET_EACH_STEP, "net.py": NET}, select=("LT012",))
    assert found(run) == {("a.py", line_of(RESET_EACH_STEP, "torch.ones(10).to(device)"), "LT012")}
    run = program(tmp_path, {"b.py": LOADER_KEPT, "net.py": NET}, select=("LT004",))
    assert found(run) == {("b.py", line_of(LOADER_KEPT, "loader = torch.utils.data.DataLoader"),
                           "LT004")}


DP_RESUME = """
import argparse
import torch
import torch.nn as nn
from net import Net


def train_one_epoch(model, loader, opt):
    for x in loader:
        loss = model(x.cuda(non_blocking=True)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main(args):
    model = nn.DataParallel(Net()).cuda()
    if args.resume:
        model.load_state_dict(torch.load(args.resume))
        model.eval()
    opt = torch.optim.Adam(model.parameters())
    loader = torch.utils.data.DataLoader(torch.load("d.pt"), batch_size=8, num_workers=2,
                                         pin_memory=True, persistent_workers=True)
    for epoch in range(10):
        train_one_epoch(model, loader, opt)


parser = argparse.ArgumentParser()
parser.add_argument("--resume", default="")
main(parser.parse_args())
"""


def test_dataparallel_in_a_function_that_trains_through_a_helper(tmp_path):
    run = program(tmp_path, {"main.py": DP_RESUME, "net.py": NET}, select=("LT015",))
    assert found(run) == {("main.py", line_of(DP_RESUME, "nn.DataParallel(Net())"), "LT015")}


METER_ON_SELF = """
import time
import torch
from net import Net


class Meter:
    def __init__(self):
        self.sum, self.count, self.avg = 0, 0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class Trainer:
    def __init__(self):
        self.model = Net().cuda()
        self.opt = torch.optim.Adam(self.model.parameters())
        self.loss_meter, self.time_meter = Meter(), Meter()

    def fit(self, loader):
        for epoch in range(3):
            for x in loader:
                end = time.time()
                loss = self.model(x.cuda(non_blocking=True)).sum()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.loss_meter.update(loss.detach(), x.size(0))
                self.time_meter.update(time.time() - end)
                print(f"{self.time_meter.avg:.3f}s/it")


Trainer().fit(torch.utils.data.DataLoader(list(range(8)), num_workers=2, pin_memory=True,
                                          persistent_workers=True))
"""

INDEX_FORWARD = """
import torch
from torch import nn


class SegmentPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, index):
        size = int(index.max()) + 1
        return torch.zeros(size, 4, device=x.device).index_add_(0, index, self.fc(x))
"""

STARRED_SPLIT = """
import torch
from torch import nn


def split(o):
    return torch.arange(o.size(0)), torch.zeros(o.size(0)), o.mean(0)


class Head(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, c)

    def forward(self, x, mask_in, labels):
        *_, center = split(self.fc(x))
        center = center.to(x.device)
        return self.fc(x) - center
"""


def test_meters_by_their_own_names_index_tensors_and_starred_targets(tmp_path):
    # a host timer meter beside a GPU loss meter on the same object: no sync
    run = program(tmp_path, {"t.py": METER_ON_SELF, "net.py": NET}, select=("LT001",))
    assert found(run) == set()
    # an index tensor handed to forward() is data, read with int(): a sync
    run = program(tmp_path, {"train.py": TRAIN_ANY.format(model="SegmentPool", module="pool"),
                             "pool.py": INDEX_FORWARD}, select=("LT001",))
    assert ("pool.py", line_of(INDEX_FORWARD, "int(index.max())"), "LT001") in found(run)
    # `*_, center = split(...)`: center is the GPU mean, not the CPU zeros
    run = program(tmp_path, {"train.py": TRAIN_ANY.format(model="Head", module="head"),
                             "head.py": STARRED_SPLIT}, select=("LT012",))
    assert found(run) == set()
