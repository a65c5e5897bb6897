"""Shapes of the eighth round (2026-12-02): losses picked from a dict or called through
their ``forward``, whose values are then formatted or converted every step; a per-step
print whose period is a parameter that defaults to 1."""

from __future__ import annotations

from lint_helpers import found, line_of, program

SPEAKER_TRAINER = """
import torch
from tqdm import tqdm


def train_model(model, db_gen, optimizer, epoch, device, criterion):
    model.train()
    with tqdm(total=len(db_gen), ncols=70) as pbar:
        for m_batch, m_label in db_gen:
            m_batch, m_label = m_batch.to(device), m_label.to(device)
            output = model(m_batch, m_label)
            cce_loss = criterion["cce"](output, m_label)
            loss = cce_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            pbar.set_description("epoch: %d, cce:%.3f" % (epoch, cce_loss))
            pbar.update(1)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 4).to(device)
    loader = torch.utils.data.DataLoader(range(8), batch_size=2, num_workers=2,
                                         pin_memory=True)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = {"cce": torch.nn.CrossEntropyLoss()}
    for epoch in range(10):
        train_model(model, loader, optimizer, epoch, device, criterion)


if __name__ == "__main__":
    main()
"""


def test_a_loss_taken_from_a_dict_of_losses_gives_a_gpu_tensor(tmp_path):
    run = program(tmp_path, {"train.py": SPEAKER_TRAINER})
    assert ("train.py", line_of(SPEAKER_TRAINER, '"epoch: %d, cce:%.3f" %'), "LT001") \
        in found(run, "LT001")


EPOCH_RUNNER = """
import torch


def train_epoch(cur_epoch, model, dataloader, loss, opt, lr_scheduler=None, print_modulus=1):
    model.train()
    for batch_num, batch in enumerate(dataloader):
        opt.zero_grad()
        x = batch[0].to(get_device())
        tgt = batch[1].to(get_device())
        y = model(x)
        out = loss.forward(y.reshape(-1, y.shape[-1]), tgt.flatten())
        out.backward()
        opt.step()
        if (batch_num + 1) % print_modulus == 0:
            print("Train loss:", float(out))


def eval_model(model, dataloader, loss):
    model.eval()
    with torch.set_grad_enabled(False):
        sum_loss = 0.0
        for batch in dataloader:
            x = batch[0].to(get_device())
            tgt = batch[1].to(get_device())
            y = model(x)
            out = loss.forward(y.reshape(-1, y.shape[-1]), tgt.flatten())
            sum_loss += float(out)
    return sum_loss / len(dataloader)


def get_device():
    return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
"""

EPOCH_SCRIPT = """
import argparse

import torch
from torch.utils.data import DataLoader

from run_model import eval_model, get_device, train_epoch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-print_modulus", type=int, default=1)
    parser.add_argument("-n_workers", type=int, default=1)
    args = parser.parse_args()
    model = torch.nn.Embedding(10, 10).to(get_device())
    train_loader = DataLoader(range(8), batch_size=2, num_workers=args.n_workers,
                              pin_memory=True, persistent_workers=True)
    opt = torch.optim.Adam(model.parameters())
    loss_func = torch.nn.CrossEntropyLoss()
    for epoch in range(5):
        train_epoch(epoch + 1, model, train_loader, loss_func, opt, None, args.print_modulus)
        eval_model(model, train_loader, loss_func)


if __name__ == "__main__":
    main()
"""


def test_a_loss_called_through_its_forward_is_read_every_step(tmp_path):
    run = program(tmp_path, {"train.py": EPOCH_SCRIPT, "run_model.py": EPOCH_RUNNER})
    got = found(run, "LT001")
    # the print's period is a parameter whose default is 1 (and the option's too)
    assert ("run_model.py", line_of(EPOCH_RUNNER, 'print("Train loss:", float(out))'),
            "LT001") in got
    assert ("run_model.py", line_of(EPOCH_RUNNER, "sum_loss += float(out)"), "LT001") in got


