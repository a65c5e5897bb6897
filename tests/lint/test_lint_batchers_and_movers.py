"""Shapes of the ninth round (2026-12-02): an evaluation loop that pulls batches from a
hand-written batcher (`while batch is not None: ... batch = batcher.next_batch()`); a helper
whose only job is to move its argument to the GPU; window functions moved per call; a
model's own method run per batch; a flag of an overriding method that the base class's
caller turns on; loader subclasses of an aliased torch loader; layers built under an
opt-in flag; `if kwargs:`; an evaluation run under no_grad except in an opt-in mode."""

from __future__ import annotations

from lint_helpers import found, line_of, program

BATCHER_EVAL = {
    "batcher.py": """
import queue


class Batcher:
    def __init__(self, path, batch_size):
        self.q = queue.Queue(16)

    def next_batch(self):
        return self.q.get()
""",
    "nets.py": """
import torch
import torch.nn as nn

use_cuda = torch.cuda.is_available()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return self.proj(x)


class Bundle(object):
    def __init__(self, path=None):
        encoder = Encoder()
        if use_cuda:
            encoder = encoder.cuda()
        self.encoder = encoder
""",
    "evaluate.py": """
import torch
from batcher import Batcher
from nets import Bundle

use_cuda = torch.cuda.is_available()


class Evaluator(object):
    def __init__(self, path):
        self.batcher = Batcher(path, batch_size=16)
        self.model = Bundle(path)

    def one_batch(self, batch):
        feats = torch.from_numpy(batch.feats).float()
        state = torch.zeros(feats.size(0), 16)
        if use_cuda:
            feats = feats.cuda()
            state = state.cuda()
        out = self.model.encoder(feats) + state
        return out.mean().item()

    def run_eval(self):
        total, n = 0.0, 0
        batch = self.batcher.next_batch()
        while batch is not None:
            total += self.one_batch(batch)
            n += 1
            batch = self.batcher.next_batch()
        return total / max(n, 1)


if __name__ == "__main__":
    Evaluator("ckpt").run_eval()
""",
}


def test_an_evaluation_loop_over_a_hand_written_batcher_is_hot(tmp_path):
    run = program(tmp_path, BATCHER_EVAL)
    text = BATCHER_EVAL["evaluate.py"]
    assert ("evaluate.py", line_of(text, "out.mean().item()"), "LT001") in found(run, "LT001")
    assert ("evaluate.py", line_of(text, "state = state.cuda()"), "LT012") in found(run, "LT012")
    # a `while` evaluation loop is held to no_grad as a `for` loop is
    assert ("evaluate.py", line_of(text, "while batch is not None:"), "LT013") \
        in found(run, "LT013")


MOVER_HELPER = """
import torch
from torch.autograd import Variable


class GanTrainer:
    def __init__(self, gen, critic, loader, cuda=True):
        self.gen, self.critic, self.loader = gen.cuda(), critic.cuda(), loader
        self.cuda = cuda
        self.device_index = 0
        self.opt = torch.optim.Adam(critic.parameters())

    def to_var(self, t):
        if self.cuda:
            return Variable(t).cuda(self.device_index)
        return Variable(t)

    def train(self):
        for images in self.loader:
            noise = torch.randn((images.size(0), 64, 1, 1))
            images, noise = self.to_var(images), self.to_var(noise)
            loss = self.critic(images).mean() - self.critic(self.gen(noise)).mean()
            extra = self.to_var(torch.rand(images.size(0), 64, 1, 1))
            labels = self.to_var(torch.tensor(images.size(0) * [1]))
            loss = loss + self.critic(self.gen(extra)).mean() + labels.sum()
            loss.backward()
            self.opt.step()
"""


def test_a_tensor_built_on_the_cpu_and_moved_by_a_helper_is_flagged_at_the_call(tmp_path):
    run = program(tmp_path, {"gan.py": MOVER_HELPER})
    hits = found(run, "LT012")
    assert ("gan.py", line_of(MOVER_HELPER, "self.to_var(images), self.to_var(noise)"),
            "LT012") in hits
    assert ("gan.py", line_of(MOVER_HELPER, "extra = self.to_var("), "LT012") in hits
    # the batch itself has to go up, and so does a tensor of data (not a factory of sizes)
    assert ("gan.py", line_of(MOVER_HELPER, "labels = self.to_var("), "LT012") not in hits
    assert len([h for h in hits if h[0] == "gan.py"]) == 2


