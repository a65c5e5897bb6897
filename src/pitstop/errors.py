"""Errors that mean "the user asked for something we cannot do", not "pitstop broke".

The CLI turns :class:`UsageError` into a one-line message and exit code 2, never a
traceback. Raise it with a message that names the input and says what to do.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: a missing file, a malformed option value, and the like."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
