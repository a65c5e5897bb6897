"""Programs whose training runs through objects the loop builds, overrides of a base
trainer, shared step helpers, lists of losses, GPU constants of another module, graph
layers and dicts of loaders (each written in the shape of real training code)."""

from __future__ import annotations

from lint_helpers import found, line_of, program

# ------------------------------------------------------------ an agent built in the loop's function
AGENT = """
import torch
import torch.nn as nn


class Agent:
    def __init__(self, cfg):
        self.device = torch.device("cuda")
        self.model = nn.Sequential(nn.Linear(64, 512), nn.ELU(), nn.Linear(512, 64)).cuda()
        self.optim = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)

    def act(self, obs):
        with torch.no_grad():
            return self.model(torch.as_tensor(obs, device=self.device))

    def update(self, buffer, step):
        obs, target = buffer.sample()
        loss = (self.model(obs) - target).pow(2).mean()
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), 10.0)
        self.optim.step()
        return {"loss": float(loss.mean().item()), "grad_norm": float(grad_norm)}
"""

RL_TRAIN = """
import torch
from agent import Agent


def train(cfg):
    env, agent, buffer = make_env(cfg), Agent(cfg), make_buffer(cfg)
    for step in range(0, cfg.train_steps, cfg.episode_length):
        obs, done = env.reset(), False
        while not done:
            obs, reward, done, _ = env.step(agent.act(obs).cpu().numpy())
        metrics = {}
        if step >= cfg.seed_steps:
            for i in range(cfg.episode_length):
                metrics.update(agent.update(buffer, step + i))
        log(metrics)
"""


def test_a_method_of_an_object_the_function_builds_makes_its_loop_train(tmp_path):
    run = program(tmp_path, {"agent.py": AGENT, "train.py": RL_TRAIN})
    got = found(run, "LT001")
    assert ("agent.py", line_of(AGENT, '"loss": float(loss.mean().item())'), "LT001") in got
    assert {code for _, _, code in found(run)} >= {"LT001", "LT006"}
    # without the update call nothing in the loop trains
    quiet = program(tmp_path / "q", {"agent.py": AGENT, "train.py": RL_TRAIN.replace(
        "metrics.update(agent.update(buffer, step + i))", "metrics.update(agent.act(i))")})
    assert not found(quiet, "LT006")


# ------------------------------------------------------------ a base trainer and its subclass
TRAINERS = """
import torch


class BaseTrainer(object):
    def __init__(self, model):
        self.model = model

    def train(self, optimizer, data_loader):
        self.model.train()
        for i, inputs in enumerate(data_loader):
            input_dict = self._parse_data(inputs)
            output_dict = self._forward(input_dict)
            total_loss = 0
            loss_dict = {}
            for k, loss in output_dict["losses"].items():
                loss = loss.mean(dim=0, keepdim=True)
                total_loss += loss
                loss_dict[k] = loss.item()
            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()

    def _parse_data(self, inputs):
        raise NotImplementedError

    def _forward(self, inputs, targets):
        raise NotImplementedError


class Trainer(BaseTrainer):
    def _parse_data(self, inputs):
        images, labels = inputs
        return {"images": images.cuda(), "labels": labels.cuda()}

    def _forward(self, input_dict):
        self.model.train()
        output_dict = self.model(input_dict)
        return output_dict
"""

TRAINERS_MAIN = """
import torch
from trainers import Trainer


def main(args, loader):
    model = build_model(args).cuda()
    optimizer = torch.optim.Adadelta(model.parameters())
    trainer = Trainer(model)
    for epoch in range(args.epochs):
        trainer.train(optimizer, loader)
"""


def test_a_base_trainers_abstract_method_returns_what_the_override_returns(tmp_path):
    run = program(tmp_path, {"trainers.py": TRAINERS, "main.py": TRAINERS_MAIN})
    assert ("trainers.py", line_of(TRAINERS, "loss_dict[k] = loss.item()"), "LT001") \
        in found(run, "LT001")


