"""Less noise (issue 10, cause 7): test code is left out of the hot-loop and loader rules
by default (a config key and an option put it back); code under opt-in flags is rare."""

from __future__ import annotations

import json

TRAIN_TEST = """\
import torch
from torch.utils.data import DataLoader, Dataset


def test_model_learns():
    loader = DataLoader(FakeImages(), batch_size=4)
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        opt.step()
        assert loss.item() < 10
    scaler = torch.cuda.amp.GradScaler()
"""


def _codes(r) -> set[str]:
    return {f["code"] for f in json.loads(r.stdout) if f["code"]}


def test_test_code_is_left_out_of_hot_loop_rules(tmp_path, pitstop_cli) -> None:
    for rel in ("tests/test_train.py", "pkg/test_loop.py", "pkg/loop_test.py", "conftest.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(TRAIN_TEST)
    r = pitstop_cli("lint", str(tmp_path), "--format", "json")
    # only the deprecated-API rule still applies to tests
    assert _codes(r) == {"LT007"}, r.stdout
    r = pitstop_cli("lint", str(tmp_path), "--format", "json", "--include-tests")
    assert {"LT001", "LT002"} <= _codes(r)
    (tmp_path / "pyproject.toml").write_text("[tool.pitstop.lint]\ninclude-tests = true\n")
    r = pitstop_cli("lint", str(tmp_path), "--format", "json")
    assert {"LT001", "LT002"} <= _codes(r)


def test_folders_above_the_linted_path_do_not_make_it_test_code(tmp_path, pitstop_cli) -> None:
    # Linting tests/fixtures/train.py by name, or the folder itself: its own code.
    d = tmp_path / "tests" / "fixtures"
    d.mkdir(parents=True)
    (d / "train.py").write_text(TRAIN_TEST.replace("def test_model_learns", "def main"))
    r = pitstop_cli("lint", str(d), "--format", "json")
    assert "LT001" in _codes(r)


def test_a_script_named_like_a_test_but_written_as_a_training_script_is_linted(
        tmp_path, pitstop_cli) -> None:
    # `word_lm_test.py` trains a model end to end: no test function, no test framework
    script = TRAIN_TEST.replace("def test_model_learns():", "def main():") + "\nmain()\n"
    for rel in ("lm/word_lm_test.py", "lm/tests/check_test.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(script)
    r = pitstop_cli("lint", str(tmp_path / "lm" / "word_lm_test.py"), "--format", "json")
    assert {"LT001", "LT002"} <= _codes(r), r.stdout
    # one test function or a test framework is enough to make it test code again
    for extra in ("\n\ndef test_shapes():\n    pass\n", "\nimport pytest\n",
                  "\nclass TestLoop(unittest.TestCase):\n    pass\n"):
        (tmp_path / "lm" / "word_lm_test.py").write_text(script + extra)
        r = pitstop_cli("lint", str(tmp_path / "lm" / "word_lm_test.py"), "--format", "json")
        assert _codes(r) == {"LT007"}, (extra, r.stdout)
