"""Uses the API: ``with pitstop.profile(...) as prof: ... prof.step()``."""
import json
import sys

import torch

import pitstop.profile

out = sys.argv[1]
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(512, 64),
                                                                  torch.randint(0, 8, (512,))),
                                   batch_size=16)
with pitstop.profile(steps=6, warmup=2, out=out, summary=False) as prof:
    for x, y in data:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
# the hooks are gone once the window is over
from torch.utils.data import dataloader  # noqa: E402

print(json.dumps({"verdict": prof.verdict,
                  "steps": len(prof.document["ranks"][0]["steps"]),
                  "unpatched": dataloader._BaseDataLoaderIter.__next__.__module__
                  == "torch.utils.data.dataloader"}))
