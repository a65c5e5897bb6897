"""Idioms of real training code, each written here in its own shape: the legacy CUDA
tensor types (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`), a
`--gpu` switch that defaults to False, devices chosen on several paths, layer lists built
with `append`/`+=`, conv wrappers, parameters read per step, losses gathered in dicts and
lists, syncs inside a model's or a loss's forward, configs of other frameworks, scripts
named like tests, tensors computed on the CPU inside a loss and then moved."""

from __future__ import annotations

import textwrap

from lint_helpers import found, program

from pitstop.lint import lint_source

GAN = """\
import argparse
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

ap = argparse.ArgumentParser()
ap.add_argument("--n_epochs", type=int, default=100)
ap.add_argument("--latent", type=int, default=64)
cfg = ap.parse_args()
on_gpu = True if torch.cuda.is_available() else False
G = nn.Sequential(nn.Linear(cfg.latent, 512), nn.ReLU(), nn.Linear(512, 1024))
D = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 1))
if on_gpu:
    G.cuda()
    D.cuda()
FloatT = torch.cuda.FloatTensor if on_gpu else torch.FloatTensor
LongT = torch.cuda.LongTensor if on_gpu else torch.LongTensor
pairs = DataLoader(MyImages("data/"), batch_size=32, shuffle=True, num_workers=4,
                   persistent_workers=True)
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())


def penalty(critic, real, fake):
    mix = FloatT(np.random.random((real.size(0), 1)))
    blend = (mix * real + (1 - mix) * fake).requires_grad_(True)
    return critic(blend).mean()


for epoch in range(cfg.n_epochs):
    for k, (pics, tags) in enumerate(pairs):
        real = pics.view(pics.size(0), -1).type(FloatT)
        tags = tags.type(LongT)
        ones = FloatT(pics.size(0), 1).fill_(1.0)
        zeros = torch.zeros(pics.size(0), 1).type(FloatT)
        noise = FloatT(0.5 * np.random.normal(0, 1, (pics.shape[0], cfg.latent)))
        picks = [FloatT(np.eye(10)[t]) for t in range(3)]
        opt_d.zero_grad(set_to_none=True)
        loss_d = D(real).mean() - D(G(noise).detach()).mean() + penalty(D, real, G(noise))
        loss_d.backward()
        opt_d.step()
"""


def _lines(src: str, code: str) -> list[int]:
    return sorted(f.line for f in lint_source(src, "gan.py") if f.code == code)


def test_legacy_cuda_tensor_types_put_batches_and_noise_on_the_gpu() -> None:
    # `pics.type(FloatT)` copies each batch to the GPU: the loader should pin
    assert _lines(GAN, "LT003") == [19]
    # host data (NumPy, a CPU factory) handed to a CUDA tensor type every step; a
    # CUDA type called with sizes (`FloatT(n, 1)`) allocates on the GPU: no copy
    assert _lines(GAN, "LT012") == [26, 36, 37, 38]


def test_legacy_cpu_tensor_types_are_not_the_gpu() -> None:
    src = GAN.replace("torch.cuda.FloatTensor if on_gpu else torch.FloatTensor",
                      "torch.FloatTensor").replace("torch.cuda.LongTensor if on_gpu else ", "")
    src = src.replace("if on_gpu:\n    G.cuda()\n    D.cuda()\n", "")
    assert _lines(src, "LT012") == [] and _lines(src, "LT003") == []


def test_cpu_built_then_moved_through_fill_type_as_and_a_name(tmp_path) -> None:
    run = program(tmp_path, {"heads.py": """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, classes):
                super().__init__()
                self.fc = nn.Linear(32, classes)
                self.classes = classes

            def forward(self, feats, target):
                out = self.fc(feats)
                stride = torch.zeros(1, out.shape[1]).fill_(8.0).type_as(feats)
                order = torch.empty(feats.shape[0], dtype=torch.long)
                order = order.random_(self.classes).cuda()
                kept = torch.ones(4).type_as(out.shape)
                return (out * stride).sum() + out[:, 0].gather(0, order).sum()
        """, "fit.py": """
        import torch
        from heads import Head

        net = Head(10).cuda()
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        data = torch.utils.data.DataLoader(Shards(), batch_size=8, num_workers=2,
                                           pin_memory=True, persistent_workers=True)
        for feats, target in data:
            loss = net(feats.cuda(non_blocking=True), target.cuda(non_blocking=True))
            sgd.zero_grad()
            loss.backward()
            sgd.step()
        """}, select=("LT012",))
    # (`.type_as(out.shape)`: not a tensor of the GPU, no finding)
    assert found(run) == {("heads.py", 12, "LT012"), ("heads.py", 14, "LT012")}


