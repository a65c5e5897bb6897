"""Exit codes, and the errors that mean "the user asked for something we cannot do".

The CLI (:func:`pitstop.cli.main`) is the one error boundary: it turns :class:`UsageError`
into a one-line message and exit code 2, a bug (any other exception) into a one-line
message and :data:`EXIT_INTERNAL`, and an output that cannot be written (broken pipe,
full disk, closed standard output) into a one-line message and :data:`EXIT_OUTPUT`.
Raise :class:`UsageError` with a message that names the input and says what to do.

The exit codes below are the same for every command; ``pitstop --help`` and
``docs/cli.md`` list them from :data:`EXIT_CODES`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1  # findings, differing settings, files that cannot be checked
EXIT_USAGE = 2  # bad usage or bad input; the message says what to fix
EXIT_INTERNAL = 70  # a bug in pitstop (sysexits.h EX_SOFTWARE)
EXIT_OUTPUT = 74  # the output cannot be written: broken pipe, disk full (EX_IOERR)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM); SIGHUP ends with 129

# What each code means, in the words --help and docs/cli.md use.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "done; nothing wrong found"),
    (EXIT_FINDINGS, "findings: problems found, settings that differ, files that cannot be checked"),
    (EXIT_USAGE, "bad usage or bad input (a one-line message says what to fix)"),
    (EXIT_INTERNAL, "internal error: a bug in pitstop (--debug shows the traceback)"),
    (EXIT_OUTPUT, "output failed: standard output closed, a broken pipe, a full disk"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_TERMINATED, "terminated (SIGTERM; 129 for SIGHUP)"),
)


class UsageError(Exception):
    """Bad input from the user: a missing file, a malformed option value, and the like."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (see :mod:`pitstop.signals`).

    A ``BaseException``, like ``KeyboardInterrupt``, so that ``except Exception`` does not
    swallow it while ``finally`` blocks and context managers still run: temp files are
    removed and child processes ended on the way out.
    """

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