WINDOW = """
import torch
import torch.nn as nn


def spectrum(y, n_fft=512):
    return torch.stft(y, n_fft, window=torch.hann_window(n_fft).to(y.device),
                      return_complex=True).abs()


class Scorer(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(32, 1)

    def forward(self, wave):
        return self.head(self.encoder(spectrum(wave))).squeeze(-1)


def train(model, loader, opt):
    model = model.cuda()
    for wave, target in loader:
        wave, target = wave.cuda(), target.cuda()
        loss = (model(wave) - target).abs().mean()
        loss.backward()
        opt.step()
"""


def test_a_window_built_on_the_cpu_and_moved_to_the_input_device_per_call(tmp_path):
    run = program(tmp_path, {"model.py": WINDOW})
    assert ("model.py", line_of(WINDOW, "torch.hann_window(n_fft).to(y.device)"), "LT012") \
        in found(run, "LT012")


OVERRIDDEN_FLAG = """
import torch


class BaseTrainer:
    def __init__(self, model, train_loader, eval_loader):
        self.model = model.cuda()
        self.train_loader, self.eval_loader = train_loader, eval_loader
        self.optim = torch.optim.Adam(model.parameters())

    def train(self, epoch):
        self.iteration(epoch, self.train_loader)

    def valid(self, epoch, full_sort=False):
        return self.iteration(epoch, self.eval_loader, full_sort, train=False)

    def iteration(self, epoch, loader, full_sort=False, train=True):
        raise NotImplementedError


class SeqTrainer(BaseTrainer):
    def iteration(self, epoch, loader, full_sort=False, train=True):
        if train:
            for batch in loader:
                loss = self.model(batch.cuda()).mean()
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
            return None
        self.model.eval()
        preds = []
        if full_sort:
            for batch in loader:
                out = self.model.score_all(batch.cuda())
                preds.append(out.cpu().numpy())
        return preds


def main(model, train_loader, eval_loader):
    trainer = SeqTrainer(model, train_loader, eval_loader)
    for epoch in range(10):
        trainer.train(epoch)
        trainer.valid(epoch, full_sort=True)


if __name__ == "__main__":
    main(None, None, None)
"""


def test_a_flag_the_base_class_caller_turns_on_is_not_opt_in(tmp_path):
    run = program(tmp_path, {"trainers.py": OVERRIDDEN_FLAG})
    text = OVERRIDDEN_FLAG
    # `self.model.score_all(x)`: a method of the model runs it, so the loop evaluates
    assert ("trainers.py", line_of(text, "preds.append(out.cpu().numpy())"), "LT001") \
        in found(run, "LT001")
    assert ("trainers.py", line_of(text, "if full_sort:") + 1, "LT013") in found(run, "LT013")


def test_a_flag_no_caller_turns_on_stays_opt_in(tmp_path):
    text = OVERRIDDEN_FLAG.replace("trainer.valid(epoch, full_sort=True)",
                                   "trainer.valid(epoch)")
    run = program(tmp_path, {"trainers.py": text})
    assert not [h for h in found(run, "LT001")
                if h[1] == line_of(text, "preds.append(out.cpu().numpy())")]


CAPTION_TRAINER = {
    "data/__init__.py": """
from torch.utils.data import DataLoader as TorchDataLoader


class DataLoader(TorchDataLoader):
    def __init__(self, dataset, *args, **kwargs):
        super().__init__(dataset, *args, collate_fn=dataset.collate_fn(), **kwargs)
""",
    "data/field.py": """
import torch

_DTYPES = {
    torch.float32: float,
    torch.float16: float,
    torch.int64: int,
}


def python_type(dtype):
    return _DTYPES[dtype]
""",
    "train.py": """
import argparse

import torch
from torch import nn
from data import DataLoader
from data.field import python_type


def train_xe(model, dataloader, optim, device):
    model.train()
    for it, (x, y) in enumerate(dataloader):
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optim.zero_grad()
        loss.backward()
        optim.step()


if __name__ == "__main__":
    device = torch.device("cuda")
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    model = nn.Linear(4, 4).to(device)
    optim = torch.optim.Adam(model.parameters())
    for e in range(100):
        loader = DataLoader(list(range(10)), batch_size=8, shuffle=True,
                            num_workers=args.workers)
        train_xe(model, loader, optim, device)
""",
}


