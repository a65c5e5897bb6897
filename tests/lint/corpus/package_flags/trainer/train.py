import torch
import torch.nn as nn

from trainer.setup import configure


def run(loader, epochs=5):
    configure()
    model = nn.Sequential(nn.Conv2d(3, 16, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):  # want: LT006
            x = x.cuda(non_blocking=True)
            y = y.cuda(non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 100 == 0:
                print(loss.item())
