"""pitstop: find what makes PyTorch training slow on Linux, fix it safely, prove it.

The command-line tool is ``pitstop`` (see ``pitstop --help``); the library side is
:mod:`pitstop.train`. Importing :mod:`pitstop` itself is cheap: it imports neither
torch nor any command.
"""

__version__ = "0.1.0"