# ------------------------------------------------------------ a list of per-head losses
HEADS = """
import numpy as np
import torch


def scan_train(train_loader, model, criterion, optimizer, meters):
    model.train()
    for i, batch in enumerate(train_loader):
        anchors = batch["anchor"].cuda(non_blocking=True)
        neighbors = batch["neighbor"].cuda(non_blocking=True)
        anchors_output = model(anchors)
        neighbors_output = model(neighbors)
        total_loss, entropy_loss = [], []
        for a, n in zip(anchors_output, neighbors_output):
            total_, entropy_ = criterion(a, n)
            total_loss.append(total_)
            entropy_loss.append(entropy_)
        meters.update(np.mean([v.item() for v in total_loss]))
        total = torch.sum(torch.stack(total_loss, dim=0))
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
"""


def test_items_of_a_list_of_gpu_losses_in_a_comprehension(tmp_path):
    run = program(tmp_path, {"train_utils.py": HEADS})
    assert ("train_utils.py", line_of(HEADS, "np.mean([v.item() for v in total_loss])"),
            "LT001") in found(run, "LT001")


# ------------------------------------------------------------ GPU constants of another module
ATTACK_UTILS = """
import torch

cifar10_mean = (0.4914, 0.4822, 0.4465)
cifar10_std = (0.2471, 0.2435, 0.2616)
mu = torch.tensor(cifar10_mean).view(3, 1, 1).cuda()
std = torch.tensor(cifar10_std).view(3, 1, 1).cuda()
names = ["plane", "car"]
"""

ATTACK_TRAIN = """
import torch
import torch.nn.functional as F
from attack_utils import std, mu, names


def main(args, model, opt, train_loader):
    epsilon = (args.epsilon / 255.) / std
    for i, (X, y) in enumerate(train_loader):
        X, y = X.cuda(), y.cuda()
        delta = torch.zeros_like(X)
        for j in range(len(epsilon)):
            delta[:, j, :, :].uniform_(-epsilon[j][0][0].item(), epsilon[j][0][0].item())
        label = names[0]
        loss = F.cross_entropy(model(X + delta), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_gpu_tensor_made_at_the_top_of_another_module(tmp_path):
    run = program(tmp_path, {"attack_utils.py": ATTACK_UTILS, "train.py": ATTACK_TRAIN})
    line = line_of(ATTACK_TRAIN, "uniform_(-epsilon[j][0][0].item()")
    assert ("train.py", line, "LT001") in found(run, "LT001")
    # a CPU constant of the same module is no GPU value
    cpu = ATTACK_UTILS.replace("view(3, 1, 1).cuda()", "view(3, 1, 1)")
    run = program(tmp_path / "cpu", {"attack_utils.py": cpu, "train.py": ATTACK_TRAIN})
    assert ("train.py", line, "LT001") not in found(run, "LT001")


# ------------------------------------------------------------ one step helper for train and eval
SHARED_STEP = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_geometric.nn import global_mean_pool


class Net(nn.Module):
    def __init__(self, emb_dim=300, task="classification"):
        super().__init__()
        self.gnn = nn.Linear(emb_dim, emb_dim)
        self.pred_head = nn.Linear(emb_dim, 2)

    def forward(self, data):
        h = global_mean_pool(self.gnn(data.x), data.batch)
        return h, self.pred_head(h)


class Trainer(object):
    def __init__(self, dataset, config):
        self.config = config
        self.dataset = dataset
        self.device = self._get_device()

    def _get_device(self):
        if torch.cuda.is_available() and self.config["gpu"] != "cpu":
            device = self.config["gpu"]
            torch.cuda.set_device(device)
        else:
            device = "cpu"
        return device

    def _step(self, model, data, n_iter):
        __, pred = model(data)
        return F.cross_entropy(pred, data.y)

    def train(self):
        train_loader, valid_loader = self.dataset.get_data_loaders()
        model = Net(**self.config["model"]).to(self.device)
        optimizer = torch.optim.Adam(model.parameters(), self.config["init_lr"])
        for epoch in range(self.config["epochs"]):
            for bn, data in enumerate(train_loader):
                optimizer.zero_grad()
                data = data.to(self.device)
                loss = self._step(model, data, bn)
                loss.backward()
                optimizer.step()
            if epoch % self.config["eval_every_n_epochs"] == 0:
                self._validate(model, valid_loader)

    def _validate(self, model, valid_loader):
        predictions = []
        with torch.no_grad():
            model.eval()
            valid_loss = 0.0
            for bn, data in enumerate(valid_loader):
                data = data.to(self.device)
                loss = self._step(model, data, bn)
                valid_loss += loss.item() * data.y.size(0)
        with torch.no_grad():
            for bn, data in enumerate(valid_loader):
                data = data.to(self.device)
                __, pred = model(data)
                predictions.extend(pred.cpu().detach().numpy())
        model.train()
        return valid_loss
"""