ALIGNER = """
import torch
import torch.nn.functional as F


def length_to_mask(lengths):
    mask = torch.arange(lengths.max()).unsqueeze(0).expand(lengths.shape[0], -1)
    return torch.gt(mask.type_as(lengths) + 1, lengths.unsqueeze(1))


def train(model, loader, optimizer, device):
    for epoch in range(100):
        for batch in loader:
            mels, mel_lengths = [b.to(device, non_blocking=True) for b in batch]
            mask = length_to_mask(mel_lengths)
            steps = torch.arange(mels.size(-1), device=device)
            out = model(mels)
            loss = F.l1_loss(out.masked_fill(mask.unsqueeze(1), 0), mels) + steps.sum() * 0
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    dev = torch.device("cuda")
    net = torch.nn.Conv1d(80, 80, 3, padding=1).to(dev)
    data = torch.utils.data.DataLoader(range(8), num_workers=2, pin_memory=True,
                                       persistent_workers=True)
    train(net, data, torch.optim.Adam(net.parameters()), dev)
"""


def test_a_gpu_tensor_given_as_a_size_is_read_on_the_host(tmp_path):
    run = program(tmp_path, {"train.py": ALIGNER})
    got = {line for path, line, _ in found(run, "LT001")}
    assert line_of(ALIGNER, "torch.arange(lengths.max())") in got
    # a size the host already has (`mels.size(-1)`) is no sync
    assert line_of(ALIGNER, "torch.arange(mels.size(-1)") not in got


VERIFICATION_TRAINER = """
import torch


def train_model(model, db_gen, optimizer, epoch, device):
    model.train()
    for m_batch, m_label in db_gen:
        m_batch, m_label = m_batch.to(device), m_label.to(device)
        loss = torch.nn.functional.cross_entropy(model(m_batch), m_label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

VERIFICATION_SCRIPT = """
import torch
from torch.utils import data

from trainer import *


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    devset_gen = data.DataLoader(range(8),
        batch_size = 2,
        shuffle = True,
        num_workers = 4)
    model = torch.nn.Linear(3, 3).to(device)
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        train_model(model = model, db_gen = devset_gen, optimizer = opt, epoch = epoch,
                    device = device)


if __name__ == "__main__":
    main()
"""


def test_a_loader_handed_to_a_star_imported_function_feeds_the_gpu(tmp_path):
    run = program(tmp_path, {"main.py": VERIFICATION_SCRIPT, "trainer.py": VERIFICATION_TRAINER})
    assert ("main.py", line_of(VERIFICATION_SCRIPT, "data.DataLoader("), "LT003") \
        in found(run, "LT003")


TEXT_ENCODER = """
import torch
from torch import nn


