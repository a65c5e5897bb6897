"""Did the gradients get reset between two ``backward()`` calls? (Step boundaries for
loops without a ``torch.optim`` optimizer.)

A loop that updates its weights by hand (``p.data.add_(p.grad, alpha=-lr)``, then
``model.zero_grad()``) ends a step after each ``backward()``; one that accumulates
gradients over several micro-batches does not reset them in between. So at the start of
each ``backward()`` pitstop looks at one parameter's gradient as it was when the previous
``backward()`` returned: gone (``zero_grad(set_to_none=True)``), replaced, written in
place (its version counter moved: ``grad.zero_()``) or, on CPU, zero (``.data.zero_()``,
which a version counter cannot see) means a reset, hence a step boundary; untouched means
accumulation. Reading values is done on CPU only: on CUDA it would be a host-device sync.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["GradWatch"]


def _first_leaf(root: Any, limit: int = 4096) -> Any:
    """A parameter (leaf tensor) that ``root``'s autograd graph accumulates into."""
    fn = getattr(root, "grad_fn", None)
    seen = 0
    todo = [fn] if fn is not None else []
    while todo and seen < limit:
        node = todo.pop()
        seen += 1
        var = getattr(node, "variable", None)
        if var is not None:
            return var
        for nxt, _ in getattr(node, "next_functions", ()) or ():
            if nxt is not None:
                todo.append(nxt)
    return None


class GradWatch:
    """One watched parameter and its gradient's state at the last ``backward()`` return."""

    def __init__(self) -> None:
        self._param: Any = None
        self._state: tuple[Any, ...] | None = None
        self.available = True

    def pick(self, modules: Iterable[Any], roots: Any) -> None:
        """Choose the parameter once: the outermost modules' first trainable one that has
        a gradient, else a leaf of the graph ``backward()`` was called on."""
        if self._param is not None or not self.available:
            return
        chosen = None
        for m in modules:
            try:
                for p in m.parameters():
                    if p.requires_grad and p.grad is not None:
                        chosen = p
                        break
            except Exception:
                continue
            if chosen is not None:
                break
        if chosen is None:
            for r in roots if isinstance(roots, (list, tuple)) else (roots,):
                chosen = _first_leaf(r)
                if chosen is not None:
                    break
        if chosen is None:
            self.available = False
            return
        try:
            self._param = weakref.ref(chosen)
        except TypeError:
            self.available = False

    def _snapshot(self) -> tuple[Any, ...] | None:
        p = self._param() if self._param is not None else None
        if p is None:
            return None
        g = p.grad
        if g is None:
            return (None, 0, None)
        value = None
        if g.device.type == "cpu" and g.numel():
            value = float(g.detach().reshape(-1)[:8].abs().sum())
        return (id(g), g._version, value)

    def remember(self) -> None:
        """At a ``backward()`` return."""
        self._state = self._snapshot()

    def was_reset(self) -> bool | None:
        """At the next ``backward()`` start: True (reset), False (accumulating), None (unknown)."""
        if self._state is None:
            return None
        now = self._snapshot()
        if now is None:
            return None
        if now[0] is None:
            return True
        gid, version, value = self._state
        if now[0] != gid or now[1] != version:
            return True
        return bool(value is not None and now[2] == 0.0 and value != 0.0)
