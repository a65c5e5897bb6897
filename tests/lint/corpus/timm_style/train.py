"""train_one_epoch in the style of timm: meters updated only at log steps (with a
synchronize() there, to time honestly), AMP through torch.autocast, channels_last, a
prefetching loader, and an EMA model."""
import time
from contextlib import suppress

import torch
import torch.nn as nn

from helpers import AverageMeter, create_loader, create_model


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, amp_autocast=suppress,
                    loss_scaler=None, model_ema=None):
    batch_time_m = AverageMeter()
    losses_m = AverageMeter()
    model.train()
    end = time.time()
    last_idx = len(loader) - 1
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_idx
        input, target = input.cuda(non_blocking=True), target.cuda(non_blocking=True)
        input = input.contiguous(memory_format=torch.channels_last)
        with amp_autocast():
            output = model(input)
            loss = loss_fn(output, target)
        optimizer.zero_grad(set_to_none=True)
        if loss_scaler is not None:
            loss_scaler(loss, optimizer, parameters=model.parameters())
        else:
            loss.backward()
            optimizer.step()
        if model_ema is not None:
            model_ema.update(model)
        if last_batch or batch_idx % args.log_interval == 0:
            losses_m.update(loss.item(), input.size(0))
            torch.cuda.synchronize()
            batch_time_m.update(time.time() - end)
            print(f"Train: {epoch} [{batch_idx}/{last_idx}] Loss: {losses_m.avg:.3f} "
                  f"Time: {batch_time_m.avg:.3f}s")
        end = time.time()
    return losses_m.avg


def main(args):
    torch.backends.cudnn.benchmark = True
    model = create_model(args.model, num_classes=1000).cuda()
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    amp_autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    loader = create_loader(args.data, batch_size=args.batch_size, is_training=True,
                           num_workers=args.workers, pin_memory=True)
    loss_fn = nn.CrossEntropyLoss().cuda()
    for epoch in range(args.epochs):
        train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, amp_autocast)