def test_a_loader_subclass_of_an_aliased_torch_loader_and_a_dtype_table(tmp_path):
    run = program(tmp_path, CAPTION_TRAINER)
    text = CAPTION_TRAINER["train.py"]
    line = line_of(text, "loader = DataLoader(")
    # the project's DataLoader subclasses torch's under another name: a torch loader
    assert ("train.py", line, "LT002") in found(run, "LT002")
    assert ("train.py", line, "LT003") in found(run, "LT003")
    # a table keyed by dtype sets no precision: the program trains in fp32
    assert found(run, "LT006")


FUSION_BLOCK = """
import argparse

import torch
import torch.nn as nn


class AudioNet(nn.Module):
    def __init__(self, enable_fusion=False):
        super().__init__()
        self.enable_fusion = enable_fusion
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, bias=False), nn.BatchNorm2d(8))
        if self.enable_fusion:
            self.fuse = nn.Sequential(nn.Conv1d(8, 8, 5), nn.BatchNorm1d(8))
        self.head = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8))

    def forward(self, x):
        return self.head(self.stem(x))


class LibraryBlock(nn.Module):
    def __init__(self, use_proj=False):
        super().__init__()
        if use_proj:
            self.proj = nn.Sequential(nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--enable-fusion", action="store_true")
    args = parser.parse_args()
    return AudioNet(enable_fusion=args.enable_fusion)


if __name__ == "__main__":
    main()
"""


def test_a_conv_built_only_under_an_opt_in_flag_is_not_flagged(tmp_path):
    run = program(tmp_path, {"net.py": FUSION_BLOCK})
    hits = found(run, "LT016")
    assert ("net.py", line_of(FUSION_BLOCK, "self.head = nn.Sequential("), "LT016") in hits
    assert ("net.py", line_of(FUSION_BLOCK, "self.fuse = nn.Sequential("), "LT016") not in hits
    # a library block that nobody here builds: its option is judged as written
    assert ("net.py", line_of(FUSION_BLOCK, "self.proj = nn.Sequential("), "LT016") in hits


ACCUMULATED_CONTRAST = """
import torch


class Trainer:
    def __init__(self, model, loader, opt, accumulate=4):
        self.model, self.loader, self.opt, self.accumulate = model.cuda(), loader, opt, accumulate

    def train(self):
        self.model.eval()
        for i in range(self.accumulate):
            batch = next(self.loader).cuda()
            self.model.contrast(batch, accumulate=True)
        loss = self.model.contrast_loss()
        loss.backward()
        self.opt.step()
"""


def test_a_model_method_whose_result_is_trained_on_after_the_loop_is_no_evaluation(tmp_path):
    run = program(tmp_path, {"trainer.py": ACCUMULATED_CONTRAST})
    assert not found(run, "LT013")


KWARGS_TEST = """
import torch


class WeightedLoss:
    def __call__(self, pred, **kwargs):
        if kwargs:
            pred = pred * kwargs["weight"]
        return pred.mean()


def train(model, loader, opt):
    loss_fn = WeightedLoss()
    model = model.cuda()
    for x, w in loader:
        x, w = x.cuda(), w.cuda()
        loss = loss_fn(model(x), weight=w)
        loss.backward()
        opt.step()
"""


def test_the_truth_of_a_kwargs_dict_of_gpu_tensors_is_no_sync(tmp_path):
    run = program(tmp_path, {"train.py": KWARGS_TEST})
    assert ("train.py", line_of(KWARGS_TEST, "if kwargs:"), "LT001") not in found(run, "LT001")


EVALUATE_MODE = """
import argparse

import torch


def validate(val_loader, model):
    model.eval()
    total = 0.0
    for x, y in val_loader:
        total += (model(x.cuda()) - y.cuda()).abs().mean()
    return total


def train(train_loader, model, opt):
    model.train()
    for x, y in train_loader:
        loss = (model(x.cuda()) - y.cuda()).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluate", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(range(8), num_workers=2, pin_memory=True)
    if args.evaluate:
        validate(loader, model)
        return
    for epoch in range(10):
        train(loader, model, opt)
        with torch.no_grad():
            validate(loader, model)


if __name__ == "__main__":
    main()
"""


def test_an_evaluation_under_no_grad_but_in_an_opt_in_mode_is_not_flagged(tmp_path):
    run = program(tmp_path, {"main.py": EVALUATE_MODE})
    assert not found(run, "LT013")
    # without the no_grad of the default run it is
    text = EVALUATE_MODE.replace("        with torch.no_grad():\n            validate",
                                 "        if True:\n            validate")
    run = program(tmp_path / "again", {"main.py": text})
    assert found(run, "LT013")