TRAIN_WITH_GPU_SWITCH = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("-gpu", action="store_true", default=False, help="use gpu or not")
parser.add_argument("-profile", action="store_true", default=False)
args = parser.parse_args()
net = make_net()
if args.gpu:
    net = net.cuda()
train_data = DataLoader(Pictures(), batch_size=64, num_workers=4, persistent_workers=True)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(200):
    for step, (images, labels) in enumerate(train_data):
        if args.gpu:
            images = images.cuda()
            labels = labels.cuda()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(images), labels)
        loss.backward()
        optimizer.step()
        if args.profile:
            torch.cuda.synchronize()
"""


def test_a_gpu_switch_off_by_default_is_the_gpu_path_not_an_opt_in() -> None:
    got = lint_source(textwrap.dedent(TRAIN_WITH_GPU_SWITCH), "train.py",
                      select=("LT001", "LT003"))
    # the batches go to the GPU under `if args.gpu:` (how the program runs on one); the
    # sync under `if args.profile:` (off by default) stays an opt-in
    assert [(f.code, f.line) for f in got] == [("LT003", 13)]


def test_a_flag_copied_into_a_local_name_is_still_an_opt_in() -> None:
    src = textwrap.dedent(TRAIN_WITH_GPU_SWITCH).replace(
        "        if args.profile:", "        if slow_checks:").replace(
        "args = parser.parse_args()\n", "args = parser.parse_args()\nslow_checks = args.profile\n")
    assert [f.code for f in lint_source(src, "train.py", select=("LT001",))] == []


# A training step that moves its batch to `device` and reads the targets on the host.
FIT = """
def fit(net, batches, opt, device):
    for x, y in batches:
        x = x.to(device)
        y = y.to(device)
        loss = torch.nn.functional.mse_loss(net(x), y)
        record(y.detach().cpu().numpy())
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_device_that_is_cpu_on_one_path_only_is_not_the_cpu(tmp_path) -> None:
    run = program(tmp_path, {"run.py": textwrap.dedent("""
        import argparse
        import torch

        def spawn(args):
            return args.rank, args.rank % 8, 8
        """).lstrip("\n") + FIT + textwrap.dedent("""
        def main():
            ap = argparse.ArgumentParser()
            ap.add_argument("--device", default="cpu")
            ap.add_argument("--rank", type=int, default=-1)
            args = ap.parse_args()
            if args.rank != -1 or args.device != "cpu":
                rank, local_rank, world = spawn(args)
                device = local_rank
            else:
                device = "cpu"
            net = torch.nn.Linear(8, 1).to(device)
            batches = torch.utils.data.DataLoader(Rows(), batch_size=16, num_workers=2,
                                                  pin_memory=True, persistent_workers=True)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(5):
                fit(net, batches, opt, device)

        main()
        """)}, select=("LT001", "LT008"))
    assert found(run) == {("run.py", 9, "LT008"), ("run.py", 10, "LT008"),
                          ("run.py", 12, "LT001")}


def test_a_cpu_only_program_with_the_same_shape_stays_quiet(tmp_path) -> None:
    run = program(tmp_path, {"run.py": "import torch\n" + FIT + textwrap.dedent("""
        if fast:
            device = "cpu"
        else:
            device = "cpu"
        net = torch.nn.Linear(8, 1).to(device)
        fit(net, torch.utils.data.DataLoader(Rows(), batch_size=16), torch.optim.SGD(
            net.parameters(), lr=0.1), device)
        """)}, select=("LT001", "LT008", "LT003"))
    assert found(run) == set()


def test_parameters_of_a_gpu_model_are_gpu_tensors() -> None:
    src = textwrap.dedent("""
        import torch
        from torch.utils.tensorboard import SummaryWriter
        tb = SummaryWriter()
        net = build().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for it, (x, y) in enumerate(loader):
            loss = crit(net(x.cuda()), y.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()
            head = list(net.children())[-1]
            for pname, p in head.named_parameters():
                if "weight" in pname:
                    tb.add_scalar("grad/" + pname, p.grad.norm(), it)
            for p in net.parameters():
                print(pname)
    """)
    got = lint_source(src, "train.py", select=("LT001",))
    # the gradient norm is a GPU tensor handed to TensorBoard; the parameter's name is not
    assert [(f.line, dict(f.evidence)["sync"]) for f in got] == [(15, "logger")]


