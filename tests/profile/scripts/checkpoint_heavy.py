"""A loop that saves a checkpoint and logs every step: that time is outside the step."""
import logging
import os
import sys

import torch

log = logging.getLogger("train")


def save_checkpoint(model, opt, path):
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)


def main() -> None:
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    path = os.path.join(sys.argv[2], "ckpt.pt")
    for step in range(int(sys.argv[1])):
        x = torch.randn(64, 512)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        save_checkpoint(model, opt, path)
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