EDICT_CONFIG = {
    "config.py": """
import torch
from easydict import EasyDict as edict


def get_config(training=True):
    conf = edict()
    conf.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    conf.batch_size = 64
    if training:
        conf.pin_memory = True
    return conf


def get_eval_config():
    conf = edict()
    conf.num_workers = 0
    return conf


def get_train_config():
    conf = edict()
    conf.num_workers = 4
    return conf
""",
    "train.py": """
import torch
from torch.utils.data import DataLoader
from config import get_config


def train(conf, model, dataset, opt):
    loader = DataLoader(dataset, batch_size=conf.batch_size, shuffle=True,
                        pin_memory=conf.pin_memory, num_workers=conf.num_workers)
    model = model.to(conf.device)
    for epoch in range(10):
        for imgs, labels in loader:
            imgs = imgs.to(conf.device)
            loss = torch.nn.functional.cross_entropy(model(imgs), labels.to(conf.device))
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    conf = get_config()
    train(conf, torch.nn.Linear(4, 4), list(range(8)), None)
""",
}


def test_fields_of_a_config_object_a_function_builds_are_settings(tmp_path):
    run = program(tmp_path, EDICT_CONFIG)
    text = EDICT_CONFIG["train.py"]
    # `conf.pin_memory = True` in get_config(): the loader pins, so the copies can overlap
    assert ("train.py", line_of(text, "imgs = imgs.to(conf.device)"), "LT008") in found(run, "LT008")
    # `num_workers` is 0 in one builder and 4 in another: no one default, nothing said
    assert not found(run, "LT002")


MULTI_GPU_OPTION = """
import argparse

import torch


def train(args, model, loader, opt):
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        if args.n_gpu > 1:
            print(loss.item())
        if args.replicas > 1:
            print(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_gpu", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=4)
    args = parser.parse_args()
    model = torch.nn.Linear(4, 4).cuda()
    loader = torch.utils.data.DataLoader(range(8), num_workers=2, pin_memory=True)
    train(args, model, loader, torch.optim.SGD(model.parameters(), lr=0.1))


if __name__ == "__main__":
    main()
"""


def test_code_under_a_count_above_one_with_a_default_of_one_is_opt_in(tmp_path):
    run = program(tmp_path, {"train.py": MULTI_GPU_OPTION})
    lines = {line for _, line, _ in found(run, "LT001")}
    text = MULTI_GPU_OPTION
    assert line_of(text, "if args.n_gpu > 1:") + 1 not in lines  # --n_gpu 1 unless asked
    assert line_of(text, "if args.replicas > 1:") + 1 in lines  # 4 by default: it runs


RETINA_STYLE_LOSS = """
import torch
from torch.autograd import Variable

try:
    autocast = torch.cuda.amp.autocast
except AttributeError:
    autocast = None


def multibox(conf, target):
    pos = target > 0
    num_pos = max(pos.sum().float(), 1)
    n = max(len(target), 1)
    return (conf * pos).sum() / num_pos / n


def pad(x, k):
    extra = torch.Tensor(torch.zeros(x.size(0), k)).type(x.type())
    return torch.cat([x, extra], 1)


def train(model, loader, opt):
    model = model.cuda()
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with autocast(enabled=True):
            loss = multibox(model(pad(x, 4)), y)
        loss.backward()
        opt.step()
"""


def test_python_max_against_a_number_an_input_typed_pad_and_an_autocast_alias(tmp_path):
    run = program(tmp_path, {"train.py": RETINA_STYLE_LOSS})
    text = RETINA_STYLE_LOSS
    assert ("train.py", line_of(text, "num_pos = max("), "LT001") in found(run, "LT001")
    assert ("train.py", line_of(text, "n = max(len(target), 1)"), "LT001") not in found(run, "LT001")
    assert ("train.py", line_of(text, "extra = torch.Tensor("), "LT012") in found(run, "LT012")
    assert ("train.py", line_of(text, "with autocast(enabled=True):"), "LT007") \
        in found(run, "LT007")


