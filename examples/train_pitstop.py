"""The example training of train_naive.py, written with pitstop.train.

Same model, same data, same optimizer. What changes: global fast settings (cudnn
autotuning, TF32), a DataLoader sized for this machine (workers, pinning, prefetch
depth, persistent workers), the next batch copied to the GPU while the current one
computes, autocast in the precision the device runs fast, and the loss read from the
device only when it is logged.

    python examples/train_pitstop.py --steps 50
"""

from __future__ import annotations

import argparse
import time

import torch
from example_model import SmallResNet, SyntheticImages, positive_int, usable_device

from pitstop.train import DevicePrefetcher, Metrics, TrainStep, every, fast_defaults, loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=positive_int, default=100)
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--accumulate", type=positive_int, default=1)
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp16", "fp32"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--log-every", type=positive_int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = usable_device(parser, args.device)
    print(fast_defaults())
    data = loader(SyntheticImages(), args.batch_size, shuffle=True, device=device)
    print(data.describe())
    model = SmallResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    try:
        train_step = TrainStep(model, optimizer, precision=args.precision, accumulate=args.accumulate)
    except ValueError as exc:  # e.g. --precision fp16 on a CPU: the message names the fix
        parser.error(str(exc))
    print(f"precision: {train_step.precision} ({train_step.precision_reason})")
    metrics = Metrics(device)
    log_now = every(args.log_every)

    step = 0
    start = time.perf_counter()
    while step < args.steps:
        for images, labels in DevicePrefetcher(data, device):
            loss = train_step(images, labels)          # a device tensor: no wait here
            metrics.update("loss", loss, n=len(labels))
            if log_now(step) or step == args.steps - 1:
                print(f"step {step:4d}  loss {metrics.compute()['loss']:.4f}")  # the one sync
                metrics.reset()
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
