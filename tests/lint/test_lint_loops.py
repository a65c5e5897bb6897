"""The loop model (issue 10, cause 2): training loops hidden behind callable objects,
accelerate, Trainer methods, loader wrappers, prefetchers, `while True: next(it)`,
generators and engines are recognised; rare guards and one-shot loops are not hot."""

from __future__ import annotations

import textwrap

import pytest
from lint_helpers import found, program

from pitstop.lint import lint_source

HEAD = "import torch\ndevice = torch.device('cuda')\n"


def _sync_lines(src: str) -> list[int]:
    return [f.line for f in lint_source(HEAD + textwrap.dedent(src), select=("LT001",))]


@pytest.mark.parametrize("wrapped", [
    "metric_logger.log_every(data_loader, 10, header)",
    "tqdm(data_loader, desc='train')",
    "enumerate(data_loader)",
    "zip(data_loader, range(100))",
    "itertools.islice(data_loader, 500)",
])
def test_loaders_wrapped_in_iterators(wrapped) -> None:
    got = _sync_lines(f"""
        def train_one_epoch(model, data_loader, optimizer):
            for batch in {wrapped}:
                loss = model(batch.to(device)).mean()
                loss.backward()
                optimizer.step()
                loss_value = loss.item()
        """)
    assert got == [9], wrapped


def test_accelerator_backward_and_accumulate() -> None:
    got = _sync_lines("""
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="bf16")
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            total = batch["labels"].sum().item()
        """)
    assert got == [14]  # the prepared loader's batches are already on the GPU


def test_while_true_with_next() -> None:
    got = _sync_lines("""
        def train(model, loader, opt, max_steps):
            it = iter(loader)
            step = 0
            while True:
                x, y = next(it)
                x, y = x.to(device), y.to(device)
                loss = model(x, y)
                loss.backward()
                opt.step()
                print(f"{step} {loss}")
                step += 1
        """)
    assert got == [13]


def test_generator_that_yields_from_a_loader(tmp_path) -> None:
    run = program(tmp_path, {"train.py": """
        import torch

        def cycle(dl):
            while True:
                for data in dl:
                    yield data

        class Trainer:
            def __init__(self, model, dl, device):
                self.model = model
                self.dl = cycle(dl)
                self.opt = torch.optim.Adam(model.parameters())
                self.device = device

            def train(self, steps):
                for _ in range(steps):
                    data = next(self.dl).to(self.device)
                    loss = self.model(data)
                    loss.backward()
                    self.opt.step()
                    total = loss.item()
        """}, select=("LT001",))
    assert found(run) == {("train.py", 21, "LT001")}


def test_prefetcher_class_and_trainer_methods(tmp_path) -> None:
    run = program(tmp_path, {"train.py": """
        import torch

        class DataPrefetcher:
            def __init__(self, loader):
                self.loader = loader
                self.stream = torch.cuda.Stream()

            def __iter__(self):
                for batch in self.loader:
                    yield [t.cuda(non_blocking=True) for t in batch]

        class Trainer:
            def __init__(self, model, optimizer, train_loader):
                self.model = model.cuda()
                self.optimizer = optimizer
                self.train_loader = train_loader

            def training_step(self, x, y):
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                return loss

            def fit(self):
                for epoch in range(10):
                    for x, y in DataPrefetcher(self.train_loader):
                        loss = self.training_step(x, y)
                        if torch.isnan(loss):
                            raise RuntimeError("nan")
        """}, select=("LT001",))
    assert found(run) == {("train.py", 28, "LT001")}


def test_ignite_engine_step_function(tmp_path) -> None:
    run = program(tmp_path, {"main.py": """
        import torch
        from ignite.engine import Engine, Events

        device = "cuda"

        def main(model, optimizer, criterion, train_loader):
            model = model.to(device)

            def train_step(engine, batch):
                x, y = batch[0].to(device), batch[1].to(device)
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return {"batch loss": loss.item()}

            trainer = Engine(train_step)
            trainer.run(train_loader, max_epochs=10)
        """}, select=("LT001",))
    assert found(run) == {("main.py", 15, "LT001")}


