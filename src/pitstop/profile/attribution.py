"""What the loop does outside the hooked calls: stack samples and probe sites in, a split of
the ``other`` time into categories with named call sites out (pure functions).

Every stack sample the recorder took in the ``other`` phase of a measured step is given a
*call site*: the function the training loop called (the callee of the loop's frame, the
frame that calls ``optimizer.step()`` / ``backward()`` / the model), or the line of the
loop itself when the loop runs code inline. Each call site gets one category, first
match wins:

``forward``
    the operator probe saw its operators build an autograd graph: a model written as
    plain functions, a loss computed in the loop (compute);
``optimizer``
    its operators write the parameters in place: a hand-written update rule (compute);
``input``
    its operators made a tensor the model then received (the probe follows them until
    the first forward after its step); or it is a ``__next__``/``__getitem__``/generator
    or is named like a batch source (``get_batch``, ``prefetch``, ``load_data`` ...):
    an input pipeline that is not a DataLoader, waited for like one;
``outside``
    it logs, prints, plots or saves (the library it calls is ``logging``,
    ``torch.serialization``, TensorBoard, wandb, tqdm, ...; or its line/name says so):
    work outside the training step proper;
``python``
    anything else: the loop's own Python.

A category's share of ``other`` is its share of those samples (the sampler takes one
every 10 ms; the counts say how much evidence there is).
"""

from __future__ import annotations

import linecache
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["CATEGORIES", "MIN_SAMPLES", "attribute_other", "site_category"]

CATEGORIES = ("input", "forward", "optimizer", "outside", "python")
#: Fewer ``other`` samples than this and no split is claimed.
MIN_SAMPLES = 3

_LOOP_KINDS = ("optimizer", "backward", "forward", "data")
_OUTSIDE_LIBS = ("/logging/", "/torch/serialization.py", "tensorboard", "/wandb/", "/mlflow/",
                 "/tqdm/", "/pickle.py", "/json/", "/csv.py", "/shutil.py", "/comet_ml/",
                 "/neptune/", "/matplotlib/", "/aim/", "/clearml/", "/safetensors/",
                 "/torch/utils/checkpoint_io", "/pprint.py")
_OUTSIDE_LINE = re.compile(r"\bprint\s*\(|\blog(?:ger|ging)?\.|\.log\s*\(|\btorch\.save\s*\(|"
                           r"save_checkpoint|\bwriter\.add_|\bwandb\.|\btqdm\b|\bplt\.|"
                           r"\.set_postfix\(|\.add_scalar\(")
_OUTSIDE_NAME = re.compile(r"(^|_)(log|logging|print|save|checkpoint|ckpt|report|summary|"
                           r"plot|write|dump|visuali[sz]e|display)(_|$|s$)", re.I)
_INPUT_NAME = re.compile(r"batch|prefetch|loader|dataset|collate|^__next__$|^__getitem__$|"
                         r"^__iter__$|(^|_)(get|load|fetch|read|next|sample|make|prepare)_?"
                         r"(data|sample|chunk|input|example)s?($|_)", re.I)


