"""Values that are not files on a real machine, recorded inside a fake tree.

A tree given with ``--sysroot DIR`` stands in for a whole machine, but NVML values,
free space (statvfs) and the Python that runs training are not files in ``/sys`` or
``/proc``. Both the doctor and ``pitstop system`` read them from one place in the
tree, ``DIR/pitstop-recorded/<name>.json``, so one fake machine serves both.
"""

from __future__ import annotations

from typing import Any

from pitstop.schema import BadJSON, parse_json
from pitstop.sysroot import Sysroot

__all__ = ["RECORDED_DIR", "read_recording"]

RECORDED_DIR = "/pitstop-recorded"


def read_recording(sr: Sysroot, name: str) -> Any:
    """``DIR/pitstop-recorded/<name>.json`` of a fake tree, or ``None`` if absent.

    Raises ``ValueError`` for a recording that is not valid JSON (or nested absurdly deep), so that a broken
    fixture is reported rather than read as "nothing recorded".
    """
    text = sr.read_text(f"{RECORDED_DIR}/{name}.json")
    if text is None:
        return None
    try:
        return parse_json(text)
    except BadJSON as err:
        raise ValueError(f"recorded {name}.json is not valid JSON: {err}") from None
