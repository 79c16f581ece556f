"""How every command reports an error it cannot go on from: one line on stderr, then the
error's exit code (a KafkalogError carries its own; any other OSError is unreadable input, 2)."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..errors import EXIT_USAGE, KafkalogError
from ..log.files import os_error_text


def error_text(error: BaseException, path: str = "") -> str:
    """The one line for ``error``: ``<file>: <why>`` for an OSError, its message otherwise."""
    if isinstance(error, OSError) and error.strerror:
        # our own OSErrors without a file name say where in their message (a held .lock)
        where = error.filename or (None if isinstance(error, KafkalogError) else path)
        return os_error_text(where, error) if where else error.strerror
    return str(error)


def exit_code(error: BaseException) -> int:
    return error.exit_code if isinstance(error, KafkalogError) else EXIT_USAGE


def fail(error: BaseException, path: str = "") -> NoReturn:
    """Print ``kafkalog: <one line>`` for ``error`` on stderr and exit with its code."""
    click.echo("kafkalog: " + error_text(error, path), err=True)
    sys.exit(exit_code(error))