def test_an_evaluation_loop_through_the_step_helper_that_training_shares(tmp_path):
    run = program(tmp_path, {"finetune.py": SHARED_STEP})
    got = found(run, "LT001")
    assert ("finetune.py", line_of(SHARED_STEP, "valid_loss += loss.item()"), "LT001") in got
    # the second output of a model call lives where the model does
    assert ("finetune.py", line_of(SHARED_STEP, "pred.cpu().detach()"), "LT001") in got


# ------------------------------------------------------------ a graph layer's forward
GRAPH = """
import torch
import torch.nn as nn
from torch_geometric.nn import MessagePassing


class GINEConv(MessagePassing):
    def __init__(self, emb_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(emb_dim, 2 * emb_dim), nn.ReLU(),
                                 nn.Linear(2 * emb_dim, emb_dim))

    def forward(self, x, edge_index, edge_attr):
        self_loop_attr = torch.zeros(x.size(0), 2)
        self_loop_attr[:, 0] = 4
        self_loop_attr = self_loop_attr.to(edge_attr.device).to(edge_attr.dtype)
        edge_attr = torch.cat((edge_attr, self_loop_attr), dim=0)
        return self.propagate(edge_index, x=x, edge_attr=edge_attr)


class GINet(nn.Module):
    def __init__(self, num_layer=5, emb_dim=300):
        super().__init__()
        self.gnns = nn.ModuleList([GINEConv(emb_dim) for _ in range(num_layer)])

    def forward(self, data):
        h = data.x
        for layer in range(len(self.gnns)):
            h = self.gnns[layer](h, data.edge_index, data.edge_attr)
        return h


def train(loader):
    model = GINet().cuda()
    opt = torch.optim.Adam(model.parameters())
    for data in loader:
        data = data.cuda()
        loss = model(data).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_message_passing_layers_forward_runs_per_batch(tmp_path):
    run = program(tmp_path, {"ginet.py": GRAPH})
    assert ("ginet.py", line_of(GRAPH, "self_loop_attr = self_loop_attr.to(edge_attr.device)"),
            "LT012") in found(run, "LT012")


# ------------------------------------------------------------ a dict of loaders, one per phase
PHASES = """
import torch
import torch.nn as nn


def run(train_ds, val_ds, net, optimizer, epochs):
    dataloader = torch.utils.data.DataLoader(train_ds, batch_size=8, shuffle=True,
                                             num_workers=16, pin_memory=True,
                                             persistent_workers=True)
    val_dataloader = torch.utils.data.DataLoader(val_ds, batch_size=8, num_workers=16,
                                                 pin_memory=True, persistent_workers=True)
    dataloaders = {"train": dataloader, "val": val_dataloader}
    for epoch in range(epochs):
        for phase in ["train", "val"]:
            net.train(phase == "train")
            for data in dataloaders[phase]:
                inputs, labels = data
                inputs = inputs.cuda()
                labels = labels.cuda(non_blocking=True)
                loss = nn.functional.cross_entropy(net(inputs), labels)
                if phase == "train":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
"""


def test_batches_of_a_dict_of_pinned_loaders(tmp_path):
    run = program(tmp_path, {"train.py": PHASES})
    got = found(run, "LT008")
    assert ("train.py", line_of(PHASES, "inputs = inputs.cuda()"), "LT008") in got
    assert ("train.py", line_of(PHASES, "labels.cuda(non_blocking=True)"), "LT008") not in got
    unpinned = PHASES.replace("pin_memory=True", "pin_memory=False")
    assert not found(program(tmp_path / "u", {"train.py": unpinned}), "LT008")


# ------------------------------------------------------------ the deprecated autocast through partial
PARTIAL_AUTOCAST = """
from functools import partial

import torch


def null_context():
    return torch.no_grad()


def causal_linear_attention(q, k, v):
    autocast_enabled = torch.is_autocast_enabled()
    cuda_context = null_context if not autocast_enabled else partial(
        torch.cuda.amp.autocast, enabled=False)
    with cuda_context():
        return (q @ k.transpose(-1, -2)) @ v
