"""Loaded by every Python process started under ``pitstop profile`` (through PYTHONPATH).

It starts pitstop's recorder (which waits, without importing anything heavy, until
the process imports torch), hides its own folder from ``sys.path`` and then loads the
``sitecustomize`` module this one shadows, if there is one (Debian ships one), so the
interpreter behaves as it would without pitstop.
"""

import os
import sys


def _pitstop_boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    me = sys.modules.get(__name__)
    try:
        try:
            import pitstop.profile.bootstrap as boot
        except ImportError:
            extra = os.environ.get("PITSTOP_PROFILE_PKG_PARENT")
            if not extra:
                raise
            sys.path.append(extra)
            import pitstop.profile.bootstrap as boot
        boot.activate()
    except Exception as err:  # never stop the user's program because of pitstop
        sys.stderr.write(f"pitstop profile: instrumentation not loaded in pid {os.getpid()}: "
                         f"{type(err).__name__}: {err}\n")
    # Load the sitecustomize we shadow (next on sys.path), as site.py would have.
    sys.modules.pop(__name__, None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError as err:
        if getattr(err, "name", None) != "sitecustomize":
            sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                             f"{type(err).__name__}: {err}\n")
        if me is not None:
            sys.modules[__name__] = me
    except Exception as err:
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         f"{type(err).__name__}: {err}\n")
        if me is not None:
            sys.modules[__name__] = me


if os.environ.get("PITSTOP_PROFILE_DIR"):
    _pitstop_boot()
