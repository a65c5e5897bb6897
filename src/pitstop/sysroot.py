"""Access to the machine's ``/sys``, ``/proc``, ``/etc``, ``/dev`` and ``/var`` through a root.

Every probe (doctor) and every setting writer (system) goes through a :class:`Sysroot`
instead of opening ``/sys/...`` directly. With the default root ``/`` it is the live
machine; ``--sysroot DIR`` points it at a recorded or hand-made tree, which is how the
tests run real probes against a healthy RTX 4090 workstation, a container with a 64 MB
``/dev/shm`` and so on, on a machine that has none of them.

Reads never raise for a missing or unreadable file: they return ``None`` and the
caller reports "could not check" with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sysroot:
    """A root directory under which absolute machine paths are resolved."""

    root: Path = Path("/")

    @classmethod
    def of(cls, root: str | os.PathLike[str] | None) -> Sysroot:
        return cls(Path(root) if root else Path("/"))

    @property
    def is_live(self) -> bool:
        """True when this is the real machine, not a fake tree."""
        return self.root.resolve() == Path("/")

    def path(self, abs_path: str | os.PathLike[str]) -> Path:
        """Map an absolute machine path (``/sys/...``) to the path under this root."""
        p = os.fspath(abs_path)
        if not p.startswith("/"):
            raise ValueError(f"machine paths are absolute, got {p!r}")
        return self.root / p.lstrip("/")

    def unmap(self, path: str | os.PathLike[str]) -> str:
        """The machine path a path under this root stands for (inverse of :meth:`path`)."""
        rel = os.path.relpath(os.fspath(path), self.root)
        return "/" + ("" if rel == "." else rel)

    def read_text(self, abs_path: str) -> str | None:
        """The file's text with surrounding whitespace stripped, or ``None`` if unreadable."""
        try:
            return self.path(abs_path).read_text(encoding="utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return None

    def read_bytes(self, abs_path: str) -> bytes | None:
        """The file's bytes as they are (EFI variables, certificates), or ``None`` if
        unreadable."""
        try:
            return self.path(abs_path).read_bytes()
        except (OSError, ValueError):
            return None

    def read_int(self, abs_path: str, base: int = 0) -> int | None:
        """The file parsed as one integer (``0x`` prefixes allowed), or ``None``."""
        text = self.read_text(abs_path)
        if text is None:
            return None
        try:
            return int(text.split()[0], base)
        except (ValueError, IndexError):
            return None

    def exists(self, abs_path: str) -> bool:
        return self.path(abs_path).exists()

    def listdir(self, abs_path: str) -> list[str]:
        """Sorted entries of a directory, or an empty list if it cannot be read."""
        try:
            return sorted(os.listdir(self.path(abs_path)))
        except OSError:
            return []

    def realpath(self, abs_path: str) -> str | None:
        """Resolve symlinks *inside* the root (sysfs is full of relative links).

        Returns the machine path, or ``None`` when the path does not exist.
        """
        target = self.path(abs_path)
        try:
            resolved = target.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        root = self.root.resolve()
        try:
            rel = resolved.relative_to(root)
        except ValueError:
            # An absolute link in a fake tree points at the real machine: re-anchor it.
            return str(resolved)
        return "/" + str(rel) if str(rel) != "." else "/"
