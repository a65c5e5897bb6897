"""``pitstop profile``: where every millisecond of a training step goes, and what to do.

Two ways in:

- the command, ``pitstop profile -- python train.py ARGS`` (or ``-- torchrun ...``),
  which runs the unchanged script with the recorder injected;
- the API, for code that wants it::

      import pitstop.profile
      with pitstop.profile.profile(steps=50) as prof:   # or pitstop.profile(steps=50)
          for x, y in loader:
              ...
              prof.step()

Importing this package is cheap: torch is imported only when profiling starts.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pitstop.profile.api import Profile

__all__ = ["profile"]


def profile(steps: int = 50, warmup: int = 5, out: str | None = "pitstop-profile",
            **kwargs: Any) -> Profile:
    """Profile the steps of the enclosed block; see :class:`pitstop.profile.api.Profile`."""
    from pitstop.profile.api import Profile

    return Profile(steps=steps, warmup=warmup, out=out, **kwargs)


class _CallableModule(types.ModuleType):
    """Lets ``pitstop.profile(steps=50)`` work as well as ``pitstop.profile.profile(...)``."""

    def __call__(self, steps: int = 50, warmup: int = 5, out: str | None = "pitstop-profile",
                 **kwargs: Any) -> Profile:
        return profile(steps=steps, warmup=warmup, out=out, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
