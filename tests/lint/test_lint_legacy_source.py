"""Training code written for Python 2 is linted line for line, with a warning, never
rewritten (a 2017-era video training script: print statements, `except E, e:`, tabs)."""

from __future__ import annotations

import subprocess
import sys

from lint_helpers import found, line_of, program

from pitstop.lint.legacy_source import parse, read_legacy

PY2_TRAIN = """
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


def run(init_lr=0.1, max_steps=64e3, root='/data', batch_size=8):
    dataset = VideoDataset(root, 'training')
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                             num_workers=16, pin_memory=True)
    val_dataset = VideoDataset(root, 'testing')
    val_dataloader = torch.utils.data.DataLoader(val_dataset, batch_size=batch_size,
                                                 shuffle=True, num_workers=16, pin_memory=True)
    dataloaders = {'train': dataloader, 'val': val_dataloader}

    net = nn.Sequential(nn.Conv3d(3, 64, 7), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                        nn.Linear(64, 157))
    net.cuda()
    net = nn.DataParallel(net)
    optimizer = optim.SGD(net.parameters(), lr=init_lr, momentum=0.9, weight_decay=1e-7)

    steps = 0
    while steps < max_steps:
        print 'Step {}/{}'.format(steps, max_steps)
        print '-' * 10
        for phase in ['train', 'val']:
            if phase == 'train':
                net.train(True)
            else:
                net.train(False)
            tot_loss = 0.0
            optimizer.zero_grad()
            for data in dataloaders[phase]:
                inputs, labels = data
                inputs = Variable(inputs.cuda())
                labels = Variable(labels.cuda())
                logits = net(inputs)
                loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
                tot_loss += loss.data[0]
                loss.backward()
                if phase == 'train':
                    optimizer.step()
                    optimizer.zero_grad()
                    steps += 1
            print '{} Tot Loss: {:.4f}'.format(phase, tot_loss)


def load(path):
    try:
\t\tstate = torch.load(path)
    except IOError, e:
        print >>sys.stderr, "cannot read", path, e
        raise ValueError, "no checkpoint"
    return state
"""


def test_a_python_2_training_script_is_linted_as_it_was_meant(tmp_path):
    run = program(tmp_path, {"train.py": PY2_TRAIN})
    got = found(run)
    at = lambda text: line_of(PY2_TRAIN, text)  # noqa: E731
    # the findings of an expert, on the lines the user sees
    assert ("train.py", at("tot_loss += loss.data[0]"), "LT001") in got
    assert ("train.py", at("inputs = Variable(inputs.cuda())"), "LT008") in got
    assert ("train.py", at("labels = Variable(labels.cuda())"), "LT008") in got
    assert ("train.py", at("dataloader = torch.utils"), "LT004") in got
    assert ("train.py", at("val_dataloader = torch.utils"), "LT004") in got
    assert ("train.py", at("net = nn.DataParallel(net)"), "LT015") in got
    assert {"LT005", "LT006"} <= {code for _, _, code in got}
    # one warning, at the first line written for Python 2, that names what it saw
    warnings = [d for d in run.all_diagnostics if d.kind == "warning"]
    assert len(warnings) == 1, warnings
    assert warnings[0].line == at("print 'Step {}/{}'")
    assert "Python 2" in warnings[0].message and "print statement" in warnings[0].message
    assert not [d for d in run.all_diagnostics if d.kind == "error"]
    # the fixer never touches such a file: nothing is offered as fixable
    assert all(f.fix is None for f in run.findings)


def test_fix_leaves_a_python_2_file_byte_for_byte(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PY2_TRAIN)
    proc = subprocess.run([sys.executable, "-m", "pitstop", "lint", "--fix", "--unsafe-fixes",
                           str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # findings, no crash
    assert path.read_text() == PY2_TRAIN
    assert "Python 2" in proc.stderr and "Traceback" not in proc.stderr


def test_each_python_2_construct_is_rewritten_on_its_own_line():
    src = "\n".join([
        "import sys",                                   # 1
        "def f(x, log):",                               # 2
        "    print x,",                                 # 3
        "    print",                                    # 4
        "    print >>log, 'a', x",                      # 5
        "    print 'sum %d' % (x +",                    # 6
        "                     1)  # a comment",         # 7
        "    if x <> 0777: print `x`",                  # 8
        "    try:",                                     # 9
        "        y = 10L",                              # 10
        "    except (IOError, OSError), e:",            # 11
        "        raise ValueError, 'bad %s' % e  # why",  # 12
        "    return ur'\\d'",                           # 13
        "",
    ])
    legacy = read_legacy(src)
    assert legacy is not None
    assert legacy.first_line == 3
    assert legacy.text.count("\n") == src.count("\n")  # no line added or lost
    lines = legacy.text.splitlines()
    assert lines[2] == "    print(x, end=' ')"
    assert lines[3] == "    print"  # a bare print parses today (it does nothing)
    assert lines[4].replace(" ", "") == "print('a',x,file=log)"
    assert lines[5].startswith("    print(") and lines[6] == "                     1))  # a comment"
    assert lines[7] == "    if x != 0o777: print(repr(x))"
    assert lines[9] == "        y = 10"
    assert lines[10] == "    except (IOError, OSError) as e:"
    assert lines[11] == "        raise ValueError('bad %s' % e)  # why"
    assert lines[12] == "    return r'\\d'"
    tree = parse(src, "old.py")
    assert [n.name for n in tree.body[1:]] == ["f"]


def test_code_that_parses_or_is_no_python_is_not_read_as_python_2():
    assert read_legacy("print('fine')\n") is None
    # a docstring line that reads like a print statement is no statement
    assert read_legacy('"""\nprint this\n"""\nx = (\n') is None
    # another language, or Python with a real error, stays an error
    assert read_legacy("fn main() { println!(\"hi\"); }\n") is None
    assert read_legacy("def f(:\n    pass\n") is None


def test_mixed_tab_and_space_indentation_is_read_as_python_2_did():
    src = "def f(x):\n    if x:\n\treturn 1\n    return 2\n"
    legacy = read_legacy(src)
    assert legacy is not None and legacy.kinds == ("indentation tabs",)
    assert [type(n).__name__ for n in parse(src, "t.py").body[0].body] == ["If", "Return"]


def test_a_print_statement_before_a_semicolon_and_a_hash_inside_a_raise_message():
    src = 'def f(x):\n    print "a"; x = 1\n    if x:\n        raise ValueError, "bad # value"\n'
    legacy = read_legacy(src)
    assert legacy is not None
    lines = legacy.text.splitlines()
    assert lines[1] == '    print("a"); x = 1'
    assert lines[3] == '        raise ValueError("bad # value")'


def test_hundreds_of_old_except_clauses_are_read_in_one_pass():
    body = "".join(f"def f{i}(x):\n    try:\n        return x\n    except IOError, e:\n"
                   f"        raise ValueError, 'bad'\n" for i in range(600))
    legacy = read_legacy("import os\n" + body)
    assert legacy is not None and set(legacy.kinds) == {"`except E, e:`", "`raise E, msg`"}