"""


def test_the_deprecated_autocast_handed_to_partial(tmp_path):
    run = program(tmp_path, {"attention.py": PARTIAL_AUTOCAST})
    assert found(run) == {("attention.py", line_of(PARTIAL_AUTOCAST, "torch.cuda.amp.autocast,"),
                           "LT007")}
    modern = PARTIAL_AUTOCAST.replace("torch.cuda.amp.autocast,", 'torch.amp.autocast, "cuda",')
    assert not found(program(tmp_path / "m", {"attention.py": modern}))


# ------------------------------------------------------------ a diffusion schedule uploaded per call
DIFFUSION = """
import numpy as np
import torch as th


def get_named_beta_schedule(name, num_diffusion_timesteps):
    scale = 1000 / num_diffusion_timesteps
    return np.linspace(scale * 0.0001, scale * 0.02, num_diffusion_timesteps, dtype=np.float64)


class GaussianDiffusion:
    def __init__(self, *, betas):
        self.betas = np.array(betas, dtype=np.float64)
        alphas = 1.0 - betas
        self.alphas_cumprod = np.cumprod(alphas, axis=0)
        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - self.alphas_cumprod)

    def q_sample(self, x_start, t, noise=None):
        if noise is None:
            noise = th.randn_like(x_start)
        return (_extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape)
                * noise)

    def training_losses(self, model, x_start, t):
        x_t = self.q_sample(x_start, t)
        return ((model(x_t, t) - x_start) ** 2).mean()


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = th.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)
"""

RESPACE = """
from gaussian_diffusion import GaussianDiffusion, get_named_beta_schedule


class SpacedDiffusion(GaussianDiffusion):
    def __init__(self, use_timesteps, **kwargs):
        self.use_timesteps = set(use_timesteps)
        super().__init__(**kwargs)

    def training_losses(self, model, *args, **kwargs):
        return super().training_losses(self._wrap_model(model), *args, **kwargs)

    def _wrap_model(self, model):
        return model


def create_diffusion(steps=1000):
    return SpacedDiffusion(use_timesteps=range(steps),
                           betas=get_named_beta_schedule("linear", steps))
"""

DIFFUSION_LOOP = """
import functools

import torch as th
from respace import create_diffusion


class TrainLoop:
    def __init__(self, model, data):
        self.model = model.cuda()
        self.data = data
        self.diffusion = create_diffusion()
        self.opt = th.optim.AdamW(self.model.parameters(), lr=1e-4)

    def run_loop(self):
        for motion, cond in self.data:
            self.run_step(motion.cuda(), cond)

    def run_step(self, batch, cond):
        self.opt.zero_grad()
        t = th.randint(0, 1000, (batch.shape[0],), device=batch.device)
        compute_losses = functools.partial(self.diffusion.training_losses, self.model, batch, t)
        losses = compute_losses()
        losses.backward()
        self.opt.step()
"""


def test_a_schedule_table_uploaded_per_call_through_super_and_partial(tmp_path):
    files = {"gaussian_diffusion.py": DIFFUSION, "respace.py": RESPACE,
             "training_loop.py": DIFFUSION_LOOP}
    line = line_of(DIFFUSION, "th.from_numpy(arr).to(device=timesteps.device)")
    assert ("gaussian_diffusion.py", line, "LT012") in found(program(tmp_path, files), "LT012")
    # arrays handed in per call that are not made once in __init__ are data
    data = DIFFUSION.replace("_extract_into_tensor(self.sqrt_alphas_cumprod, t,",
                             "_extract_into_tensor(x_start.cpu().numpy(), t,").replace(
        "_extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t,",
        "_extract_into_tensor(noise.cpu().numpy(), t,")
    run = program(tmp_path / "data", {**files, "gaussian_diffusion.py": data})
    assert ("gaussian_diffusion.py", line, "LT012") not in found(run, "LT012")


# ------------------------------------------------------------ a hand-written iterator's next()
ITER_LOADER = """
import torch
from torch.utils.data import DataLoader


class IterLoader:
    def __init__(self, loader, length=None):
        self.loader = loader
        self.length = length
        self.iter = None

    def new_epoch(self):
        self.iter = iter(self.loader)

    def next(self):
        try:
            return next(self.iter)
        except StopIteration:
            self.iter = iter(self.loader)
            return next(self.iter)


