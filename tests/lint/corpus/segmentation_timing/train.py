"""A segmentation trainer with habits seen in research code: a synchronize() per step to
time it, a NaN check on the loss every step, an EMA of the weights, gradient-norm logging
under a guard, a per-batch LR scheduler."""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from seg_data import SegDataset


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)  # want: LT016
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        return F.relu(x)


class UNetish(nn.Module):
    def __init__(self, classes=21):
        super().__init__()
        self.enc = nn.Sequential(ConvBlock(3, 32), ConvBlock(32, 64))
        self.head = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        return self.head(self.enc(x))


class EMA:
    def __init__(self, model, decay=0.999):
        self.shadow = copy.deepcopy(model).eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def main():
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    loader = DataLoader(SegDataset("train", crop=512), batch_size=16, shuffle=True,
                        num_workers=8, pin_memory=True, persistent_workers=True,
                        drop_last=True)
    model = UNetish().to(device, memory_format=torch.channels_last)
    ema = EMA(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.01, total_steps=40 * len(loader))
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(40):
        for step, (img, mask) in enumerate(loader):
            t0 = time.perf_counter()
            img = img.to(device, non_blocking=True, memory_format=torch.channels_last)
            mask = mask.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(img), mask, ignore_index=255)
            if torch.isnan(loss):  # want: LT001
                raise FloatingPointError(f"NaN loss at epoch {epoch} step {step}")
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            ema.update(model)
            torch.cuda.synchronize()  # want: LT001
            step_ms = (time.perf_counter() - t0) * 1000
            if step % 20 == 0:
                print(f"{epoch}:{step} loss {loss.item():.3f} |g| {grad_norm.item():.2f} "
                      f"{step_ms:.0f} ms")
        torch.save(ema.shadow.state_dict(), f"ema_{epoch}.pt")


if __name__ == "__main__":
    main()