LAYERS = """
import torch.nn as nn


def stack(cfg, with_bn=False):
    layers, width = [], 3
    for v in cfg:
        if v == "pool":
            layers += [nn.MaxPool2d(2)]
            continue
        conv = nn.Conv2d(width, v, kernel_size=3, padding=1)
        if with_bn:
            layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
        else:
            layers += [conv, nn.ReLU(inplace=True)]
        width = v
    return nn.Sequential(*layers)


def down(cin, cout, first=False):
    parts = []
    parts.append(nn.Conv2d(cin, cout, 3, 1, 1))
    if not first:
        parts.append(nn.BatchNorm2d(cout))
    parts.append(nn.LeakyReLU(0.2, inplace=True))
    parts.append(nn.Conv2d(cout, cout, 3, 2, 1, bias=False))
    parts.append(nn.BatchNorm2d(cout))
    parts.extend([nn.Conv2d(cout, cout, 1), nn.BatchNorm2d(cout)])
    return parts


features = stack([64, "pool", 128], with_bn=True)


def up(cin, cout):
    seq = nn.Sequential()
    seq.add_module("deconv", nn.ConvTranspose2d(cin, cout, 4, 2, 1))
    seq.add_module("bn", nn.BatchNorm2d(cout))
    seq.add_module("conv", nn.Conv2d(cout, cout, 3, padding=1))
    seq.add_module("act", nn.ReLU())
    return seq
"""


def test_conv_then_batchnorm_in_layer_lists_built_step_by_step() -> None:
    got = {f.line: f for f in lint_source(textwrap.dedent(LAYERS), "layers.py",
                                          select=("LT016",))}
    assert sorted(got) == [11, 22, 28, 37]
    # the fix (`bias=False`) is offered only where every path adds the BatchNorm
    assert {line: f.fix is not None for line, f in got.items()} == {
        11: False, 22: False, 28: True, 37: True}


def test_syncs_inside_a_modules_forward_and_its_loss_helpers(tmp_path) -> None:
    run = program(tmp_path, {"detector.py": """
        import torch
        import torch.nn as nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(64, 85)

            def forward(self, feats, targets, mode="gpu"):
                out = self.backbone(feats)
                if self.training:
                    return self.assign_and_score(out, targets, mode)
                return out

            def assign_and_score(self, out, targets, mode):
                per_image = (targets.sum(dim=2) > 0).sum(dim=1)
                total = 0.0
                for i in range(out.shape[0]):
                    count = int(per_image[i])
                    if mode == "cpu":
                        out = out.cpu()
                    total = total + out[i, :count].sum()
                if mode == "slow":
                    total = total * 1
                return total / out.shape[0]
        """, "train.py": """
        import torch
        from detector import Detector

        net = Detector().cuda()
        sgd = torch.optim.SGD(net.parameters(), lr=0.01)
        for feats, targets in torch.utils.data.DataLoader(Boxes(), batch_size=4, num_workers=2,
                                                           pin_memory=True,
                                                           persistent_workers=True):
            loss = net(feats.cuda(non_blocking=True), targets.cuda(non_blocking=True))
            sgd.zero_grad()
            loss.backward()
            sgd.step()
        """}, select=("LT001",))
    # int() of a GPU count per image; `.cpu()` only on the CPU fallback path (`mode ==
    # "cpu"`), and `mode == "slow"` compares strings, no tensor
    assert found(run) == {("detector.py", 19, "LT001")}
    (f,) = run.findings
    assert "may live on the GPU" in f.message