def get_train_loader(dataset, batch_size, workers, iters):
    return IterLoader(DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                                 shuffle=True, pin_memory=True, drop_last=True,
                                 persistent_workers=True), length=iters)
"""

ITER_TRAINER = """
import torch


class PreTrainer(object):
    def __init__(self, model):
        self.model = model
        self.criterion = torch.nn.CrossEntropyLoss().cuda()

    def train(self, epoch, data_loader_source, optimizer, train_iters=200):
        self.model.train()
        for i in range(train_iters):
            source_inputs = data_loader_source.next()
            s_inputs, targets = self._parse_data(source_inputs)
            loss = self.criterion(self.model(s_inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def _parse_data(self, inputs):
        imgs, _, pids, _ = inputs
        inputs = imgs.cuda()
        targets = pids.cuda()
        return inputs, targets
"""

ITER_MAIN = """
import torch
from data import get_train_loader
from trainers import PreTrainer


def main(args, dataset, model):
    loader = get_train_loader(dataset, args.batch_size, args.workers, args.iters)
    model = torch.nn.DataParallel(model.cuda())
    optimizer = torch.optim.Adam(model.parameters(), lr=3.5e-4)
    trainer = PreTrainer(model)
    for epoch in range(args.epochs):
        loader.new_epoch()
        trainer.train(epoch, loader, optimizer, train_iters=args.iters)
"""


def test_batches_pulled_with_a_hand_written_iterators_next(tmp_path):
    run = program(tmp_path, {"data.py": ITER_LOADER, "trainers.py": ITER_TRAINER,
                             "main.py": ITER_MAIN})
    got = found(run, "LT008")
    assert ("trainers.py", line_of(ITER_TRAINER, "inputs = imgs.cuda()"), "LT008") in got
    assert ("trainers.py", line_of(ITER_TRAINER, "targets = pids.cuda()"), "LT008") in got


# ------------------------------------------------------------ a device spelled by a template
SOLVER = """
import torch
from torch.utils import data


def get_loader(dataset, batch_size):
    return data.DataLoader(dataset=dataset, batch_size=batch_size, shuffle=True,
                           num_workers=4, drop_last=True, pin_memory=True,
                           persistent_workers=True)


class Solver(object):
    def __init__(self, loader, config, model):
        self.loader = loader
        self.num_iters = config.num_iters
        self.use_cuda = torch.cuda.is_available()
        self.device = torch.device('cuda:{}'.format(config.device_id) if self.use_cuda else 'cpu')
        self.G = model.to(self.device)
        self.optimizer = torch.optim.Adam(self.G.parameters(), 1e-4)

    def train(self):
        data_iter = iter(self.loader)
        for i in range(self.num_iters):
            try:
                x_real, emb, lengths = next(data_iter)
            except StopIteration:
                data_iter = iter(self.loader)
                x_real, emb, lengths = next(data_iter)
            x_real = x_real.to(self.device)
            emb = emb.to(self.device)
            loss = (self.G(x_real, emb) - x_real).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""


def test_a_device_made_from_a_template_string_is_an_accelerator(tmp_path):
    for template in ("'cuda:{}'.format(config.device_id)", "'cuda:%d' % config.device_id",
                     "f'cuda:{config.device_id}'"):
        src = SOLVER.replace("'cuda:{}'.format(config.device_id)", template)
        got = found(program(tmp_path / str(len(template)), {"solver.py": src}), "LT008")
        assert ("solver.py", line_of(src, "x_real = x_real.to(self.device)"), "LT008") in got
    cpu = SOLVER.replace("'cuda:{}'.format(config.device_id) if self.use_cuda else 'cpu'",
                         "'cpu'")
    assert not found(program(tmp_path / "cpu", {"solver.py": cpu}), "LT008")


# ------------------------------------------------------------ a device helper with two returns
DIST_UTIL = """
import torch as th

used_device = 0


def dev():
    if th.cuda.is_available() and used_device >= 0:
        return th.device(f"cuda:{used_device}")
    return th.device("cpu")
"""

SAMPLER_LOOP = """
import torch as th
from utils import dist_util


def train(model, data, opt, num_timesteps):
    model.to(dist_util.dev())
    for motion, cond in data:
        batch = motion.to(dist_util.dev())
        t = th.randint(0, num_timesteps, (batch.shape[0],), device=dist_util.dev())
        weights = th.ones(batch.shape[0], device=dist_util.dev())
        loss = ((model(batch, t) - batch) ** 2 * weights[:, None]).mean()
        log_loss(t, loss)
        opt.zero_grad()
        loss.backward()
        opt.step()


def log_loss(ts, loss):
    print("loss", loss.mean().item())
"""


def test_a_device_helper_that_may_return_an_accelerator(tmp_path):
    run = program(tmp_path, {"utils/__init__.py": "", "utils/dist_util.py": DIST_UTIL,
                             "train.py": SAMPLER_LOOP})
    assert ("train.py", line_of(SAMPLER_LOOP, 'print("loss", loss.mean().item())'), "LT001") \
        in found(run, "LT001")


# ------------------------------------------------------------ host answers of private accessors
STORAGE = """
import torch


def _free_storage(tensor):
    with torch.no_grad():
        already_freed = tensor._typed_storage()._size() == 0
        if not already_freed:
            print(f"storage size: {tensor._typed_storage()._size()}")
            tensor._typed_storage()._resize_(0)
        return not already_freed


def _unwrap(x):
    if isinstance(x, torch.Tensor) and torch._is_functional_tensor(x):
        return torch._from_functional_tensor(x)
    return x


class Wrapper(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module.cuda()

    def forward(self, x):
        out = self.module(_unwrap(x))
        _free_storage(out)
        return out


def train(loader, module):
    model = Wrapper(module)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_private_predicates_and_storage_sizes_are_host_values(tmp_path):
    assert not found(program(tmp_path, {"wrap.py": STORAGE}), "LT001")


# ------------------------------------------------------------ the review's cases
PHASE_KEYS = """
import torch


def train_model(model, criterion, optimizer, dataloaders, sizes, num_epochs=25):
    best_acc = 0.0
    for epoch in range(num_epochs):
        for phase in dataloaders:
            model.train(phase == "train")
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                inputs = inputs.cuda(non_blocking=True)
                labels = labels.cuda(non_blocking=True)
                optimizer.zero_grad()
                outputs = model(inputs)
                loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
                running_corrects += torch.sum(outputs.argmax(1) == labels)
            epoch_acc = running_corrects.double() / sizes[phase]
            print("{} Acc: {:.4f}".format(phase, epoch_acc))
"""


def test_iterating_a_collection_of_loaders_yields_its_keys_not_batches(tmp_path):
    for loaders in ("dataloaders", '{"train": train_dl, "val": val_dl}'):
        src = PHASE_KEYS
        if loaders != "dataloaders":
            src = src.replace("def train_model(model, criterion, optimizer, dataloaders,",
                              "def train_model(model, criterion, optimizer, train_dl, val_dl,")
            src = src.replace("    best_acc = 0.0\n",
                              f"    best_acc = 0.0\n    dataloaders = {loaders}\n")
        got = found(program(tmp_path / str(len(loaders)), {"train.py": src}))
        # the per-epoch accuracy is read once per phase, not per batch
        assert ("train.py", line_of(src, "print(\"{} Acc"), "LT001") not in got, got
        assert any(code == "LT006" for _, _, code in got)


BASE_STEP = """
import torch


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model.cuda()
        self.optimizer = optimizer

    def step(self, x, y):
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""

SUB_STEP = """
import torch
from base import Trainer


class MyTrainer(Trainer):
    def step(self, x, y):
        return super().step(x.cuda(), y.cuda())


def main(model, loader):
    trainer = MyTrainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    for x, y in loader:
        trainer.step(x, y)
"""


def test_super_into_a_base_class_of_another_module(tmp_path):
    run = program(tmp_path, {"base.py": BASE_STEP, "train.py": SUB_STEP})
    assert ("base.py", line_of(BASE_STEP, "return loss.item()"), "LT001") in found(run, "LT001")


SELF_READING = """
import torch


def train(model, loader, opt):
    totals = {"loss": 0.0}
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        totals = {
            "loss": totals["loss"] + loss.item(),
        }
"""


def test_a_multi_line_assignment_that_reads_its_own_target(tmp_path):
    run = program(tmp_path, {"train.py": SELF_READING})
    assert not [d for d in run.all_diagnostics if d.kind == "error"], run.all_diagnostics
    assert ("train.py", line_of(SELF_READING, '"loss": totals["loss"] + loss.item()'),
            "LT001") in found(run, "LT001")