WRAPPED_CONVS = """
import torch.nn as nn
from layers import SpectralNorm


class _BatchNorm2d(nn.BatchNorm2d):
    def __init__(self, n):
        super().__init__(n, eps=1e-6, momentum=0.05)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Sequential(SpectralNorm(nn.ConvTranspose2d(100, 64, 4)), nn.BatchNorm2d(64))
        self.mid = nn.Sequential(nn.utils.spectral_norm(nn.Conv2d(64, 64, 3, bias=False)),
                                 nn.BatchNorm2d(64))
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 11, 2), _BatchNorm2d(64))

    def forward(self, z):
        return self.mid(self.up(z))
"""


def test_conv_bias_inside_spectral_norm_and_before_a_batchnorm_subclass(tmp_path):
    run = program(tmp_path, {"gen.py": WRAPPED_CONVS})
    lines = {line for _, line, _ in found(run, "LT016")}
    assert line_of(WRAPPED_CONVS, "self.up = ") in lines
    assert line_of(WRAPPED_CONVS, "self.stem = ") in lines
    assert line_of(WRAPPED_CONVS, "self.mid = ") not in lines  # bias=False already


CAPITAL_CONFIG = {
    "Config.py": """
print_frequency = 1
epochs = 100
""",
    "train.py": """
import torch
import Config as config


def train_one_epoch(loader, model, opt):
    for i, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = (model(x) - y).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % config.print_frequency == 0:
            print("loss {:.4f}".format(loss))


def main(loader):
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(config.epochs):
        train_one_epoch(loader, model, opt)


if __name__ == "__main__":
    main([])
""",
}


def test_a_config_module_named_with_a_capital_is_read(tmp_path):
    run = program(tmp_path, CAPITAL_CONFIG)
    # `print_frequency = 1` in Config.py: the print runs on every step
    assert ("train.py", line_of(CAPITAL_CONFIG["train.py"], 'print("loss {:.4f}"'), "LT001") \
        in found(run, "LT001")


OUTPUTS_AND_OPTIONS = """
import argparse

import torch


class Trainer:
    def __init__(self, opt, model, loader, sched):
        self.ngpu = opt.ngpu
        self.model, self.loader, self.sched = model.cuda(), loader, sched

    def evaluate(self):
        preds = []
        for batch in self.loader:
            model_out = batch["logits"].cuda()
            preds.append(model_out.argmax(-1))
        return preds

    def validate(self):
        scores = []
        for x in self.loader:
            out = self.model.score_all(x.cuda())
            scores.append(out.cpu().numpy())
        self.sched.step()
        return scores

    def train(self, opt, args):
        for x in self.loader:
            loss = self.model(x.cuda()).mean()
            loss.backward()
            opt.step()
            if self.ngpu > 1:
                print(loss.item())
            if args.n_gpu > 1:
                print(loss.item())
        if args.tta > 1:
            for x in self.loader:
                print(self.model(x.cuda()).mean().item())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ngpu", type=int, default=1)
    parser.add_argument("--n_gpu", type=int, default=1)
    parser.add_argument("--tta", type=int, default=1)
    args = parser.parse_args()
    args.n_gpu = torch.cuda.device_count()
    trainer = Trainer(args, torch.nn.Linear(4, 4), [], None)
    trainer.train(torch.optim.SGD(trainer.model.parameters(), lr=0.1), args)
    trainer.evaluate()
    trainer.validate()


if __name__ == "__main__":
    main()
"""


def test_outputs_named_like_models_options_overwritten_and_loops_under_a_level(tmp_path):
    run = program(tmp_path, {"train.py": OUTPUTS_AND_OPTIONS})
    text = OUTPUTS_AND_OPTIONS
    lt013 = {line for _, line, _ in found(run, "LT013")}
    lt001 = {line for _, line, _ in found(run, "LT001")}
    # `model_out.argmax(-1)`: a tensor's method, no model runs: no evaluation loop
    assert line_of(text, "for batch in self.loader:") not in lt013
    # a scheduler stepping after the loop trains nothing the loop built
    assert line_of(text, "scores.append(out.cpu().numpy())") in lt001
    # `self.ngpu = opt.ngpu`, --ngpu 1 by default: the print is the multi-GPU path's
    assert line_of(text, "if self.ngpu > 1:") + 1 not in lt001
    # `args.n_gpu = torch.cuda.device_count()`: the machine decides, not the default
    assert line_of(text, "if args.n_gpu > 1:") + 1 in lt001
    # a whole loop under `if args.tta > 1:` runs whenever asked and is linted as a loop
    assert line_of(text, "print(self.model(x.cuda()).mean().item())") in lt001

