"""Property-based tests of every reader of outside input, the way fuzzing tools test
theirs: the facts reader (`doctor --from`), the saved-state reader (`system`), the lint
config reader and the lint entry point, on arbitrary bytes, arbitrary JSON, mutations
of real documents, arbitrary TOML and generated Python source.

The one property: no traceback, and an exit code in the documented set; for input a
user hands in, that set is {0, 1, 2}: never 70, the code of a bug in pitstop.

The commands run in this process (`pitstop.cli.main` with its output captured), so
that hundreds of examples take seconds.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesmith
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pitstop_testing import run_cli_in_process

from pitstop.errors import UsageError
from pitstop.schema import validate
from pitstop.sysroot import Sysroot

HERE = Path(__file__).resolve().parent
USER_INPUT_CODES = {0, 1, 2}

PROPERTY = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="pitstop-prop-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(argv: list[str]) -> tuple[int, str, str]:
    code, out, err = run_cli_in_process(argv)
    assert "Traceback" not in err and "internal error" not in err + out, (argv, err)
    assert code in USER_INPUT_CODES, (argv, code, err)
    return code, out, err


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with one to three places replaced by arbitrary JSON, or removed."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in _paths(doc) if p]
        if not places:
            break
        place = draw(st.sampled_from(places))
        parent = doc
        for key in place[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[place[-1]]
        else:
            parent[place[-1]] = draw(json_values)
    return doc


# ---------------------------------------------------------------- the facts reader

def _real_facts() -> list[dict[str, Any]]:
    from pitstop.doctor.facts import collect
    from pitstop.doctor.probes import ProbeContext

    docs = []
    for root in (None, HERE / "doctor" / "machines" / "rtx4090-workstation"):
        ctx = ProbeContext(sysroot=Sysroot.of(root), data_path="/", environ={})
        docs.append(json.loads(json.dumps(collect(ctx), default=str)))
    return docs


REAL_FACTS = _real_facts()


def _doctor_from(data: bytes) -> tuple[int, str, str]:
    with scratch() as folder:
        path = folder / "facts.json"
        path.write_bytes(data)
        return run(["doctor", "--from", str(path)])


@PROPERTY
@given(st.binary(max_size=4096))
def test_facts_reader_on_arbitrary_bytes(data: bytes) -> None:
    _doctor_from(data)


@PROPERTY
@given(json_values)
def test_facts_reader_on_arbitrary_json(doc: Any) -> None:
    _doctor_from(json.dumps(doc).encode())


@PROPERTY
@given(st.sampled_from(REAL_FACTS).flatmap(mutated))
def test_facts_reader_on_mutated_real_facts(doc: Any) -> None:
    for args in (["--json"], ["--all"]):  # --all's table has every row the plain one has
        with scratch() as folder:
            path = folder / "facts.json"
            path.write_text(json.dumps(doc))
            run(["doctor", "--from", str(path), *args])


def _recorded_machines_facts() -> list[tuple[str, dict[str, Any]]]:
    from pitstop.doctor.facts import collect
    from pitstop.doctor.probes import ProbeContext

    machines = sorted(p for p in (HERE / "doctor" / "machines").iterdir() if p.is_dir())
    return [(m.name, json.loads(json.dumps(collect(ProbeContext(
        sysroot=Sysroot.of(m), data_path="/", environ={})), default=str))) for m in machines]


def _places(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key of every object in ``doc``; of a list, its first item's (the others
    have the same shape), and likewise of a map of many alike values (a governor per
    CPU, a version per package)."""
    if isinstance(doc, dict):
        alike = len(doc) > 4 and len({type(v) for v in doc.values()}) == 1
        for key, value in list(doc.items())[:2] if alike else doc.items():
            yield (*prefix, key)
            yield from _places(value, (*prefix, key))
    elif isinstance(doc, list) and doc:
        yield from _places(doc[0], (*prefix, 0))


# Besides removing a field or making it null: a value of the same type that no probe
# writes (a version that is no number, a zero limit, a negative count).
ODD_VALUES: dict[type, tuple[Any, ...]] = {str: ("", "abc"), int: (0, -1), float: (0.0,)}


