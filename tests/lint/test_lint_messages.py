"""True words (issue 10, cause 6): messages state what the analysis established and say
"may" where it inferred; mixed precision set through Accelerate or DeepSpeed counts;
TF32 is raised only where fp32 matmuls run."""

from __future__ import annotations

import textwrap

from pitstop.lint import lint_source

LOOP = """
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


def _lint(prelude: str, select: tuple[str, ...] = ("LT",)) -> list:
    return lint_source(textwrap.dedent(prelude) + LOOP, "train.py", select=select)


def test_certain_gpu_says_so_inferred_gpu_says_may() -> None:
    sure = _lint('import torch\nmodel = Net().cuda()\ndevice = "cuda"\n', ("LT001",))
    maybe = _lint('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() '
                  'else "cpu")\n', ("LT001",))
    assert "copies a GPU scalar" in sure[0].message and "may" not in sure[0].message
    assert "may live on the GPU" in maybe[0].message
    assert "train.py:2" in maybe[0].message  # where the device comes from


def test_mixed_precision_through_accelerate_counts() -> None:
    got = _lint("""
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision=args.mixed_precision)
        device = accelerator.device
        """, ("LT006", "LT011"))
    assert got == []
    # a bare Accelerator() takes its precision from `accelerate config`: not knowable here
    assert _lint("import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
                 "device = accelerator.device\n", ("LT006",)) == []


def test_grad_scaler_alone_is_not_mixed_precision() -> None:
    got = _lint('import torch\nimport torch.nn as nn\nscaler = torch.amp.GradScaler("cuda")\n'
                'model = nn.Linear(8, 8).cuda()\ndevice = "cuda"\n', ("LT006",))
    assert [f.code for f in got] == ["LT006"]


def test_tf32_only_where_fp32_matmuls_run() -> None:
    conv = "import torch\nimport torch.nn as nn\nmodel = nn.Sequential(nn.Conv2d(3, 8, 3), " \
           "nn.ReLU()).cuda()\ndevice = 'cuda'\n"
    mlp = "import torch\nimport torch.nn as nn\nmodel = nn.Sequential(nn.Linear(784, 500), " \
          "nn.ReLU(), nn.Linear(500, 10)).cuda()\ndevice = 'cuda'\n"
    assert [f.code for f in _lint(conv, ("LT011",))] == []
    tf32 = _lint(mlp, ("LT011",))
    assert [f.code for f in tf32] == ["LT011"] and "matmul" in tf32[0].message



def test_tf32_switched_from_a_flag_that_defaults_to_off_stays_off() -> None:
    mlp = "import torch\nimport torch.nn as nn\nmodel = nn.Sequential(nn.Linear(784, 500), " \
          "nn.ReLU(), nn.Linear(500, 10)).cuda()\ndevice = 'cuda'\n"
    off = "def setup(allow_tf32=False):\n    torch.backends.cuda.matmul.allow_tf32 = allow_tf32\n"
    on = "def setup(allow_tf32=True):\n    torch.backends.cuda.matmul.allow_tf32 = allow_tf32\n"
    assert [f.code for f in _lint(mlp + off, ("LT011",))] == ["LT011"]
    assert [f.code for f in _lint(mlp + on, ("LT011",))] == []
    assert [f.code for f in _lint(mlp + "torch.backends.cuda.matmul.allow_tf32 = args.tf32\n",
                                  ("LT011",))] == []

def test_models_built_by_name_from_a_library() -> None:
    # a transformer family's class from a library the program does not show: matmuls
    gpt = "import torch\nfrom litgpt.model import GPT, Config\nmodel = GPT(Config()).cuda()\n" \
          "device = 'cuda'\n"
    assert [f.code for f in _lint(gpt, ("LT011",))] == ["LT011"]
    # torchvision's zoo by name (`models.__dict__[args.arch]`): a conv net
    zoo = "import torch\nfrom torchvision import models\nfn = models.__dict__[args.arch]\n" \
          "model = fn(num_classes=10).cuda()\ndevice = 'cuda'\n"
    assert [f.code for f in _lint(zoo, ("LT005",))] == ["LT005"]


def test_host_to_device_copies_are_not_syncs_in_messages() -> None:
    got = _lint('import torch\ndevice = torch.device("cuda")\n', ("LT001", "LT008"))
    assert [f.line for f in got] == [9]
    assert all(".to(device)" not in f.message for f in got if f.code == "LT001")
