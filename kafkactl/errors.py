"""Errors the CLI reports to the user, and the exit codes scripts can rely on.

Exit codes, the contract scripts rely on::

    0  success
    1  refused, or a problem found: the request was understood and refused (a
       group that still has members, a topic that already exists, a policy or
       authorization refusal, a failed SASL authentication), or the command found
       a problem (corrupt log data, records not acknowledged, fewer records than
       asked)
    2  bad input: a bad flag or value, a missing or unreadable path, a directory
       holding no segments, a bad --command-config file, or a name that does not
       exist (topic, partition, group, broker id, SCRAM credential), whether
       kafkactl or the broker notices (INVALID_CONFIG, INVALID_PARTITIONS,
       UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_SASL_MECHANISM ...)
    3  the cluster: no connection could be made or it broke, no answer in time,
       or an error answer that is not about the input (KAFKA_STORAGE_ERROR,
       COORDINATOR_NOT_AVAILABLE, an API the broker does not serve ...)

Which Kafka error code means which exit code is decided in one place,
:func:`kafkactl._common.exit_code_for`.

A :class:`CliError` becomes one line on stderr (``kafkactl: <message>``) and its
exit code; any other exception does too, unless ``--debug`` asks for the traceback.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_CLUSTER = 3


class CliError(Exception):
    """A user-facing failure: one line of text and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextlib.contextmanager
def invalid_request_is_bad_input() -> Iterator[None]:
    """A change the broker will not take with INVALID_REQUEST (a quota or a client metrics subscription it does
    not know, a value out of range) is bad input, exit 2, as INVALID_CONFIG already is; other answers as for
    every command."""
    from broker.client import errors

    try:
        yield
    except errors.BrokerResponseError as exc:
        if exc.error_name == "INVALID_REQUEST":
            raise CliError(str(exc), EXIT_USAGE) from exc
        raise
