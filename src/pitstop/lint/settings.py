"""What a program's command-line options and config classes default to.

``parser.add_argument("--device", default="cuda")``, ``--num_workers`` with ``default=0``,
``--synchronize_step`` with ``action="store_true"``, a ``@dataclass`` config with
``num_workers: int = 4``, ``field(default=...)``: the analysis reads ``args.device``,
``cfg.num_workers`` and ``if args.synchronize_step:`` through these defaults (a flag that
defaults to False is an opt-in, so the code under it is rare).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pitstop.lint.astutil import callee_tail, dotted, kwarg


class _Unknown:
    """A default that is not a literal (one object, also after pickling)."""

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
# Names of objects that hold parsed options or a config (`args.device`, `self.cfg.workers`).
_CONFIG_NAMES = r"(Config|Args|Arguments|Options|Settings|H[Pp]arams|HyperParams|Namespace)"
CONFIG_CLASS_RE = re.compile(_CONFIG_NAMES + "$|^(CFG|Cfg|Hyp|HP|Opts?)$")
# Modules of plain constants a program imports as its configuration (`import config as
# CFG` ... `num_workers=CFG.num_workers`)
# (`Config.py` as well: `import Config as config`)
CONFIG_MODULE_RE = re.compile(r"^(config|configs|cfg|conf|settings|hparams|hyperparams|params|"
                              r"options|opts)$", re.IGNORECASE)
# Module-level config objects filled field by field (`config = edict()`, `_C = CN()`)
CONFIG_OBJECTS = frozenset({"edict", "EasyDict", "CN", "CfgNode", "ConfigDict", "AttrDict",
                            "Namespace", "SimpleNamespace", "Dict", "DotMap", "Munch"})
# a config object built, in a module's text (`Namespace(` is one of the names above; a bare
# `Dict(` is too common a text to make a module worth reading in full)
CONFIG_CALL_RE = re.compile(_CONFIG_NAMES + r"\(|\b(" + "|".join(
    sorted(CONFIG_OBJECTS - {"Namespace", "SimpleNamespace", "Dict"})) + r")\(")
OPTIONS_OWNER_RE = re.compile(
    r"^(args?|opts?|options|cfg|conf|configs?|hparams|hps?|params|flags|FLAGS|settings|a|"
    r"hyp|hyperparams?|parsed|cli)$|args$|_args$|config$|_cfg$|cfg$|opt$",
    re.IGNORECASE)


@dataclass(frozen=True)
class Setting:
    """One option: its default (a Python literal, or UNKNOWN), its choices, where."""

    name: str
    default: object
    choices: tuple[object, ...]
    line: int
    path: str
    flag: str = ""  # "--device" as written

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def values(self) -> tuple[object, ...]:
        """Every value the option can take that the code spells out."""
        out = [] if self.default is UNKNOWN else [self.default]
        out.extend(c for c in self.choices if c not in out)
        return tuple(out)


def _literal(node: ast.AST | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _dest(call: ast.Call) -> tuple[str, str] | None:
    kw = kwarg(call, "dest")
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not flags:
        return None
    long = next((f for f in flags if f.startswith("--")), flags[0])
    if kw is not None and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
        return kw.value.value, long
    return long.lstrip("-").replace("-", "_"), long


def argparse_settings(calls_by_tail: dict[str, list[ast.Call]], path: str) -> dict[str, Setting]:
    """Options declared with ``add_argument`` / ``set_defaults`` in one module."""
    out: dict[str, Setting] = {}
    for call in calls_by_tail.get("add_argument", ()):
        d = _dest(call)
        if d is None:
            continue
        name, flag = d
        action = kwarg(call, "action")
        act = action.value.value if action is not None and isinstance(action.value, ast.Constant) else None
        default_kw = kwarg(call, "default")
        if default_kw is not None:
            default = _literal(default_kw.value)
        elif act == "store_true":
            default = False
        elif act == "store_false":
            default = True
        else:
            default = None
        choices_kw = kwarg(call, "choices")
        choices: tuple[object, ...] = ()
        if choices_kw is not None:
            c = _literal(choices_kw.value)
            if isinstance(c, (list, tuple, set)):
                choices = tuple(c)
        out[name] = Setting(name, default, choices, call.lineno, path, flag)
    for call in calls_by_tail.get("set_defaults", ()):
        for kw in call.keywords:
            if kw.arg:
                old = out.get(kw.arg)
                out[kw.arg] = Setting(kw.arg, _literal(kw.value), old.choices if old else (),
                                      call.lineno, path, old.flag if old else "")
    return out


def _is_config_class(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        name = dotted(d.func if isinstance(d, ast.Call) else d) or ""
        if name.rsplit(".", 1)[-1] in {"dataclass", "define", "attrs", "frozen"}:
            return True
    bases = {(dotted(b) or "").rsplit(".", 1)[-1] for b in cls.bases}
    return bool(bases & {"BaseModel", "BaseSettings", "NamedTuple", "TrainingArguments",
                         "Config", "PretrainedConfig", "Namespace"}) or bool(
        CONFIG_CLASS_RE.search(cls.name))


def class_settings(classes: dict[str, ast.ClassDef], path: str) -> dict[str, Setting]:
    """Fields of config classes: ``num_workers: int = 4``, ``x: int = field(default=0)``."""
    out: dict[str, Setting] = {}
    for cls in classes.values():
        if not _is_config_class(cls):
            continue
        for stmt in cls.body:
            target: ast.expr | None = None
            value: ast.expr | None = None
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            if not isinstance(target, ast.Name) or value is None:
                continue
            if isinstance(value, ast.Call) and callee_tail(value) == "field":
                dk = kwarg(value, "default")
                default = _literal(dk.value) if dk is not None else UNKNOWN
            else:
                default = _literal(value)
            out.setdefault(target.id, Setting(target.id, default, (), stmt.lineno, path))
    return out


def constructor_settings(calls_by_tail: dict[str, list[ast.Call]], path: str,
                         ) -> dict[str, Setting]:
    """Literal keywords given to a config class's constructor (``train: TrainArgs =
    TrainArgs(log_interval=1, epochs=5)`` in an entry point's signature): the values the
    program runs with where the class itself is not linted."""
    out: dict[str, Setting] = {}
    for tail, calls in calls_by_tail.items():
        if not CONFIG_CLASS_RE.search(tail):
            continue
        for call in calls:
            for kw in call.keywords:
                if kw.arg:
                    value = _literal(kw.value)
                    if value is not UNKNOWN:
                        out.setdefault(kw.arg, Setting(kw.arg, value, (), call.lineno, path))
    return out


def module_settings(body: list[ast.stmt], path: str) -> dict[str, Setting]:
    """The literal constants at the top of a config module (`config.py`: `num_workers =
    0`, `debug = True`), which the program reads as `CFG.num_workers`."""
    import os

    if CONFIG_MODULE_RE.match(os.path.splitext(os.path.basename(path))[0]) is None:
        return {}
    out: dict[str, Setting] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            value = _literal(stmt.value)
            if value is not UNKNOWN:
                name = stmt.targets[0].id
                out.setdefault(name, Setting(name, value, (), stmt.lineno, path))
    return out


def attribute_settings(body: list[ast.stmt], path: str) -> dict[str, Setting]:
    """Fields a config module sets on a ``config = edict()`` (yacs' ``_C.SOLVER.BASE_LR =
    0.1`` alike): at its top (``config.TEST.FLIP_TEST = False``; the first of a name wins,
    as before), or in functions that build and return one (``def get_config(): conf =
    edict(); conf.pin_memory = True``): the defaults the program runs with unless a YAML
    file says otherwise. A field the functions give two different literals (``if
    training: ... else: ...``, or `get_train_config()` and `get_eval_config()`) has no one
    default, and none is claimed."""
    top = [s for s in body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef))]
    out: dict[str, Setting] = {}
    for name, setting in _config_fields(top, top, path):
        if setting.default is not UNKNOWN:
            out.setdefault(name, setting)
    found: dict[str, Setting] = {}
    conflicting: set[str] = set()
    for fn in body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)]
        for name, setting in _config_fields(fn.body, assigns, path):
            known = found.get(name)
            if setting.default is UNKNOWN or (known is not None
                                              and known.default != setting.default):
                conflicting.add(name)
            elif known is None:
                found[name] = setting
    for name, setting in found.items():
        if name not in conflicting and name not in out:
            out[name] = setting
    return out


def _config_fields(body: list[ast.stmt], assigns: list[ast.stmt] | list[ast.Assign],
                   path: str) -> list[tuple[str, Setting]]:
    """(field, setting) for each `root.field = literal` in ``assigns`` whose root
    ``body`` makes a config object (`conf = edict()`); a non-literal value counts as an
    unknown default (the field is then left out)."""
    roots = {t.id for stmt in body if isinstance(stmt, ast.Assign)
             and isinstance(stmt.value, ast.Call) and callee_tail(stmt.value) in CONFIG_OBJECTS
             for t in stmt.targets if isinstance(t, ast.Name)}
    out: list[tuple[str, Setting]] = []
    if not roots:
        return out
    for stmt in assigns:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Attribute)):
            continue
        target = stmt.targets[0]
        name = dotted(target) or ""
        if name.split(".", 1)[0] not in roots:
            continue
        out.append((target.attr, Setting(target.attr, _literal(stmt.value), (), stmt.lineno,
                                         path)))
    return out


def options_owner(node: ast.AST) -> bool:
    """Is ``node`` (the ``args`` of ``args.device``) an object holding options?"""
    name = dotted(node)
    if not name:
        return False
    # (`config.TEST` of `config.TEST.FLIP_TEST`: a section of a nested config)
    return bool(OPTIONS_OWNER_RE.search(name.rsplit(".", 1)[-1])) or (
        "." in name and name.split(".", 1)[0] in NESTED_CONFIG_ROOTS)


def option_name(v: object) -> str | None:
    """The option a value reads: `args.workers`, `cfg.DATASET.NUM_WORKERS`,
    `config['num_workers']` (a dict of the parsed options)."""
    if isinstance(v, ast.Attribute) and options_owner(v.value):
        return v.attr
    if isinstance(v, ast.Subscript) and options_owner(v.value) \
            and isinstance(v.slice, ast.Constant) and isinstance(v.slice.value, str):
        return v.slice.value
    return None


NESTED_CONFIG_ROOTS = frozenset({"cfg", "config", "_C", "__C", "C", "opt", "args", "hparams",
                                 "conf"})


_DEVICE_WORDS = frozenset({"cpu", "cuda", "mps", "xpu", "gpu"})


def switch_on_gpu(v: ast.AST) -> bool:
    """A switch that is on exactly when the program runs on an accelerator:
    `torch.cuda.is_available()`, `device != "cpu"`, `"cuda" in device`,
    `device.type == "cuda"`."""
    if isinstance(v, ast.Call):
        return callee_tail(v) == "is_available"
    if not (isinstance(v, ast.Compare) and len(v.ops) == 1):
        return False
    left, op, right = v.left, v.ops[0], v.comparators[0]
    words = [x.value for x in (left, right) if isinstance(x, ast.Constant)
             and isinstance(x.value, str)]
    if len(words) != 1 or words[0].split(":", 1)[0].lower() not in _DEVICE_WORDS:
        return False
    cpu = words[0].lower() == "cpu"
    if isinstance(op, (ast.Eq, ast.In, ast.Is)):
        return not cpu
    if isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)):
        return cpu
    return False


def flag_descriptor(v: ast.AST) -> str:
    """What decides a boolean loader setting (`pin_memory=...`): "true", "false",
    "gpu" (on exactly on an accelerator), "setting:NAME" (an option's default), or
    "unknown"."""
    if isinstance(v, ast.Constant):
        if v.value is True:
            return "true"
        return "false" if v.value in (False, None, 0) else "unknown"
    if switch_on_gpu(v):
        return "gpu"
    option = option_name(v)
    if option is not None:
        return f"setting:{option}"
    return "unknown"