def test_the_self_test_of_an_imported_module_is_not_the_programs_loop(tmp_path) -> None:
    files = {"losses.py": """
        import torch

        def smooth_l1(a, b):
            return torch.nn.functional.smooth_l1_loss(a, b)

        if __name__ == "__main__":
            w = torch.zeros(3, device="cuda", requires_grad=True)
            opt = torch.optim.SGD([w], lr=0.1)
            for x, y in torch.utils.data.DataLoader(Pairs(), batch_size=2):
                loss = smooth_l1(w * x.cuda(), y.cuda())
                opt.zero_grad()
                loss.backward()
                opt.step()
                print(loss.item())
        """, "train.py": """
        import torch
        from losses import smooth_l1

        net = torch.nn.Linear(3, 3).cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in torch.utils.data.DataLoader(Pairs(), batch_size=2, num_workers=2,
                                                pin_memory=True, persistent_workers=True):
            loss = smooth_l1(net(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}
    assert found(program(tmp_path, files, select=("LT001",))) == set()
    # linted on its own, the module is a program, and its loop is one
    alone = program(tmp_path / "alone", {"losses.py": files["losses.py"]}, select=("LT001",))
    assert found(alone) == {("losses.py", 14, "LT001")}


def test_losses_gathered_in_a_dict_and_reduced_by_a_helper_are_gpu_values(tmp_path) -> None:
    run = program(tmp_path, {"dist_utils.py": """
        import torch
        import torch.distributed as dist

        def reduce_losses(losses):
            if not dist.is_initialized():
                return losses
            names = sorted(losses)
            stacked = torch.stack([losses[n] for n in names])
            dist.reduce(stacked, dst=0)
            return dict(zip(names, stacked))
        """, "train_gan.py": """
        import torch
        from dist_utils import reduce_losses

        gen, disc = make_gen().cuda(), make_disc().cuda()
        g_opt = torch.optim.Adam(gen.parameters())
        pics = torch.utils.data.DataLoader(Pics(), batch_size=8, num_workers=2, pin_memory=True,
                                           persistent_workers=True)
        for step, real in enumerate(pics):
            real = real.cuda(non_blocking=True)
            losses = {}
            g_loss = disc(gen(torch.randn(8, 128, device="cuda"))).mean()
            losses["g"] = g_loss
            g_opt.zero_grad()
            g_loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
            g_opt.step()
            shown = reduce_losses(losses)
            g_val = shown["g"].mean().item()
            stats = {"norm": norm, "step": step, "lr": 1e-4}
            for name, value in losses.items():
                print(name)
            print(f"step {stats['step']} lr {stats['lr']}")
            print(f"grad norm {stats['norm']:.3f}")
        """}, select=("LT001",))
    # the reduced dict's item (a helper computed it from GPU values), and the gradient
    # norm clip_grad_norm_ hands back; not the dict's keys or its plain numbers
    assert found(run) == {("train_gan.py", 18, "LT001"), ("train_gan.py", 23, "LT001")}


def test_losses_over_lists_of_discriminator_outputs_and_variable_wrapped_batches() -> None:
    src = textwrap.dedent("""
        import torch
        import torch.nn.functional as F
        from torch.autograd import Variable

        def adversarial_loss(real_outs, fake_outs):
            total, parts = 0, []
            for real, fake in zip(real_outs, fake_outs):
                part = torch.mean((1 - real) ** 2) + torch.mean(fake ** 2)
                total = total + part
                parts.append(part.item())
            for k, out in enumerate(fake_outs):
                print(k)
            return total, parts

        def spectrum(wave):
            if torch.min(wave) < -1.0:
                print("min value is", torch.min(wave))
            return torch.stft(wave, 1024, return_complex=True).abs()

        dev = torch.device("cuda:{:d}".format(0))
        gen, disc = Gen().to(dev), MultiDisc().to(dev)
        opt = torch.optim.AdamW(disc.parameters())
        for epoch in range(10):
            for i, (wave, mel) in enumerate(train_loader):
                wave = Variable(wave.to(dev, non_blocking=True))
                fake = gen(mel.to(dev, non_blocking=True))
                real_outs, fake_outs = disc(wave), disc(fake.detach())
                loss, parts = adversarial_loss(real_outs, fake_outs)
                loss = loss + F.l1_loss(spectrum(wave), spectrum(fake))
                opt.zero_grad()
                loss.backward()
                opt.step()
                if i % 500 == 0:
                    with torch.no_grad():
                        for j, (vwave, vmel) in enumerate(val_loader):
                            vfake = gen(vmel.to(dev))
                            vwave = Variable(vwave.to(dev))
                            err = F.l1_loss(vwave, vfake).item()
                            if j <= 4:
                                keep(vfake.squeeze(0).cpu().numpy())
    """)
    got = sorted((f.line, dict(f.evidence)["sync"]) for f in lint_source(src, "train.py",
                                                                         select=("LT001",)))
    # the list items' .item() in the loss; the data check's `if` (not the print that only
    # runs when it fails); the validation loss (Variable is the tensor it wraps); not the
    # first five validation batches kept for inspection
    assert got == [(11, "item"), (17, "control-flow"), (39, "item")]


def test_conv_wrappers_named_convs_and_builders_whose_batchnorm_is_off(tmp_path) -> None:
    run = program(tmp_path, {"blocks.py": """
        import torch.nn as nn

        class ConvUnit(nn.Module):
            def __init__(self, cin, cout, k=3, bias=True, init="linear"):
                super().__init__()
                self.conv = nn.Conv1d(cin, cout, k, padding=k // 2, bias=bias)

            def forward(self, x):
                return self.conv(x)

        class ConvBNReLU(nn.Module):
            def __init__(self, cin, cout, k, bias=True):
                super().__init__()
                conv = nn.Conv2d(cin, cout, k, bias=bias)
                self.unit = nn.Sequential(conv, nn.BatchNorm2d(cout), nn.ReLU())

        def backbone(cfg, width, with_bn=False):
            layers = []
            for v in cfg:
                conv = nn.Conv2d(width, v, 3, padding=1)
                if with_bn:
                    layers += [conv, nn.BatchNorm2d(v), nn.ReLU()]
                else:
                    layers += [conv, nn.ReLU()]
                width = v
            return layers

        trunk = backbone([64, 128], 3)
        """, "net.py": """
        import torch.nn as nn
        import blocks
        from blocks import ConvUnit
        post = nn.Sequential(ConvUnit(80, 512, 5), nn.BatchNorm1d(512), nn.Tanh())
        quiet = nn.Sequential(ConvUnit(80, 512, 5, bias=False), nn.BatchNorm1d(512))
        also_quiet = nn.Sequential(ConvUnit(80, 512, 5, False), nn.BatchNorm1d(512))
        stem = blocks.ConvBNReLU(3, 16, 3)
        """}, select=("LT016",))
    # the wrapper's own bias is on by default; `bias=bias` defaulting to True; not the
    # builder's BatchNorm branch that nothing turns on (`with_bn=False`)
    assert found(run) == {("net.py", 4, "LT016"), ("blocks.py", 14, "LT016")}
    assert all(f.fix is None for f in run.findings)


def test_factories_follow_the_default_device_the_program_sets(tmp_path) -> None:
    files = {"loss.py": """
        import torch
        import torch.nn as nn

        class BoxLoss(nn.Module):
            def forward(self, preds, targets):
                n = preds.size(0)
                offsets = torch.Tensor(n, 4)
                labels = torch.LongTensor(n)
                fill(offsets, labels, targets)
                offsets = offsets.cuda()
                labels = labels.cuda()
                return (preds - offsets).abs().sum() + labels.float().sum()
        """, "train.py": """
        import torch
        from loss import BoxLoss

        torch.set_default_tensor_type("torch.cuda.FloatTensor")
        net = Detector().cuda()
        crit = BoxLoss()
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        for images, targets in loader:
            loss = crit(net(images.cuda()), targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}
    # float factories build on the GPU already; an integer one still builds on the CPU
    assert found(program(tmp_path, files, select=("LT012",))) == {("loss.py", 11, "LT012")}


def test_boolean_masks_built_as_bool_tensors_or_reshaped_stay_masks() -> None:
    src = textwrap.dedent("""
        import torch
        dev = torch.device("cuda")
        model = Encoder().to(dev)
        opt = torch.optim.Adam(model.parameters())
        for x, y in loader:
            feats = model(x.to(dev))
            eye = torch.eye(feats.shape[0], dtype=torch.bool).to(dev)
            others = feats[~eye]
            keep = (y.to(dev) > 0).unsqueeze(1).expand_as(feats)
            picked = feats[keep]
            loss = others.sum() + picked.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    got = sorted((f.line, dict(f.evidence)["sync"]) for f in lint_source(src, "train.py",
                                                                         select=("LT001",)))
    assert got == [(9, "boolean-mask"), (11, "boolean-mask")]


def test_hparams_built_by_another_framework_and_a_validate_function(tmp_path) -> None:
    run = program(tmp_path, {"hparams.py": """
        import tensorflow as tf

        def create_hparams():
            return tf.contrib.training.HParams(epochs=500, fp16_run=False,
                                               distributed_run=False, batch_size=64)
        """, "losses.py": """
        from torch import nn

        class SpecLoss(nn.Module):
            def forward(self, out, target):
                return nn.MSELoss()(out[0], target[0]) + nn.MSELoss()(out[1], target[1])
        """, "train.py": """
        import torch
        from torch.utils.data import DataLoader
        from hparams import create_hparams
        from losses import SpecLoss

        def validate(net, criterion, valset):
            net.eval()
            with torch.no_grad():
                total = 0.0
                for batch in DataLoader(valset, batch_size=8, num_workers=1):
                    x, y = net.parse_batch(batch)
                    total += criterion(net(x), y).item()
            net.train()
            return total

        def train(hp):
            net = Speech(hp).cuda()
            criterion = SpecLoss()
            opt = torch.optim.Adam(net.parameters())
            loader = DataLoader(Clips(), batch_size=hp.batch_size, num_workers=4,
                                pin_memory=True, persistent_workers=True)
            for epoch in range(hp.epochs):
                for i, batch in enumerate(loader):
                    x, y = net.parse_batch(batch)
                    loss = criterion(net(x), y)
                    if hp.distributed_run:
                        print(loss.item())
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    if i % 1000 == 0:
                        validate(net, criterion, Clips("val"))

        train(create_hparams())
        """}, select=("LT001",))
    # the validation loss of the module the program called, every validation batch; not
    # the print under `distributed_run`, which the HParams default turns off
    assert found(run) == {("train.py", 12, "LT001")}


def test_an_evaluation_named_test_in_a_script_and_nms_in_post_processing(tmp_path) -> None:
    run = program(tmp_path, {"seq_mnist_test.py": """
        import torch
        import torch.nn.functional as F

        def nms(boxes, scores, thresh):
            keep = []
            while scores.numel() > 0:
                i = int(scores.argmax())
                keep.append(i)
                scores = scores[boxes[:, 0] > thresh]
            return keep

        def test():
            model.eval()
            with torch.no_grad():
                for data, target in test_loader:
                    out = model(data.cuda())
                    nms(out[:, :4], out[:, 4], 0.5)
                    print(F.nll_loss(out, target.cuda()).item())

        model = Net().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            for data, target in train_loader:
                loss = F.nll_loss(model(data.cuda()), target.cuda())
                opt.zero_grad()
                loss.backward()
                opt.step()
            test()
        """}, select=("LT001",))
    # linted as the script it is (`def test():` is its evaluation, not a test function);
    # the reads inside non-maximum suppression are its results, not a habit
    assert found(run) == {("seq_mnist_test.py", 18, "LT001")}


def test_tensors_computed_on_the_cpu_from_factories_then_moved() -> None:
    src = textwrap.dedent("""
        import math
        import torch

        def timestep_embedding(t, dim):
            freqs = torch.exp(torch.arange(dim // 2, dtype=torch.float32) * -math.log(1e4))
            freqs = freqs.to(device=t.device)
            return t.float()[:, None] * freqs[None, :]

        def contrastive_targets(feats, views, dev):
            ids = torch.cat([torch.arange(feats.shape[0] // views) for _ in range(views)])
            same = (ids.unsqueeze(0) == ids.unsqueeze(1)).float()
            same = same.to(dev)
            return same

        dev = torch.device("cuda")
        net = Encoder().to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for views, t in loader:
            views = torch.cat(views, dim=0)
            views = views.to(dev)
            t = t.to(dev, non_blocking=True)
            feats = net(views, timestep_embedding(t, 128))
            loss = (feats @ feats.T - contrastive_targets(feats, 2, dev)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    got = sorted((f.line, f.code) for f in lint_source(src, "train.py", select=("LT012",)))
    assert got == [(7, "LT012"), (13, "LT012")]


def test_a_concatenated_batch_is_still_the_pinned_batch() -> None:
    src = textwrap.dedent("""
        import torch
        dev = torch.device("cuda")
        net = Encoder().to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(Views(), batch_size=64, num_workers=4,
                                             pin_memory=True, persistent_workers=True)
        for views, _ in loader:
            views = torch.cat(views, dim=0)
            views = views.to(dev)
            loss = net(views).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    got = [(f.line, f.code) for f in lint_source(src, "train.py", select=("LT008",))]
    assert got == [(10, "LT008")]


def test_a_loader_built_anew_for_each_validation_pass_is_not_a_respawn_finding() -> None:
    src = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader

        def validate(net, valset):
            with torch.no_grad():
                loader = DataLoader(valset, batch_size=8, num_workers=2)
                for x, y in loader:
                    score(net(x.cuda()), y)

        def val_loader(valset):
            return DataLoader(valset, batch_size=8, num_workers=2)

        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        train = DataLoader(Shards(), batch_size=32, num_workers=4, pin_memory=True)
        held = val_loader(Shards("val"))
        for epoch in range(20):
            for x, y in train:
                loss = net(x.cuda(non_blocking=True)).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            validate(net, Shards("val"))
            for x, y in held:
                score(net(x.cuda()), y)
    """)
    got = sorted(f.line for f in lint_source(src, "train.py", select=("LT004",)))
    # persistent_workers cannot keep the workers of a loader that validate() builds on each
    # call (build it once instead); the returned one and the training loader are kept
    assert got == [12, 16]


def test_a_branch_that_ends_the_run_is_rare() -> None:
    src = textwrap.dedent("""
        import math
        import sys
        import torch
        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for images, targets in loader:
            losses = net(images.cuda(), targets.cuda())
            loss = sum(losses.values())
            value = loss.item()
            if not math.isfinite(value):
                print(f"loss is {value}, stopping", losses)
                sys.exit(1)
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    got = [(f.line, f.code) for f in lint_source(src, "train.py", select=("LT001",))]
    assert got == [(10, "LT001")]


def test_metric_loggers_get_batch_evaluations_and_generator_update_steps(tmp_path) -> None:
    run = program(tmp_path, {"logger.py": """
        import torch

        class Meter:
            def __init__(self):
                self.totals = {}

            def update(self, **values):
                for name, value in values.items():
                    if isinstance(value, torch.Tensor):
                        value = value.item()
                    self.totals[name] = self.totals.get(name, 0.0) + value
        """, "train.py": """
        import torch
        from logger import Meter

        log_interval = 1
        n_critic = 5
        eval_iters = 50

        def get_batch(split):
            x, y = sample(split)
            return x.cuda(non_blocking=True), y.cuda(non_blocking=True)

        @torch.no_grad()
        def estimate(model):
            out = []
            for k in range(eval_iters):
                x, y = get_batch("val")
                out.append(model(x, y).item())
            return out

        model, critic = Gen().cuda(), Critic().cuda()
        g_opt = torch.optim.Adam(model.parameters())
        c_opt = torch.optim.Adam(critic.parameters())
        meter = Meter()
        for it in range(100000):
            x, y = get_batch("train")
            c_loss = critic(x).mean() - critic(model(x, y).detach()).mean()
            c_opt.zero_grad()
            c_loss.backward()
            c_opt.step()
            meter.update(critic=c_loss)
            if (it + 1) % n_critic == 0:
                g_loss = -critic(model(x, y)).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                print(g_loss.item())
            if it % log_interval == 0:
                print(f"critic {c_loss.item():.3f}")
            if it % 1000 == 0:
                print(estimate(model))
        """}, select=("LT001",))
    # the meter's .item() on what update() is handed; the evaluation's per-batch read; the
    # generator's loss at each of its updates; the log read every step (interval 1)
    assert found(run) == {("logger.py", 10, "LT001"), ("train.py", 17, "LT001"),
                          ("train.py", 36, "LT001"), ("train.py", 38, "LT001")}


def test_a_model_object_framework_trains_through_optimize_parameters(tmp_path) -> None:
    run = program(tmp_path, {"train.py": """
        import time
        import torch
        from data import create_dataset
        from models import create_model

        opt = parse_options()
        dataset = create_dataset(opt)
        model = create_model(opt)
        for epoch in range(opt.epoch_count, opt.n_epochs + 1):
            for i, data in enumerate(dataset):
                torch.cuda.synchronize()
                start = time.time()
                model.set_input(data)
                model.optimize_parameters()
                torch.cuda.synchronize()
                took = time.time() - start
        """}, select=("LT001", "LT006"))
    # the model is built by name (out of reach), but optimize_parameters() is its step:
    # this is the training loop, and its syncs are per step
    assert found(run) == {("train.py", 10, "LT006"), ("train.py", 11, "LT001"),
                          ("train.py", 15, "LT001")}


def test_the_rollout_of_on_policy_rl_runs_per_environment_step() -> None:
    src = textwrap.dedent("""
        import numpy as np
        import torch
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        agent = Agent().to(dev)
        opt = torch.optim.Adam(agent.parameters(), lr=2.5e-4)
        obs = torch.Tensor(envs.reset()).to(dev)
        for iteration in range(1000):
            for step in range(128):
                with torch.no_grad():
                    action, logprob = agent.act(obs)
                next_obs, reward, done, info = envs.step(action.cpu().numpy())
                rewards[step] = torch.tensor(reward).to(dev).view(-1)
                obs = torch.Tensor(next_obs).to(dev)
            for epoch in range(4):
                for start in range(0, 512, 128):
                    loss = agent.loss(obs, rewards)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            print("loss", loss.item())
    """)
    got = sorted((f.line, f.code) for f in lint_source(src, "ppo.py", select=("LT001", "LT012")))
    # every env step: the rewards and observations rebuilt on the CPU and copied; not the
    # action, which the environment needs on the host, nor the log read once per
    # iteration after the update
    assert got == [(13, "LT012"), (14, "LT012")]


# A convolutional network trained on the GPU (what the autotuner rule is about).
CONV_TRAINING = """
net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU()).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    loss = net(x.cuda(non_blocking=True)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_determinism_asked_by_an_option_that_defaults_to_true_silences_the_autotuner() -> None:
    src = textwrap.dedent("""
        import argparse
        import torch
        ap = argparse.ArgumentParser()
        ap.add_argument("--torch-deterministic", type=bool, default=True)
        args = ap.parse_args()
        torch.backends.cudnn.deterministic = args.torch_deterministic
    """) + CONV_TRAINING
    assert [f.code for f in lint_source(src, "train.py", select=("LT005",))] == []
    off = src.replace("default=True", "default=False")
    assert [f.code for f in lint_source(off, "train.py", select=("LT005",))] == ["LT005"]


def test_an_attention_gate_of_convolutions_is_no_matmul_work_and_forward_switches(tmp_path
                                                                                  ) -> None:
    files = {"net.py": """
        import torch.nn as nn

        class AttentionGate(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.w = nn.Sequential(nn.Conv2d(ch, ch, 1, bias=False), nn.BatchNorm2d(ch))
                self.psi = nn.Sequential(nn.Conv2d(ch, 1, 1), nn.Sigmoid())

            def forward(self, x, g):
                return x * self.psi(self.w(x) + self.w(g))

        class AttUNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Conv2d(3, 64, 3, padding=1)
                self.gate = AttentionGate(64)

            def forward(self, x, train, drop=None):
                y = self.enc(x)
                if train and drop is not None:
                    y = y * drop
                return self.gate(y, y)
        """, "train.py": """
        import torch
        from net import AttUNet

        torch.backends.cudnn.benchmark = True
        net = AttUNet().cuda()
        opt = torch.optim.Adam(net.parameters())
        loader = torch.utils.data.DataLoader(Slices(), batch_size=8, num_workers=4,
                                             pin_memory=True, persistent_workers=True)
        for x, y in loader:
            loss = (net(x.cuda(non_blocking=True), True) - y.cuda(non_blocking=True)).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}
    # a conv-only U-Net: no TF32 advice; `train` is a switch of forward(), not a tensor
    assert found(program(tmp_path, files, select=("LT011", "LT001"))) == set()


def test_reads_that_are_the_point_actions_for_the_environment_and_images_written() -> None:
    src = textwrap.dedent("""
        import sys
        import torch
        from torchvision.utils import save_image

        class Agent:
            def select_action(self, state):
                state = torch.as_tensor(state, device="cuda").unsqueeze(0)
                return self.actor(state).cpu().numpy().flatten()

        agent = Agent()
        q_net = QNet().cuda()
        opt = torch.optim.Adam(q_net.parameters())
        obs = envs.reset()
        for step in range(1000000):
            q = q_net(torch.as_tensor(obs, device="cuda"))
            actions = torch.argmax(q, dim=1).cpu().numpy()
            obs, rewards, dones, infos = envs.step(actions)
            extra = agent.select_action(obs)
            loss = q.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            save_image(q.detach().cpu(), "q.png")
            sys.stdout.write("loss %f" % loss.item())
    """)
    got = [(f.line, f.code) for f in lint_source(src, "dqn.py", select=("LT001",))]
    # the action the environment needs and the image written are read on purpose; the
    # log line is not
    assert got == [(25, "LT001")]


def test_a_loader_turned_into_one_iterator_for_the_whole_run_is_not_respawned() -> None:
    src = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader
        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loader = DataLoader(Crops(), batch_size=8, num_workers=8, pin_memory=True)
        batches = iter(loader)
        again = DataLoader(Crops(), batch_size=8, num_workers=8, pin_memory=True)
        stream = iter(again)
        for it in range(100000):
            try:
                x = next(stream)
            except StopIteration:
                stream = iter(again)
                x = next(stream)
            y = next(batches)
            loss = net(x.cuda(non_blocking=True)).mean() + net(y.cuda(non_blocking=True)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    # `again` is re-iterated each time it runs out: its workers are re-spawned
    assert [f.line for f in lint_source(src, "train.py", select=("LT004",))] == [8]


def test_determinism_set_by_a_seeding_helper_counts_only_where_the_helper_is_called(
        tmp_path) -> None:
    files = {"utils.py": """
        import random
        import torch

        def set_deterministic(seed):
            random.seed(seed)
            torch.manual_seed(seed)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        """, "train.py": textwrap.dedent("""
        import argparse
        import torch
        from utils import set_deterministic

        ap = argparse.ArgumentParser()
        ap.add_argument("--seed", type=int, default=None)
        args = ap.parse_args()
        if args.seed is not None:
            set_deterministic(args.seed)
        """).lstrip("\n") + CONV_TRAINING}
    # only with --seed: the default run has no determinism asked, and no autotuner
    assert found(program(tmp_path, files, select=("LT005",))) == {("train.py", 13, "LT005")}
    # called on every run: the program asks for determinism, the rule stays silent
    files["train.py"] = files["train.py"].replace(
        "if args.seed is not None:\n    set_deterministic(args.seed)", "set_deterministic(0)")
    assert found(program(tmp_path / "always", files, select=("LT005",))) == set()