def _same_function(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("file") == b.get("file") and a.get("first") == b.get("first") \
        and a.get("func") == b.get("func")


def _loop_chain(loop_frames: dict[str, Any]) -> list[dict[str, Any]]:
    """The stack (innermost first) at the first optimizer step / backward / forward /
    batch: the training loop and the functions it is nested in."""
    for kind in _LOOP_KINDS:
        chain = loop_frames.get(kind)
        if chain:
            return list(chain) if isinstance(chain, list) else [chain]
    return []


def call_site(user: Sequence[dict[str, Any]], lib: dict[str, Any] | None,
              loop: Sequence[dict[str, Any]] | dict[str, Any] | None
              ) -> tuple[dict[str, Any], bool] | None:
    """The call site of one stack (user frames innermost first): ``(frame, is_line)``.

    The loop frame is the innermost function the sample shares with the loop's stack
    (``loop``, innermost first: the frames that called backward()); the call site is
    the function that frame called, or the line of the loop frame itself (``is_line``)
    when the sample is in it. A ``get_batch()`` called from the loop is named, whether
    the step itself is inline or in a ``train()`` the loop calls."""
    chain = [loop] if isinstance(loop, dict) else list(loop or [])
    outer_user = list(reversed(user))
    outer_loop = list(reversed(chain))
    k = 0
    while k < len(outer_user) and k < len(outer_loop) and _same_function(outer_user[k], outer_loop[k]):
        k += 1
    if k:
        if k == len(outer_user):
            return outer_user[k - 1], True
        return outer_user[k], False
    if user:
        return user[0], False
    if lib is not None:
        return lib, False
    return None


def _probe_sites_for(site: dict[str, Any], is_line: bool,
                     probe_sites: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The probe's sites whose stacks pass through this call site."""
    out = []
    for ps in probe_sites:
        for fr in ps.get("chain") or [ps]:
            if _same_function(fr, site) and (not is_line or fr.get("line") == site.get("line")):
                out.append(ps)
                break
    return out


def site_category(site: dict[str, Any], is_line: bool, lib: dict[str, Any] | None,
                  probe_sites: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """``(category, why)`` of one call site (see the module docstring for the order)."""
    matched = _probe_sites_for(site, is_line, probe_sites)
    ops = sum(int(p.get("ops", 0)) for p in matched)
    grad = sum(int(p.get("grad_ops", 0)) for p in matched)
    update = sum(int(p.get("update_ops", 0)) for p in matched)
    if ops and grad >= 0.5 * ops:
        return "forward", f"{grad} of its {ops} operators build the autograd graph"
    if update:
        return "optimizer", f"{update} of its operators write the parameters in place"
    if any(p.get("produced_input") for p in matched):
        return "input", "it made the tensors the model was called with"
    lib_why = _outside_lib(lib)
    if lib_why:
        return "outside", lib_why
    name = str(site.get("func", ""))
    text = linecache.getline(str(site.get("file", "")), int(site.get("line") or 0)).strip() \
        if is_line else ""
    if (text and _OUTSIDE_LINE.search(text)) or (not is_line and _OUTSIDE_NAME.search(name)):
        return "outside", "it logs, prints or saves" + (f": `{text[:60]}`" if text else "")
    if not is_line and (site.get("gen") or _INPUT_NAME.search(name)):
        return "input", ("a generator the loop iterates" if site.get("gen")
                         else f"its name ({name}) says it produces batches")
    if is_line and re.search(r"\bnext\s*\(|get_batch|\.batch\(", text):
        return "input", f"the loop line fetches a batch: `{text[:60]}`"
    return "python", "the loop's own Python"


def _ident(site: dict[str, Any], is_line: bool) -> tuple[Any, ...]:
    return (site.get("file"), site.get("first"), site.get("func"), site.get("line") if is_line else None)


_TORCH_LIBS = (("/torch/optim/", "optimizer", "torch.optim code (zero_grad(), schedulers)"),
               ("/torch/nn/", "forward", "torch.nn code called outside a module's forward"),
               ("/torch/autograd/", "forward", "torch.autograd code"))


def _torch_lib(lib: dict[str, Any] | None) -> tuple[str, str] | None:
    """``(category, why)`` when a library frame is torch's own training code."""
    lib_file = str((lib or {}).get("file", "")).replace("\\", "/")
    for marker, cat, why in _TORCH_LIBS:
        if marker in lib_file:
            return cat, f"{why}: {lib.get('func') if lib else '?'}"
    return None


def _outside_lib(lib: dict[str, Any] | None) -> str | None:
    """Why a library frame is logging/saving work, or None."""
    lib_file = str((lib or {}).get("file", ""))
    if lib and any(m in lib_file for m in _OUTSIDE_LIBS):
        return f"it calls {lib.get('func')} ({_short(lib_file)})"
    if lib and lib_file.endswith("/torch/_tensor.py") and lib.get("func") in ("__repr__", "__str__", "__format__"):
        return "it formats a tensor for printing"
    return None


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def site_label(site: dict[str, Any], is_line: bool) -> str:
    """``get_batch (train.py:40)``; a loop line as ``train.py:87 (in main)``."""
    file = _short(str(site.get("file", "?")))
    if is_line:
        return f"{file}:{site.get('line')} (in {site.get('func')})"
    return f"{site.get('func')} ({file}:{site.get('first') or site.get('line')})"


def attribute_other(cap: dict[str, Any], windows: Sequence[tuple[int, int]]) -> dict[str, Any] | None:
    """Split the ``other`` samples of the measured ``windows`` by category.

    Returns ``{"samples", "other_samples", "split": {category: share of other},
    "sites": [{"site", "file", "line", "category", "why", "samples", "share_of_other"}]}``
    or None when there are no stack samples."""
    stacks = cap.get("stacks") or {}
    ts, ks = stacks.get("t") or [], stacks.get("k") or []
    if not ts or not windows:
        return None
    chains = stacks.get("chains") or []
    frames = stacks.get("frames") or []
    wins = sorted(windows)
    lo, hi = wins[0][0], wins[-1][1]
    in_window = []
    j = 0
    for t, k in zip(ts, ks, strict=False):
        if t < lo or t > hi:
            continue
        while j < len(wins) and wins[j][1] < t:
            j += 1
        if j < len(wins) and wins[j][0] <= t <= wins[j][1]:
            in_window.append(k)
    other = Counter(k for k in in_window if k >= 0 or k == stacks.get("overflow_code", -7))
    n_other = sum(other.values())
    result: dict[str, Any] = {"samples": len(in_window), "other_samples": n_other,
                              "interval_s": stacks.get("interval_s"), "split": None, "sites": []}
    if n_other < MIN_SAMPLES:
        return result
    loop = _loop_chain(cap.get("loop_frames") or {})
    probe_sites = (cap.get("probe") or {}).get("sites") or []
    by_site: dict[tuple[Any, ...], dict[str, Any]] = {}
    site_cache: dict[tuple[Any, ...], tuple[str, str]] = {}
    for k, count in other.items():
        if k < 0 or k >= len(chains):
            lost = by_site.setdefault(("(stack not kept)",), {"site": "(more distinct stacks than kept)",
                                             "category": "python", "why": "not kept",
                                             "samples": 0, "file": None, "line": None})
            lost["samples"] += count
            continue
        ch = chains[k]
        user = [frames[i] for i in ch.get("user") or [] if 0 <= i < len(frames)]
        lib = frames[ch["lib"]] if ch.get("lib") is not None and ch["lib"] < len(frames) else None
        found = call_site(user, lib, loop)
        if found is None:
            continue
        site, is_line = found
        # A sample inside a logging/saving library is outside the step whatever else its
        # call site does, one inside torch's optimizer/module/autograd code (zero_grad(),
        # a module helper called outside forward) is training work; the rest of a site's
        # samples take the site's category.
        lib_cat = _outside_lib(lib)
        torch_cat = _torch_lib(lib) if lib_cat is None else None
        if torch_cat is not None:
            cat_key = (*_ident(site, is_line), torch_cat[0])
            torch_entry = by_site.setdefault(cat_key, {
                "site": site_label(site, is_line), "file": site.get("file"),
                "line": site.get("line") if is_line else site.get("first"),
                "category": torch_cat[0], "why": torch_cat[1], "samples": 0})
            torch_entry["samples"] += count
            continue
        ident = _ident(site, is_line)
        cat_key = (*ident, lib_cat is not None)
        entry = by_site.get(cat_key)
        if entry is None:
            if lib_cat is not None:
                cat, why = "outside", lib_cat
            else:
                cat, why = site_cache.get(ident) or site_category(site, is_line, None, probe_sites)
                site_cache[ident] = (cat, why)
            entry = by_site[cat_key] = {"site": site_label(site, is_line), "file": site.get("file"),
                                        "line": site.get("line") if is_line else site.get("first"),
                                        "category": cat, "why": why, "samples": 0}
        entry["samples"] += count
    split = dict.fromkeys(CATEGORIES, 0.0)
    for e in by_site.values():
        e["share_of_other"] = round(e["samples"] / n_other, 3)
        split[e["category"]] += e["samples"] / n_other
    result["split"] = {k: round(v, 4) for k, v in split.items()}
    result["sites"] = sorted(by_site.values(), key=lambda e: -e["samples"])[:10]
    return result