class TextEncoder(nn.Module):
    def __init__(self, channels=8, n_symbols=10):
        super().__init__()
        self.embedding = nn.Embedding(n_symbols, channels)
        self.lstm = nn.LSTM(channels, channels // 2, batch_first=True, bidirectional=True)

    def forward(self, x, input_lengths, m):
        x = self.embedding(x)
        x, _ = self.lstm(x)
        x = x.transpose(-1, -2)
        x_pad = torch.zeros([x.shape[0], x.shape[1], m.shape[-1]])
        x_pad[:, :, :x.shape[-1]] = x
        x = x_pad.to(x.device)
        return x.masked_fill(m.unsqueeze(1), 0.0)


def main():
    model = TextEncoder().cuda()
    loader = torch.utils.data.DataLoader(range(8), num_workers=2, pin_memory=True,
                                         persistent_workers=True)
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(3):
        for texts, lengths, mask in loader:
            texts = texts.cuda(non_blocking=True)
            out = model(texts, lengths, mask.cuda(non_blocking=True))
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
"""


def test_a_recurrent_layers_output_stored_into_a_host_buffer_is_a_sync(tmp_path):
    run = program(tmp_path, {"train.py": TEXT_ENCODER})
    assert ("train.py", line_of(TEXT_ENCODER, "x_pad[:, :, :x.shape[-1]] = x"), "LT001") \
        in found(run, "LT001")


TRAFFIC_UTIL = """
import numpy as np


class DataLoader(object):
    def __init__(self, xs, ys, batch_size):
        self.batch_size = batch_size
        self.current_ind = 0
        self.size = len(xs)
        self.num_batch = int(self.size // self.batch_size)
        self.xs = xs
        self.ys = ys

    def shuffle(self):
        permutation = np.random.permutation(self.size)
        self.xs, self.ys = self.xs[permutation], self.ys[permutation]

    def get_iterator(self):
        self.current_ind = 0

        def _wrapper():
            while self.current_ind < self.num_batch:
                start = self.batch_size * self.current_ind
                yield (self.xs[start:start + self.batch_size], self.ys[start:start + self.batch_size])
                self.current_ind += 1

        return _wrapper()


def load_dataset(batch_size):
    data = {}
    for category in ["train", "val"]:
        data[category + "_loader"] = DataLoader(np.zeros((64, 12)), np.zeros((64, 1)), batch_size)
    return data
"""

TRAFFIC_TRAIN = """
import argparse

import torch

import util


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=str, default="cuda:0")
    args = parser.parse_args()
    device = torch.device(args.device)
    dataloader = util.load_dataset(64)
    model = torch.nn.Linear(12, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(100):
        dataloader["train_loader"].shuffle()
        for it, (x, y) in enumerate(dataloader["train_loader"].get_iterator()):
            trainx = torch.Tensor(x).to(device)
            trainy = torch.Tensor(y).to(device)
            optimizer.zero_grad()
            loss = torch.nn.functional.l1_loss(model(trainx), trainy)
            loss.backward()
            optimizer.step()
        valid_loss = []
        model.eval()
        for it, (x, y) in enumerate(dataloader["val_loader"].get_iterator()):
            testx = torch.Tensor(x).to(device)
            testy = torch.Tensor(y).to(device)
            valid_loss.append(torch.nn.functional.l1_loss(model(testx), testy).item())


if __name__ == "__main__":
    main()
"""


def test_a_hand_written_loaders_iterator_is_a_batch_loop(tmp_path):
    run = program(tmp_path, {"train.py": TRAFFIC_TRAIN, "util.py": TRAFFIC_UTIL})
    # the validation loop trains nothing: only its batches make it an evaluation loop
    assert ("train.py", line_of(TRAFFIC_TRAIN, "valid_loss.append("), "LT001") in found(run, "LT001")
    assert ("train.py", line_of(TRAFFIC_TRAIN, "testx = torch.Tensor(x).to(device)"), "LT012") \
        in found(run, "LT012")
    assert any(code == "LT013" for _, _, code in found(run, "LT013"))


SEGMENTATION_EVAL = """
import torch
import torch.distributed as dist
from tqdm import tqdm


class MscEval(object):
    def __init__(self, n_classes):
        self.n_classes = n_classes

    @torch.no_grad()
    def __call__(self, net, dl):
        hist = torch.zeros(self.n_classes, self.n_classes).cuda()
        if dist.is_initialized() and dist.get_rank() != 0:
            diter = enumerate(dl)
        else:
            diter = enumerate(tqdm(dl))
        for i, (imgs, label) in diter:
            label = label.squeeze(1).cuda()
            probs = torch.zeros((imgs.shape[0], self.n_classes, *label.shape[-2:])).cuda()
            probs += net(imgs.cuda()).softmax(dim=1)
            keep = label != 255
            hist += torch.bincount(label[keep] * self.n_classes + probs.argmax(1)[keep],
                                   minlength=self.n_classes ** 2).view(self.n_classes, -1)
        return hist


def evaluate(net, dl):
    net.eval()
    return MscEval(19)(net, dl)
"""


def test_a_loader_enumerated_on_both_branches_of_an_if_is_a_batch_loop(tmp_path):
    run = program(tmp_path, {"evaluate.py": SEGMENTATION_EVAL})
    assert ("evaluate.py", line_of(SEGMENTATION_EVAL, "probs = torch.zeros("), "LT012") \
        in found(run, "LT012")


PACKED_ENCODER = TEXT_ENCODER.replace(
    "        x, _ = self.lstm(x)\n",
    "        x = nn.utils.rnn.pack_padded_sequence(x, input_lengths.cpu().numpy(),\n"
    "                                           batch_first=True, enforce_sorted=False)\n"
    "        x, _ = self.lstm(x)\n"
    "        x, _ = nn.utils.rnn.pad_packed_sequence(x, batch_first=True)\n")


def test_a_packed_sequence_through_an_unseen_layer_stays_on_the_gpu(tmp_path):
    assert PACKED_ENCODER != TEXT_ENCODER
    run = program(tmp_path, {"train.py": PACKED_ENCODER})
    assert ("train.py", line_of(PACKED_ENCODER, "x_pad[:, :, :x.shape[-1]] = x"), "LT001") \
        in found(run, "LT001")
