"""The example training written the way most tutorials write it.

It is correct, and slow in the usual ways: the DataLoader decodes in the training
process (num_workers=0), nothing is pinned or prefetched, everything runs in fp32,
and ``loss.item()`` every step makes the host wait for the device every step.
Compare with train_pitstop.py, which trains the same model on the same data.

    python examples/train_naive.py --steps 50
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from example_model import SmallResNet, SyntheticImages, positive_int, usable_device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=positive_int, default=100)
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = usable_device(parser, args.device)
    data = torch.utils.data.DataLoader(SyntheticImages(), batch_size=args.batch_size, shuffle=True)
    model = SmallResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    step = 0
    start = time.perf_counter()
    while step < args.steps:
        for images, labels in data:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            print(f"step {step:4d}  loss {loss.item():.4f}")
            step += 1
            if step == args.steps:
                break
    elapsed = time.perf_counter() - start
    print(f"done: {step} steps in {elapsed:.1f} s ({step * args.batch_size / elapsed:.0f} samples/s)")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit("interrupted") from None
