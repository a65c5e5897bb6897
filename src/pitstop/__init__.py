"""pitstop: find what makes PyTorch training slow on Linux, fix it safely, prove it.

The command-line tool is ``pitstop`` (see ``pitstop --help``); the library side is
:mod:`pitstop.train`. Importing :mod:`pitstop` itself is cheap: it imports neither
torch nor any command.
"""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # `pitstop.profile(...)` and `pitstop.train` work after a plain `import pitstop`,
    # while `import pitstop` itself stays cheap (no torch, no subpackage imports).
    if name in ("profile", "train"):
        import importlib

        return importlib.import_module(f"pitstop.{name}")
    raise AttributeError(f"module 'pitstop' has no attribute {name!r}")
