"""Checks that pitstop changes nothing the script can see: argv, __main__, output, exit code."""
import json
import sys

import torch

print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__,
                  "sitecustomize_dirs": [p for p in sys.path if p.endswith("_inject")]}))
print("to stderr", file=sys.stderr)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(int(sys.argv[1])):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
sys.exit(int(sys.argv[2]))
