"""The summary of one module: what other modules of the program need to know about it,
computed from its index alone (no other file is read), so that it can run in parallel
and be cached by the file's content hash.

A summary holds the module's imports, its functions (do they run backward or an
optimizer step, outside any loop of their own? what do they return: a DataLoader, a
device, a model, an object, the result of another call?), its classes (bases, the
``self.x`` attributes their methods assign, whether they iterate a loader), its
module-level names, its command-line options, its program facts, where it can put work
on an accelerator, and the arguments of the calls it makes (so that a function learns
what its parameters hold from its callers). Values are described by the short strings
of :mod:`pitstop.lint.describe`.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from pitstop.lint.astutil import (
    LOADERISH_RE,
    callee_tail,
    dotted,
    is_main_guard,
    kwarg,
    param_default,
    param_names,
    super_method,
)
from pitstop.lint.dataset_items import item_costs
from pitstop.lint.describe import Describer
from pitstop.lint.index import FUNCS, FuncDef, ImportRef, ModuleIndex
from pitstop.lint.loaders import dataloader_calls, loader_arg, loader_id, whole_split_batch
from pitstop.lint.mentions import PATH_HINTS, arch_owners, mentions, top_level_refs
from pitstop.lint.settings import (
    Setting,
    argparse_settings,
    attribute_settings,
    class_settings,
    constructor_settings,
    flag_descriptor,
    module_settings,
)
from pitstop.lint.switches import SWITCH_LIKE, switch_of


@dataclass(frozen=True)
class FuncSummary:
    qualname: str  # "f" or "Class.method"
    line: int
    params: tuple[str, ...]  # positional-or-keyword parameters, `self` included
    is_method: bool
    marks: bool  # calls backward() / an optimizer step outside any loop of its own
    callees: tuple[str, ...]  # names called outside its own loops (for steps through calls)
    has_loop: bool
    returns: tuple[str, ...]  # descriptors of what it returns
    yields: tuple[str, ...]  # descriptors of what a generator iterates and yields from
    is_generator: bool
    repeated: bool = False  # runs many times by design: an event handler, an engine's step


@dataclass(frozen=True)
class ClassSummary:
    name: str
    line: int
    bases: tuple[str, ...]
    methods: tuple[str, ...]
    attrs: dict[str, str]  # self.X -> descriptor
    is_module: bool  # subclasses something named *Module (resolved further by the program)
    # a Dataset whose __getitem__ calls nothing (it hands back what it holds): loading
    # an item costs nothing, so workers and pinned memory would buy nothing
    trivial_items: bool = False
    # ... and indexes nothing either: its items are the index and attributes as they are
    # (a prompt string), no tensor a pinned buffer would speed up
    plain_items: bool = False
    # a wrapper module around one convolution with a bias (`ConvNorm(..., bias=True)`):
    # the __init__ parameter that turns the bias off and its position ("", -1: none)
    conv_bias: tuple[str, int] | None = None


@dataclass(frozen=True)
class LoaderSummary:
    """A DataLoader built in this module."""

    id: str  # "line:col"
    line: int
    pins: tuple[str, ...]  # pin_memory on the GPU path: "true", "false", "absent", "setting:X", "unknown"
    one_batch: bool = False  # `batch_size=len(dataset)`: a pass over it is one batch


@dataclass(frozen=True)
class CallSite:
    callee: str  # the callee as this module spells it (a local object's class resolved)
    caller: str  # qualname of the calling function ("" for the module body)
    args: tuple[str | None, ...]
    kwargs: tuple[tuple[str, str], ...]
    line: int
    in_loop: bool = False  # made inside a loop (a function called once per epoch, say)
    # the keywords and positions passed something other than a False/None/0 literal, and
    # whether `*args`/`**kw` may pass anything (`Block(c, use_bn=True)`: "use_bn", 0)
    on: tuple[str | int, ...] = ()
    star: bool = False


@dataclass
class ModuleSummary:
    path: str
    imports: tuple[ImportRef, ...] = ()
    functions: dict[str, FuncSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    globals: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)
    facts: dict[str, int] = field(default_factory=dict)
    gpu_origins: tuple[tuple[int, str], ...] = ()
    cpu_only_devices: bool = False  # spells out a CPU device and no accelerator
    cpu_devices: bool = False  # spells out a CPU device (a fallback, maybe)
    loaders: dict[str, LoaderSummary] = field(default_factory=dict)
    callsites: tuple[CallSite, ...] = ()
    # identifiers the module mentions other than where it defines them (calls, attributes,
    # strings, comments), space-separated (one string crosses between processes fast): a
    # class or function no module mentions is not run by the program
    mentions: str = ""
    # modules it reaches by names chosen at run time (`getattr(models, args.arch)`)
    dynamic: frozenset[str] = frozenset()
    # runs something when started (statements at the top, a `__main__` block): a script
    script: bool = False
    # puts folders on the import path (`sys.path.insert(0, "../lib")`, `import _init_paths`)
    adds_to_path: bool = False
    # architecture fact -> the top-level classes and functions it is seen in ("" for
    # elsewhere: the module's body, a decorated definition that a registry may build)
    arch_owners: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (where it has architecture facts) the other top-level definitions each top-level
    # definition names, and those the module's own statements name
    def_refs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    body_refs: tuple[str, ...] = ()


CONV_TAILS = frozenset({"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                        "ConvTranspose3d"})


def _conv_bias(index: ModuleIndex, cls: ast.ClassDef) -> tuple[str, int] | None:
    """Is ``cls`` a module wrapping one convolution whose bias is on unless a parameter of
    its __init__ says otherwise?"""
    if cls.name not in index.module_classes:
        return None
    init = index.method(cls, "__init__")
    if init is None:
        return None
    convs = [n for stmt in init.body for n in ast.walk(stmt)
             if isinstance(n, ast.Call) and callee_tail(n) in CONV_TAILS]
    if len(convs) != 1 or any(isinstance(n, ast.Call) and "Norm" in callee_tail(n)
                              for stmt in init.body for n in ast.walk(stmt)):
        return None
    bias = kwarg(convs[0], "bias")
    if bias is None or (isinstance(bias.value, ast.Constant) and bias.value.value is True):
        return ("", -1)
    if isinstance(bias.value, ast.Name) and param_default(init, bias.value.id) is True:
        names = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
        pos = names.index(bias.value.id) if bias.value.id in names else -1
        return (bias.value.id, pos)
    return None


def _pins(index: ModuleIndex, call: ast.Call) -> tuple[str, ...]:
    out = []
    for v in loader_arg(index, call, "pin_memory", gpu=True):
        if isinstance(v, str):
            out.append("absent" if v == "absent" else "unknown")
            continue
        d = flag_descriptor(v)
        if d == "unknown" and isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name):
            d = f"setting:{v.attr}"  # `pin_memory=self.pin` of an object's field
        if d == "unknown" and isinstance(v, ast.Name):
            d = _param_flag(index, call, v.id)
        # (`pin_memory=torch.cuda.is_available()`: on a GPU, the path judged here, yes)
        out.append("true" if d == "gpu" else d)
    return tuple(out)


def _param_flag(index: ModuleIndex, call: ast.Call, name: str) -> str:
    """`def get_data_loaders(..., pin_memory=True): ... DataLoader(..., pin_memory=
    pin_memory)`: the literal default of the enclosing function's parameter, when the
    function never assigns the name itself (what a call that leaves it out gets)."""
    fn = index.owner.get(call)
    if fn is None or name not in param_names(fn) \
            or index.scoped_assigns.get((fn, name)):
        return "unknown"
    default = param_default(fn, name)
    return flag_descriptor(ast.Constant(default)) if isinstance(default, bool) else "unknown"


def _marks(index: ModuleIndex, fn: FuncDef) -> tuple[bool, list[str], bool]:
    """Does ``fn`` run backward/step outside its own loops; what does it call there;
    does it have loops."""
    callees = [n for c in index.direct_calls.get(fn, ())
               for n in [dotted(c.func) or _super_callee(index, fn, c)] if n]
    return fn in index.steps_directly, callees, fn in index.funcs_with_loops


def _super_callee(index: ModuleIndex, fn: FuncDef, call: ast.Call) -> str | None:
    """`super().step(x)` in a method of `class MyTrainer(Trainer)`: `Trainer.step`, as
    this module spells the base (the program resolves it, imported or not)."""
    method = super_method(call)
    cls = index.class_of.get(fn)
    base = dotted(cls.bases[0]) if method is not None and cls is not None and cls.bases else None
    return f"{base}.{method}" if base else None


def summarize(index: ModuleIndex) -> ModuleSummary:
    """The summary of one indexed module."""
    d = Describer(index)
    s = ModuleSummary(index.path, imports=tuple(index.imports), facts=dict(index.facts),
                      arch_owners=arch_owners(index))
    if s.arch_owners:
        s.def_refs, s.body_refs = top_level_refs(index)
    handlers, handler_names = repeated_functions(index)
    for fns in index.functions.values():
        for fn in fns:
            qn = index.qualname_of(fn)
            if qn in s.functions:
                continue
            marks, callees, has_loop = _marks(index, fn)
            callees = [d._callee(c, fn) for c in callees]
            returns = tuple(sorted({x for r in index.returns.get(fn, ()) if r.value is not None
                                    for x in [d.describe(r.value, fn)] if x}))
            ys = index.yields.get(fn, [])
            yields: set[str] = set()
            for y in ys:
                if isinstance(y, ast.YieldFrom):
                    x = d.describe(y.value, fn)
                    if x:
                        yields.add(x)
                    elif y.value is not None and LOADERISH_RE.search(dotted(y.value) or "@"):
                        yields.add("loader")
            if ys:
                for loop in index.loops_of.get(fn, ()):
                    if isinstance(loop, (ast.For, ast.AsyncFor)):
                        x = d.describe(loop.iter, fn)
                        if x:
                            yields.add(x)
                        elif LOADERISH_RE.search((dotted(loop.iter) or "@").rsplit(".", 1)[-1]):
                            yields.add("loader")
                for call in index.calls_of.get(fn, ()):
                    if callee_tail(call) == "next" and call.args:
                        x = d.describe(call.args[0], fn)
                        if x:
                            yields.add(x)
            params = tuple(a.arg for a in fn.args.posonlyargs + fn.args.args)
            s.functions[qn] = FuncSummary(qn, fn.lineno, params, fn in index.class_of, marks,
                                          tuple(dict.fromkeys(callees)), has_loop, returns,
                                          tuple(sorted(yields)), bool(ys),
                                          fn in handlers or fn.name in handler_names)
    for name, cls in index.classes.items():
        attrs: dict[str, str] = {}
        methods = []
        for stmt in cls.body:
            if isinstance(stmt, FUNCS):
                methods.append(stmt.name)
        # self.X = ... in any method; __init__ first
        order = sorted((f for m in methods for f in index.functions.get(m, ())
                        if index.class_of.get(f) is cls), key=lambda f: f.name != "__init__")
        for fn in order:
            for a in index.assigns_of.get(fn, ()):
                for t in a.targets:
                    tn = dotted(t)
                    if tn and tn.startswith("self.") and tn.count(".") == 1:
                        key = tn[5:]
                        if key not in attrs:
                            desc = d.describe(a.value, fn)
                            if desc:
                                attrs[key] = desc
                    elif isinstance(t, (ast.Tuple, ast.List)):
                        for e in t.elts:
                            en = dotted(e)
                            if en and en.startswith("self.") and en.count(".") == 1 \
                                    and en[5:] not in attrs:
                                desc = d._unpacked(t, a.value, en, fn, 0)
                                if desc:
                                    attrs[en[5:]] = desc
        bases = tuple(b for b in (dotted(x) for x in cls.bases) if b)
        trivial, plain = item_costs(index, cls)
        s.classes[name] = ClassSummary(name, cls.lineno, bases, tuple(methods), attrs,
                                       name in index.module_classes, trivial, plain,
                                       _conv_bias(index, cls))
    for (owner, name), top in index.scoped_assigns.items():
        if owner is None and "." not in name:
            desc = d._first(top, name, None, 0)
            if desc:
                s.globals[name] = desc
    s.settings = {**module_settings(index.tree.body, index.path),
                  **attribute_settings(index.tree.body, index.path),
                  **constructor_settings(index.calls_by_tail, index.path),
                  **class_settings(index.classes, index.path),
                  **argparse_settings(index.calls_by_tail, index.path)}
    s.gpu_origins = tuple(index.gpu_origins)
    s.cpu_only_devices = bool(index.cpu_device_lines) and not index.gpu_origins
    s.cpu_devices = bool(index.cpu_device_lines) or any(
        v == {"cpu"} or "cpu" in v for v in index.device_literals.values())
    for call in dataloader_calls(index):
        lid = loader_id(call)
        s.loaders[lid] = LoaderSummary(lid, call.func.lineno, _pins(index, call),
                                       whole_split_batch(call))
    s.callsites = tuple(_callsites(index, d))
    s.mentions, s.dynamic = mentions(index)
    text = index.text
    s.adds_to_path = any(h in text for h in PATH_HINTS) if text else False
    s.script = any(isinstance(stmt, (ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith))
                   or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call))
                   or is_main_guard(stmt) for stmt in index.tree.body)
    return s


# Calls that take a function and run it many times: ignite's `Engine(step)`,
# `engine.add_event_handler(Events.X, fn)`, hooks.
RUNNERS = frozenset({"Engine", "DeterministicEngine", "add_event_handler", "register_forward_hook",
                     "register_full_backward_hook", "register_forward_pre_hook", "register_hook",
                     "attach_handler"})


def repeated_functions(index: ModuleIndex) -> tuple[set[FuncDef], set[str]]:
    """Functions that run many times by design: decorated as event handlers
    (`@trainer.on(Events.EPOCH_COMPLETED)`), or handed to an engine or a hook."""
    decorated: set[FuncDef] = set()
    for fns in index.functions.values():
        for fn in fns:
            for dec in fn.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if (dotted(target) or "").rsplit(".", 1)[-1] in {"on", "register", "hook",
                                                                  "every", "on_event"}:
                    decorated.add(fn)
    names: set[str] = set()
    for tail in RUNNERS:
        for call in index.calls_by_tail.get(tail, ()):
            for a in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(a, ast.Name):
                    names.add(a.id)
    return decorated, names


BUILTIN_NAMES = frozenset(dir(builtins))


def _callsites(index: ModuleIndex, d: Describer) -> list[CallSite]:
    """Calls whose arguments say something about the callee's parameters."""
    out: list[CallSite] = []
    local_names = set(index.functions) | set(index.classes) | index.import_locals
    # (a module that star-imports others -- `from trainer import *` -- may call any name
    # they define: the program resolves it)
    starred = any(i.local == "*" for i in index.imports)
    for call in index.calls:
        if not call.args and not call.keywords and call not in index.calls_in_loop:
            continue
        name = dotted(call.func)
        if name is None:
            continue
        scope = index.owner.get(call)
        callee = d._callee(name, scope)
        head = callee.split(".", 1)[0]
        if head not in local_names and not callee.startswith(
                ("attr:", "param:", "global:", "val:")) and not (
                starred and head not in BUILTIN_NAMES):
            continue
        in_loop = call in index.calls_in_loop
        args = tuple(d.describe(a, scope) if not isinstance(a, ast.Starred) else None
                     for a in call.args)
        kwargs = tuple((k.arg, x) for k in call.keywords if k.arg
                       for x in [d.describe(k.value, scope)] if x)
        # (the switches it may turn on: a constructor's, or a function's keywords, with
        # what decides them when an option or a parameter does: `use_x=args.use_x`)
        ctor = name.rsplit(".", 1)[-1][:1].isupper()
        on = tuple([i if not how else f"#{i}@{how}" for i, a in enumerate(call.args)
                    if ctor or (isinstance(a, SWITCH_LIKE) and not (
                        isinstance(a, ast.Name) and a.id in {"self", "cls"}))
                    for how in [switch_of(index, scope, a)] if how is not None]
                   + [k.arg if not how else f"{k.arg}@{how}" for k in call.keywords
                      if k.arg for how in [switch_of(index, scope, k.value)] if how is not None])
        star = any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords)
        if not any(args) and not kwargs and not in_loop and not on and not star:
            continue
        caller = index.qualname_of(scope) if scope is not None else ""
        out.append(CallSite(callee, caller, args, kwargs, call.lineno, in_loop, on, star))
    return out