def _accepted(facts: dict[str, Any], section: str) -> bool:
    """Whether `doctor --from` takes ``facts`` in which only ``section`` changed (the
    others are as recorded, and valid: checking the one section is what takes time)."""
    from pitstop.doctor.facts import REQUIRED_SECTIONS
    from pitstop.doctor.schema import FACTS_SECTIONS

    if section not in facts:
        return section not in REQUIRED_SECTIONS
    return validate(facts[section], FACTS_SECTIONS.get(section, {"type": "object"}),
                    section) is None


def test_every_field_of_every_recorded_machine_removed_nulled_or_odd() -> None:
    """Exhaustive where the property tests sample: each field of the facts of every
    recorded machine, one at a time, removed, set to null and set to an odd value of its
    type. Either the facts reader refuses the document (exit 2, one line) or every check
    runs to a verdict: none fails with an internal error (a KeyError in a check met a
    field the schema let through)."""
    from pitstop.doctor.checks import run_checks

    failures: dict[tuple[str, str], str] = {}
    for machine, facts in _recorded_machines_facts():
        for place in list(_places(facts)):
            if place[0] in ("meta", "schema_version"):
                continue
            parent = facts
            for key in place[:-1]:
                parent = parent[key]
            kept = parent[place[-1]]
            for change in ("remove", None, *ODD_VALUES.get(type(kept), ())):
                if change == "remove":
                    del parent[place[-1]]
                else:
                    parent[place[-1]] = change
                try:
                    if _accepted(facts, place[0]):
                        for r in run_checks(facts):
                            if "internal error" in r.summary:
                                failures.setdefault((r.code, r.summary[:90]),
                                                    f"{machine} {place} = {change!r}")
                finally:
                    parent[place[-1]] = kept
    assert not failures, failures


def test_real_facts_still_diagnose() -> None:
    for doc in REAL_FACTS:  # the property must not hold only because everything is refused
        with scratch() as folder:
            (folder / "f.json").write_text(json.dumps(doc))
            code, out, _ = run(["doctor", "--from", str(folder / "f.json"), "--json"])
            assert code in (0, 1) and json.loads(out)["checks"]


# ---------------------------------------------------------------- the saved-state reader