def test_rare_guards_and_one_shot_loops() -> None:
    got = _sync_lines("""
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--synchronize_step", action="store_true")
        p.add_argument("--log_every", type=int, default=100)
        args = p.parse_args()

        def train(model, loader, opt, grad_accum=4, profile=False):
            for step, (x, y) in enumerate(loader):
                loss = model(x.to(device), y.to(device))
                loss.backward()
                if (step + 1) % grad_accum == 0:      # the optimizer step: every 4 batches
                    opt.step()
                    print(loss.item())               # flagged: not a rare guard
                if args.synchronize_step:            # opt-in, off by default
                    torch.cuda.synchronize()
                if step % args.log_every == 0:
                    print(loss.item())
                if profile:
                    torch.cuda.synchronize()

        def throughput(model, loader):
            for x, _ in loader:
                model(x.to(device))
                torch.cuda.synchronize()
                return                               # one batch, then done: not a loop

        def evaluate(model, loader, use_fsdp=False):
            if use_fsdp:                             # an opt-in path around the loop
                while True:
                    batch = next(loader)
                    out = model(batch.to(device))
                    if out.sum().item() == 0:
                        break
        """)
    assert got == [16]


def test_lightning_hook_batch_is_on_the_device_its_other_arguments_are_not() -> None:
    src = textwrap.dedent("""
        import torch
        import lightning as L

        class Seq2Seq(L.LightningModule):
            def training_step(self, batch, batch_idx):
                loss = self.loss(self(*batch[:-1]), batch[-1])
                self.log("n", batch[-1].sum().item())
                return loss

            def predict_step(self, batch, device, num_steps, save_attention_weights=False):
                outputs = []
                for _ in range(num_steps):
                    if save_attention_weights:
                        outputs.append(self.decoder.attention_weights)
                return outputs

        trainer = L.Trainer(accelerator="gpu")
        """)
    got = {(f.line, f.code) for f in lint_source(src, select=("LT001",))}
    assert got == {(8, "LT001")}


def test_loops_over_the_programs_parts_are_not_training_loops() -> None:
    got = _sync_lines("""
        def finetune_once(model, optimizers, batch):
            loss = model(batch.to(device)).mean()
            for optim in optimizers:                 # once per optimizer, not per batch
                loss.backward(retain_graph=True)
                optim.step()
                print(loss.item())
            for i, group in enumerate(optimizers[0].param_groups):
                group["lr"] *= 0.5
                optimizers[0].step()
                print(loss.item())
            for name, p in model.named_parameters():
                loss.backward(retain_graph=True)
                print(loss.item())

        def train(model, loader, optimizers):
            for x in loader:                         # the batch loop around it is hot
                loss = model(x.to(device)).mean()
                loss.backward()
                for opt in optimizers:
                    opt.step()
                print(loss.item())
        """)
    assert got == [24]


@pytest.mark.parametrize(("period", "flagged"), [("1", True), ("10", False)])
def test_a_logging_guard_whose_period_defaults_to_one_runs_every_step(period, flagged) -> None:
    got = _sync_lines(f"""
        from myproject.args import TrainArgs

        def setup(train: TrainArgs = TrainArgs(save_interval=1000, log_interval={period})):
            main(train)

        def fit(model, optimizer, loader, train):
            for iter_num, batch in enumerate(loader, 1):
                loss = model(batch.to(device)).mean()
                loss.backward()
                optimizer.step()
                if iter_num % train.log_interval == 0:
                    print(loss.item())

        def evaluate(model, loader, print_every=1):
            for i, batch in enumerate(loader):
                out = model(batch.to(device))
                if i % print_every == 0:
                    print(out.mean().item())
        """)
    assert got == ([15, 21] if flagged else [21])
