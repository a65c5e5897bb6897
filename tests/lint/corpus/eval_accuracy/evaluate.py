"""Three ways to compute accuracy: the count accumulated on the device and read once
after the loop (fine), read with .item() inside the loop (a sync per batch), and an
evaluation function decorated with torch.no_grad() vs one that forgot it."""
import torch
import torch.nn.functional as F


@torch.no_grad()
def accuracy_after_loop(model, loader, device):
    model.eval()
    correct = 0
    total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        pred = model(x).argmax(dim=1)
        correct += (pred == y).sum()
        total += y.size(0)
    return (correct / total).item()


@torch.no_grad()
def accuracy_inside_loop(model, loader, device):
    model.eval()
    correct = 0
    total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        pred = model(x).argmax(dim=1)
        correct += (pred == y).sum().item()  # want: LT001
        total += len(y)
    return correct / total


@torch.inference_mode()
def mean_loss(model, loader, device):
    model.eval()
    losses = []
    for x, y in loader:
        logits = model(x.to(device))
        losses.append(F.cross_entropy(logits, y.to(device)))
    return torch.stack(losses).mean().item()


def accuracy_with_grad(model, loader, device):
    model.eval()
    hits = []
    for x, y in loader:  # want: LT013
        pred = model(x.to(device)).argmax(dim=1)
        hits.append(pred == y.to(device))
    return torch.cat(hits).float().mean().item()


def accuracy_cpu_side(model, loader):
    """The model runs on the CPU here: .item() on CPU tensors is no sync."""
    model = model.cpu()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            pred = model(x).argmax(dim=1)
            correct += (pred == y).sum().item()
    return correct / len(loader.dataset)


if __name__ == "__main__":
    from common import build, test_loader

    dev = torch.device("cuda")
    net = build().to(dev)
    print(accuracy_after_loop(net, test_loader(), dev))
    print(accuracy_inside_loop(net, test_loader(), dev))
    print(mean_loss(net, test_loader(), dev))
    print(accuracy_with_grad(net, test_loader(), dev))
    print(accuracy_cpu_side(net, test_loader()))
