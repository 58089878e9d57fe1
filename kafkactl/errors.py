"""Errors the CLI reports to the user, and the exit codes scripts can rely on.

Exit codes::

    0  success
    1  the command ran and found a problem (corrupt log data, a failed operation)
    2  bad input: a missing or unreadable path, a bad flag or value
    3  the cluster could not be reached, or answered with an error

A :class:`CliError` becomes one line on stderr (``kafkactl: <message>``) and its
exit code; any other exception does too, unless ``--debug`` asks for the traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_CLUSTER = 3


class CliError(Exception):
    """A user-facing failure: one line of text and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
