"""The training loop of the package. It never names the framework: the model, the
loader and the optimizer all come from sibling modules -- yet its per-step .item() and
the missing autocast matter as much as anywhere."""
from .data import make_loader
from .model import build_model, build_optimizer


def fit(cfg):
    model = build_model(cfg).cuda()
    optimizer = build_optimizer(model, cfg)
    loader = make_loader("train", cfg.batch_size)
    for epoch in range(cfg.epochs):
        for step, (x, y) in enumerate(loader):  # want: LT006 LT011
            x = x.cuda(non_blocking=True)
            y = y.cuda(non_blocking=True)
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(f"step {step} loss {loss.item():.3f}")  # want: LT001
