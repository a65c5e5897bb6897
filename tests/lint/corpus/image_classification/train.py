"""ResNet-18 on an ImageFolder dataset: a typical first training script."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/imagenette")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--log-interval", type=int, default=50)
    return p.parse_args()


def main():
    args = get_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])
    train_set = torchvision.datasets.ImageFolder(f"{args.data}/train", tf)
    val_set = torchvision.datasets.ImageFolder(f"{args.data}/val", tf)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)  # want: LT002 LT003
    val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)  # want: LT004

    model = torchvision.models.resnet18(num_classes=len(train_set.classes)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epochs)

    for epoch in range(args.epochs):
        model.train()
        start = time.time()
        running_loss = 0.0
        correct = 0
        seen = 0
        for i, (images, targets) in enumerate(train_loader):  # want: LT005 LT006 LT011
            images = images.to(device)
            targets = targets.to(device)
            outputs = model(images)
            loss = F.cross_entropy(outputs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()  # want: LT001
            correct += (outputs.argmax(dim=1) == targets).sum().item()  # want: LT001
            seen += targets.size(0)
            if i % args.log_interval == 0:
                print(f"epoch {epoch} step {i} loss {loss.item():.4f}")
        scheduler.step()
        print(f"epoch {epoch}: loss {running_loss / len(train_loader):.3f} "
              f"acc {correct / seen:.3f} time {time.time() - start:.1f}s")
        validate(model, val_loader, device)


def validate(model, loader, device):
    model.eval()
    total, correct = 0, 0
    for images, targets in loader:  # want: LT013
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(images)
        correct += (logits.argmax(1) == targets).sum()
        total += targets.numel()
    print(f"val acc {(correct / total).item():.3f}")


if __name__ == "__main__":
    main()
