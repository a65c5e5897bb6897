"""``with pitstop.profile.profile(steps=50) as prof: ... prof.step()`` — profiling from code.

The same recorder as the command, in the current process; the sampler runs on a
background thread of this process. On exit (normal or by an exception, which is never
swallowed) the report is built, written to ``out`` (unless ``out=None``) and kept on
the object: ``prof.verdict``, ``prof.document``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from pitstop.profile.recorder import Recorder

__all__ = ["Profile"]


class Profile:
    """Records ``warmup + steps`` steps; call :meth:`step` at the end of each training step."""

    def __init__(self, steps: int = 50, warmup: int = 5, out: str | os.PathLike[str] | None = "pitstop-profile",
                 *, probe: bool = True, sample: bool = True, summary: bool = True,
                 stacks: bool = True, precision_ab: bool = True) -> None:
        if steps < 1 or warmup < 0:
            raise ValueError("steps must be >= 1 and warmup >= 0")
        self.steps, self.warmup = steps, warmup
        self.out = Path(out) if out is not None else None
        self.probe, self.sample, self.summary = probe, sample, summary
        self.stacks, self.precision_ab = stacks, precision_ab
        self.recorder: Recorder | None = None
        self.document: dict[str, Any] | None = None
        self._sampler: Any = None
        self._t0 = 0.0

    @property
    def verdict(self) -> str | None:
        return self.document["verdict"] if self.document else None

    def __enter__(self) -> Profile:
        import torch

        from pitstop.profile.contention import ContentionReader
        from pitstop.telemetry.sampler import Sampler, default_readers

        if self.out is not None:
            # Fail before training, not after it: an OSError here names the folder.
            self.out.mkdir(parents=True, exist_ok=True)
        self._t0 = time.time()
        self.recorder = Recorder(steps=self.steps, warmup=self.warmup, capture_path=None,
                                 boundary="manual", probe=self.probe, stacks=self.stacks,
                                 precision_ab=self.precision_ab)
        self.recorder.install(torch)
        self._missing: dict[str, str] = {}
        if self.sample:
            readers, missing = default_readers([os.getpid()])
            readers.append(ContentionReader([os.getpid()]))
            self._missing = {f"{k}_telemetry": v for k, v in missing.items()}
            self._sampler = Sampler(readers).start()
        return self

    def step(self) -> None:
        """Mark the end of one training step."""
        if self.recorder is not None:
            self.recorder.mark_step()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        from pitstop.fileio import atomic_write_json, atomic_write_text
        from pitstop.profile.report import build_document, render_html, render_terminal

        rec = self.recorder
        if rec is None:
            return
        info = ({"kind": "exception", "type": exc_type.__name__, "message": str(exc)[:500]}
                if exc_type is not None else None)
        rec.finish("partial", info)  # no-op when the window completed: it is "complete" then
        rec._uninstall()  # hooks left in place when the window ended inside one
        samples = self._sampler.stop() if self._sampler is not None else []
        cap = rec.capture()
        self.document = build_document([cap], samples, command=list(sys.argv), exit_code=None,
                                       steps=self.steps, warmup=self.warmup,
                                       not_measured=self._missing, started_wall=self._t0,
                                       duration_s=time.time() - self._t0)
        if self.out is not None:
            atomic_write_json(self.out / "profile.json", self.document)
            atomic_write_text(self.out / "report.html", render_html(self.document))
        if self.summary:
            from rich.console import Console

            render_terminal(self.document, Console(stderr=True, highlight=False),
                            out_dir=str(self.out) if self.out else None)
