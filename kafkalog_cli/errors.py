"""The one base of every error kafkalog raises on purpose, and the exit code each maps to.

Commands turn a ``KafkalogError`` into one line on stderr and ``exit_code``: 1 for invalid
data found, 2 for usage errors and input that cannot be read. The classes that are also an
``OSError`` or a ``ValueError`` stay catchable as those.
"""

from __future__ import annotations

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class KafkalogError(Exception):
    """An error kafkalog reports as one line and an exit code (``exit_code``)."""

    exit_code = EXIT_USAGE


class InvalidDataError(KafkalogError):
    """Bytes that are not what their file kind requires: exit code 1."""

    exit_code = EXIT_INVALID


class UsageError(KafkalogError, ValueError):
    """A request that cannot be carried out as asked (a path of the wrong kind, options that
    contradict each other): exit code 2."""
