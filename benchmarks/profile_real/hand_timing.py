"""Time a corpus script's parts by hand, without pitstop: the evidence for its expected verdict.

The script runs in this process (its own code, its cwd, argv and sys.path), with plain
``time.perf_counter`` wrappers around

- the data step: DataLoader ``__next__`` and the script's own batch functions named in
  the manifest (``parts.data``, e.g. ``__main__.random_training_set``, wrapped when the
  script defines them);
- the model step: the outermost ``nn.Module.__call__``, ``Tensor.backward`` /
  ``torch.autograd.backward`` / ``torch.autograd.grad``, and ``Optimizer.step`` (a
  closure's forward and backward inside ``step()`` are counted once);

and steps counted at ``parts.step`` (optimizer step returns, or backward returns). One
step in the middle also runs under ``torch.profiler`` (PyTorch's own profiler) to split
the model time into operators that do real work (≥ 20 µs and ≥ 16 384 input elements)
and the rest (dispatch, Python, tiny operators), and to tell matmul/conv from
element-wise operators. Stops after ``--steps`` steps. Shares are over the middle half of the steps by duration
(a step that lost its core to another process would otherwise decide them).

    python benchmarks/profile_real/hand_timing.py /work/ext/profile_real ENTRY_ID --steps 12
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from setup_corpus import load_manifest, tree_of  # noqa: E402

_MATMUL = ("::mm", "addmm", "bmm", "matmul", "conv", "baddbmm", "addmv", "::mv", "::dot", "lstm", "gru", "rnn")


class _Stop(BaseException):
    """Raised from a hook to end the measured run (not an Exception: the script's own
    ``except Exception`` must not swallow it)."""


class Timer:
    def __init__(self, steps: int, step_kind: str | None) -> None:
        self.steps, self.step_kind = steps, step_kind
        self.model_depth = 0
        self.data_depth = 0
        self.bwd_depth = 0
        self.model_t0 = 0.0
        self.data_t0 = 0.0
        self.model = 0.0
        self.data = 0.0
        self.printing = 0.0
        self.update = 0.0
        self.marks: list[tuple[float, ...]] = []  # (t, model_s, data_s, print_s, update_s) at each step end
        self.prof: Any = None
        self.prof_step: dict[str, Any] | None = None
        self.prof_model = 0.0

    # model ---------------------------------------------------------------------
    def model_enter(self) -> None:
        if self.model_depth == 0 and self.data_depth == 0:
            self.model_t0 = time.perf_counter()
        self.model_depth += 1

    def model_leave(self) -> None:
        self.model_depth -= 1
        if self.model_depth == 0 and self.data_depth == 0:
            self.model += time.perf_counter() - self.model_t0

    def data_enter(self) -> None:
        if self.data_depth == 0:
            if self.model_depth:  # data code called from inside a model call: count as data
                self.model += time.perf_counter() - self.model_t0
            self.data_t0 = time.perf_counter()
        self.data_depth += 1

    def data_leave(self) -> None:
        self.data_depth -= 1
        if self.data_depth == 0:
            self.data += time.perf_counter() - self.data_t0
            if self.model_depth:
                self.model_t0 = time.perf_counter()

    def step_end(self) -> None:
        # The profiler's start and its (slow) summary happen before the mark is taken, so
        # they fall in the profiled step, which is left out of the figures.
        n = len(self.marks) + 1
        mid = max(2, self.steps // 2)
        if n == mid:
            import torch.profiler as tp

            self.prof = tp.profile(activities=[tp.ProfilerActivity.CPU], record_shapes=True)
            self.prof.__enter__()
            self._prof_model0 = self.model
        elif n == mid + 1 and self.prof is not None:
            self.prof.__exit__(None, None, None)
            self.prof_model = self.model - self._prof_model0
            self.prof_step = summarize(self.prof.events())
            self.prof = None
        self.marks.append((time.perf_counter(), self.model, self.data, self.printing, self.update))
        if n > self.steps:
            raise _Stop()

    def result(self) -> dict[str, Any]:
        rows = [tuple((b - a) * 1e3 for a, b in zip(m0, m1, strict=True))
                for m0, m1 in zip(self.marks, self.marks[1:], strict=False)]
        mid = max(2, self.steps // 2)
        # drop the first step, the one the profiler starts in (its set-up lands there) and the
        # profiled one (its overhead and summary)
        rows = [r for i, r in enumerate(rows, start=1) if i not in (mid - 1, mid)][1:]
        if not rows:
            return {"steps": len(self.marks)}
        # On a shared machine a step that lost its core for 10 ms would decide a sum of
        # sub-millisecond steps: the shares are taken over the middle half of the steps
        # by duration.
        mid_rows = sorted(rows, key=lambda r: r[0])
        q = len(mid_rows) // 4
        mid_rows = mid_rows[q:len(mid_rows) - q] or mid_rows
        total = sum(r[0] for r in mid_rows)
        shares = [sum(r[k] for r in mid_rows) / total for k in range(1, 5)]
        out: dict[str, Any] = {"steps_timed": len(rows),
                               "step_ms_median": round(statistics.median(r[0] for r in rows), 2),
                               "model_share": round(shares[0], 3), "data_share": round(shares[1], 3),
                               "print_share": round(shares[2], 3), "update_share": round(shares[3], 3),
                               "other_share": round(1 - sum(shares), 3)}
        if self.prof_step:
            p = self.prof_step
            model_us = self.prof_model * 1e6
            out["profiled_step"] = {**p, "model_ms_under_profiler": round(model_us / 1e3, 2),
                                    "big_op_share_of_model": round(p["big_us"] / model_us, 3) if model_us else None}
        return out


def summarize(events: Any) -> dict[str, Any]:
    """The aten operators of one profiled step by *self* time (each microsecond once, a
    composite like aten::lstm split into what it runs): count, time, the part in
    operators that do real work (>= 20 us and >= 16384 input elements) and how much of
    that is matmul/convolution."""
    ops = 0
    op_us = big_us = matmul_us = 0.0
    for ev in events:
        name = str(ev.name)
        if not name.startswith("aten::"):
            continue
        dur = float(ev.time_range.end - ev.time_range.start)
        self_us = float(getattr(ev, "self_cpu_time_total", dur))
        ops += 1
        op_us += self_us
        shapes = getattr(ev, "input_shapes", None) or []
        numel = 0
        for s in shapes:
            if isinstance(s, list) and s and all(isinstance(d, int) for d in s):
                n = 1
                for d in s:
                    n *= d
                numel = max(numel, n)
        if dur >= 20 and numel >= 16384:
            big_us += self_us
            if any(m in name for m in _MATMUL):
                matmul_us += self_us
    return {"ops": ops, "op_self_ms": round(op_us / 1e3, 2), "big_us": round(big_us, 1),
            "matmul_share_of_big": round(matmul_us / big_us, 3) if big_us else None}


class _Globals(dict):  # type: ignore[type-arg]
    """Module globals that wrap the named data functions the moment the script defines them."""

    def __init__(self, wrap: set[str], timer: Timer, **kw: Any) -> None:
        super().__init__(**kw)
        self._wrap, self._timer = wrap, timer

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self._wrap and callable(value):
            value = _timed(value, self._timer)
        super().__setitem__(key, value)


def _timed(fn: Any, timer: Timer) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        timer.data_enter()
        try:
            return fn(*a, **k)
        finally:
            timer.data_leave()

    wrapper.__name__ = getattr(fn, "__name__", "wrapped")
    return wrapper


def install(timer: Timer, data_names: list[str]) -> None:
    import torch
    from torch.optim import optimizer as opt_mod
    from torch.utils.data import dataloader as dl

    call = torch.nn.Module.__call__

    def module_call(self: Any, *a: Any, **k: Any) -> Any:
        timer.model_enter()
        try:
            return call(self, *a, **k)
        finally:
            timer.model_leave()

    torch.nn.Module.__call__ = module_call  # type: ignore[method-assign]
    for owner, name in ((torch.Tensor, "backward"), (torch.autograd, "backward"), (torch.autograd, "grad")):
        orig = getattr(owner, name)

        def wrapped(*a: Any, __orig: Any = orig, __name: str = name, **k: Any) -> Any:
            outer = timer.bwd_depth == 0
            timer.bwd_depth += 1
            timer.model_enter()
            try:
                return __orig(*a, **k)
            finally:
                timer.model_leave()
                timer.bwd_depth -= 1
                if outer and __name == "backward" and timer.step_kind == "backward":
                    timer.step_end()

        setattr(owner, name, wrapped)
    opt_mod.register_optimizer_step_pre_hook(lambda o, a, k: timer.model_enter())

    def post(o: Any, a: Any, k: Any) -> None:
        timer.model_leave()
        if timer.step_kind == "optimizer":
            timer.step_end()

    opt_mod.register_optimizer_step_post_hook(post)
    nxt = dl._BaseDataLoaderIter.__next__

    def data_next(it: Any) -> Any:
        timer.data_enter()
        try:
            return nxt(it)
        finally:
            timer.data_leave()

    dl._BaseDataLoaderIter.__next__ = data_next  # type: ignore[method-assign]
    import builtins

    real_print = builtins.print

    def timed_print(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_print(*a, **k)
        finally:
            timer.printing += time.perf_counter() - t0

    builtins.print = timed_print
    # Hand-written update rules run under `with torch.no_grad():` in these scripts; the
    # time inside such blocks, outside any model call, is the update.
    ng = torch.no_grad
    ng_enter, ng_exit = ng.__enter__, ng.__exit__

    def enter(self: Any) -> Any:
        if timer.model_depth == 0 and timer.data_depth == 0:
            self._ht_t0 = time.perf_counter()
        return ng_enter(self)

    def exit_(self: Any, *exc: Any) -> Any:
        t0 = self.__dict__.pop("_ht_t0", None)
        if t0 is not None:
            timer.update += time.perf_counter() - t0
        return ng_exit(self, *exc)

    ng.__enter__ = enter  # type: ignore[method-assign]
    ng.__exit__ = exit_  # type: ignore[method-assign]
    for dotted in data_names:
        mod, _, attr = dotted.rpartition(".")
        if mod != "__main__":
            module = __import__(mod, fromlist=[attr])
            setattr(module, attr, _timed(getattr(module, attr), timer))


def run(ext: Path, entry: dict[str, Any], steps: int) -> dict[str, Any]:
    root = tree_of(ext, entry)
    cwd = root / entry.get("cwd", ".")
    script = root / entry["script"]
    parts = entry.get("parts") or {}
    timer = Timer(steps, parts.get("step"))
    os.chdir(cwd)
    sys.argv = [str(script), *entry.get("args", [])]
    sys.path[:0] = [str(script.parent), *[str(root / p) for p in entry.get("pythonpath", [])],
                    *[str(ext / "src" / e["repo"].replace("/", "+")) for e in entry.get("extra_repos", [])]]
    install(timer, parts.get("data") or [])
    wrap = {d.rpartition(".")[2] for d in parts.get("data") or [] if d.startswith("__main__.")}
    g = _Globals(wrap, timer, __name__="__main__", __file__=str(script), __builtins__=__builtins__)
    code = compile(script.read_text(encoding="utf-8"), str(script), "exec")
    t0 = time.perf_counter()
    stopped = False
    try:
        exec(code, g)
    except _Stop:
        stopped = True
    except SystemExit:
        pass
    out = timer.result()
    out.update({"id": entry["id"], "stopped_after_steps": stopped, "wall_s": round(time.perf_counter() - t0, 2),
                "steps_seen": len(timer.marks), "load_average": " ".join(f"{v:.2f}" for v in os.getloadavg())})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ext", type=Path)
    p.add_argument("entry")
    p.add_argument("--steps", type=int, default=12)
    a = p.parse_args()
    entry = next((e for e in load_manifest()["entries"] if e["id"] == a.entry), None)
    if entry is None:
        raise SystemExit(f"no entry {a.entry!r} in the manifest")
    for k, v in load_manifest().get("env", {}).items():
        os.environ.setdefault(k, v)
    result = run(a.ext, entry, a.steps)
    sys.stdout = sys.__stdout__
    print("HAND_TIMING " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