@pytest.fixture(scope="module")
def state_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A fake machine and the real state `apply --yes` saved there (several settings,
    file writes and commands, to mutate)."""
    root = tmp_path_factory.mktemp("state") / "machine"
    shutil.copytree(HERE / "system" / "machines" / "workstation-4090", root, symlinks=True)
    code, _, err = run(["system", "apply", "--yes", "--sysroot", str(root)])
    assert code == 0, err
    doc: dict[str, Any] = json.loads(_state_path(root).read_text())
    assert len(doc["entries"]) >= 3
    return root, doc


def _state_path(root: Path) -> Path:
    return root / "var/lib/pitstop/state.json"


def _load_state(root: Path, data: bytes) -> None:
    from pitstop.system.state import State

    path = _state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o644)
    with contextlib.suppress(UsageError):
        State.load(Sysroot.of(root))
    run(["system", "revert", "--sysroot", str(root)])
    run(["system", "show", "--sysroot", str(root), "--json"])


@PROPERTY
@given(st.binary(max_size=4096))
def test_state_reader_on_arbitrary_bytes(state_tree: tuple[Path, Any], data: bytes) -> None:
    _load_state(state_tree[0], data)


@PROPERTY
@given(json_values)
def test_state_reader_on_arbitrary_json(state_tree: tuple[Path, Any], doc: Any) -> None:
    _load_state(state_tree[0], json.dumps(doc).encode())


@PROPERTY
@given(st.data())
def test_state_reader_on_mutated_real_state(state_tree: tuple[Path, Any],
                                            data: st.DataObject) -> None:
    root, real = state_tree
    _load_state(root, json.dumps(data.draw(mutated(real))).encode())


# ---------------------------------------------------------------- the lint config reader

TRAIN = ("import torch\n"
         "for x, y in loader:\n"
         "    with torch.cuda.amp.autocast():\n"
         "        loss = model(x.cuda())\n"
         "    print(loss.item())\n")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, int) or value != int(value) else f"{value:.1f}"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()
                               if v is not None) + "}"
    return '""'  # TOML has no null


CODES = st.sampled_from(["LT", "LT001", "LT007", "LT999", "sync", "amp-deprecated", "", "X",
                         "lt0", "DR001"])
CONFIG_VALUES = st.one_of(json_values, st.lists(CODES, max_size=3), CODES,
                          st.dictionaries(st.sampled_from(["*.py", "x.py", "tests/*", ""]),
                                          st.lists(CODES, max_size=2), max_size=2))


@st.composite
def pyproject_text(draw: st.DrawFn) -> str:
    shape = draw(st.sampled_from(["section", "tool", "pitstop", "text"]))
    if shape == "text":
        return draw(st.text(max_size=300))
    if shape == "tool":
        return f"tool = {_toml_value(draw(json_values))}\n"
    if shape == "pitstop":
        return f"[tool]\npitstop = {_toml_value(draw(json_values))}\n"
    keys = st.sampled_from(["select", "ignore", "per-file-ignores", "exclude", "other"])
    body = draw(st.dictionaries(keys, CONFIG_VALUES, max_size=4))
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items() if v is not None]
    return "[tool.pitstop.lint]\n" + "\n".join(lines) + "\n"


@PROPERTY
@given(pyproject_text())
def test_config_reader_on_arbitrary_pyproject(text: str) -> None:
    from pitstop.lint.config import load_config

    with scratch() as folder:
        (folder / "pyproject.toml").write_text(text, encoding="utf-8")
        (folder / "x.py").write_text(TRAIN)
        with contextlib.suppress(UsageError):
            load_config(folder / "pyproject.toml")
        run(["lint", "-j", "1", str(folder / "x.py"), "--config",
             str(folder / "pyproject.toml")])


# ---------------------------------------------------------------- the lint entry point

@st.composite
def training_source(draw: st.DrawFn) -> str:
    """Python in the shapes the linter analyses: loops over loaders, syncs, AMP, loader
    construction, nested functions, with random names and arguments."""
    name = st.sampled_from(["loader", "train_loader", "dl", "data", "batches", "x", "self.loader"])
    call_args = st.lists(st.sampled_from(
        ["num_workers=0", "num_workers=4", "pin_memory=True", "batch_size=32", "shuffle=True",
         "persistent_workers=True", "ds", "*a", "**k", "prefetch_factor=2"]), max_size=4,
        unique_by=lambda a: a.split("=")[0]).map(
        lambda args: sorted(args, key=lambda a: ("=" in a) + 2 * a.startswith("**")))
    body = st.sampled_from([
        "loss = model(x)", "print(loss.item())", "loss.backward()", "optimizer.step()",
        "optimizer.zero_grad()", "x = x.cuda()", "x = x.to('cuda')", "y = x.cpu().numpy()",
        "with torch.cuda.amp.autocast():\n        loss = model(x)",
        "with torch.no_grad():\n        out = model(x)", "total += loss.item()",
        "if i % 10 == 0:\n        print(loss.item())", "t = torch.tensor([1.0]).cuda()",
        "scaler = torch.cuda.amp.GradScaler()", "continue", "break", "pass",
        "model = torch.nn.DataParallel(model)", "torch.autograd.set_detect_anomaly(True)"])
    lines = ["import torch", "from torch.utils.data import DataLoader"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["loader", "loop", "def", "epochs"]))
        if kind == "loader":
            lines.append(f"loader = DataLoader({', '.join(draw(call_args))})")
        elif kind == "loop":
            lines.append(f"for i, (x, y) in enumerate({draw(name)}):")
            lines += ["    " + b for b in draw(st.lists(body, min_size=1, max_size=4))]
        elif kind == "epochs":
            lines.append("for epoch in range(10):")
            lines.append(f"    for x, y in {draw(name)}:")
            lines += ["        " + b.replace("\n    ", "\n        ")
                      for b in draw(st.lists(body, min_size=1, max_size=3))]
        else:
            lines.append(f"def {draw(st.sampled_from(['train', 'step', 'run', 'main']))}(model, loader):")
            lines.append(f"    for x, y in {draw(name)}:")
            lines += ["        " + b.replace("\n    ", "\n        ")
                      for b in draw(st.lists(body, min_size=1, max_size=3))]
    return "\n".join(lines) + "\n"


def _lint_file(source: bytes, *extra: str) -> tuple[int, bytes]:
    with scratch() as folder:
        path = folder / "train.py"
        path.write_bytes(source)
        code, _, _ = run(["lint", "-j", "1", *extra, str(path)])
        return code, path.read_bytes()


@PROPERTY
@given(st.binary(max_size=2048))
def test_lint_on_arbitrary_bytes(data: bytes) -> None:
    _lint_file(data)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # the odd programs it generates
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_grammar())
def test_lint_on_generated_python(source: str) -> None:
    _lint_file(("import torch\n" + source).encode("utf-8", "surrogatepass"))


@PROPERTY
@given(training_source())
def test_lint_fix_on_training_loops_keeps_valid_python(source: str) -> None:
    ast.parse(source)  # the generator makes valid Python
    _lint_file(source.encode(), "--diff")
    _code, fixed = _lint_file(source.encode(), "--fix", "--unsafe-fixes")
    ast.parse(fixed)  # whatever was fixed, the file still parses


# ---------------------------------------------------------------- monitor recordings

@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """A real `monitor --record` recording, with a recorded H100 (GPU panels, gpm):
    its header line and its snapshots."""
    path = tmp_path_factory.mktemp("rec") / "run.jsonl"
    nvml = HERE / "monitor" / "nvml" / "h100-sxm-compute.json"
    code, _, err = run(["monitor", "--nvml-recording", str(nvml), "--record", str(path),
                        "--duration", "0.5", "--interval", "0.2"])
    assert code == 0, err
    head, *lines = path.read_text().splitlines()
    return head, [json.loads(line) for line in lines]


@settings(PROPERTY, max_examples=15)  # a recording that passes is plotted (~0.5 s)
@given(st.data())
def test_plot_on_mutated_real_recordings(recording: tuple[str, list[dict[str, Any]]],
                                        data: st.DataObject) -> None:
    head, snapshots = recording
    changed = data.draw(st.integers(0, len(snapshots) - 1))
    lines = [json.dumps(data.draw(mutated(s)) if i == changed else s)
             for i, s in enumerate(snapshots)]
    with scratch() as folder:
        (folder / "run.jsonl").write_text("\n".join([head, *lines]) + "\n")
        code, _, _ = run(["plot", str(folder / "run.jsonl"), "-o", str(folder / "run.html")])
        assert code in (0, 2)


def test_a_deep_or_endless_recording_line_is_refused(tmp_path: Path,
                                                     recording: tuple[str, Any]) -> None:
    for name, line in (("deep", "[" * 100_000 + "]" * 100_000), ("long", "1" * (17 << 20))):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(recording[0] + "\n" + line + "\n")
        for argv in (["plot", str(path), "-o", str(tmp_path / "p.png")],
                     ["monitor", "--replay", str(path)]):
            code, _out, err = run(argv)
            assert code == 2 and "line 2" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "p.png").exists()


# ---------------------------------------------------------------- the validator itself

@given(json_values)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_the_validator_agrees_with_jsonschema_on_the_facts_schema(doc: Any) -> None:
    from pitstop.doctor.schema import FACTS_SCHEMA

    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool))
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    for candidate in (doc, {"schema_version": 1, "nvml": doc},
                      {"schema_version": 1, "storage": {"disks": [doc]}}):
        ours = validate(candidate, FACTS_SCHEMA) is None
        theirs = strict(FACTS_SCHEMA).is_valid(candidate)
        assert ours == theirs, (candidate, validate(candidate, FACTS_SCHEMA))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.data())
def test_the_validator_agrees_with_jsonschema_on_the_snapshot_schema(
        recording: tuple[str, list[dict[str, Any]]], data: st.DataObject) -> None:
    from pitstop.monitor.snapshot import SNAPSHOT_SCHEMA  # anyOf, const, enum, required

    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool))
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    doc = data.draw(st.sampled_from(recording[1]).flatmap(mutated))
    assert (validate(doc, SNAPSHOT_SCHEMA) is None) == strict(SNAPSHOT_SCHEMA).is_valid(doc), \
        validate(doc, SNAPSHOT_SCHEMA)


def test_every_schema_is_valid_json_schema() -> None:
    from pitstop.doctor.schema import FACTS_SCHEMA
    from pitstop.system.state import STATE_SCHEMA
    from pitstop.train.loader import CONFIG_SCHEMA

    for schema in (FACTS_SCHEMA, STATE_SCHEMA, *CONFIG_SCHEMA.values()):
        jsonschema.Draft202012Validator.check_schema(schema)
    assert os.environ.get("PITSTOP_DEBUG") is None  # the property runs without --debug
