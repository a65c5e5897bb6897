"""Evaluate a checkpoint on a test set and write per-class metrics."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from common import build_model, load_dataset

device = "cuda" if torch.cuda.is_available() else "cpu"


def evaluate(model, loader):
    model.eval()
    n_classes = 10
    confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
    total_loss = 0.0
    for batch_idx, (x, y) in enumerate(loader):  # want: LT013
        x, y = x.to(device), y.to(device)  # want: LT008 LT008
        logits = model(x)
        total_loss += F.cross_entropy(logits, y, reduction="sum").item()  # want: LT001
        preds = logits.argmax(dim=1)
        for t, p in zip(y.tolist(), preds.tolist()):  # want: LT001 LT001
            confusion[t, p] += 1
        wrong = x[preds != y]  # want: LT001
        if batch_idx == 0:
            print("first batch logits", logits[:2])
    return confusion, total_loss


@torch.inference_mode()
def predict(model, loader):
    model.eval()
    scores = []
    for x, _ in loader:
        probs = F.softmax(model(x.to(device)), dim=1)  # want: LT008
        scores.append(probs)
    return torch.cat(scores).cpu()


def main(ckpt):
    model = build_model()
    model.load_state_dict(torch.load(ckpt, map_location="cpu"))
    model = model.to(device)
    loader = DataLoader(load_dataset("test"), batch_size=512, num_workers=8, pin_memory=True)
    confusion, loss = evaluate(model, loader)
    scores = predict(model, loader)
    with open("metrics.json", "w") as fh:
        json.dump({"loss": loss, "confusion": confusion.tolist(),
                   "mean_score": scores.mean().item()}, fh)


if __name__ == "__main__":
    main(sys.argv[1])
