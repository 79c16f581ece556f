"""The one base of every error kafkalog raises on purpose, and the exit code each maps to.

Commands turn a ``KafkalogError`` into one line on stderr and ``exit_code``: 1 for invalid
data found, 2 for usage errors and input that cannot be read. The classes that are also an
``OSError`` or a ``ValueError`` stay catchable as those.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any, Callable, Iterator, Optional, TypeVar

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


class FileAccessError(KafkalogError, OSError):
    """A file or directory that could not be read or written (missing, not permitted, not a
    directory, a disk error): exit code 2. Also an OSError with the ``errno``, ``strerror``
    and ``filename`` of the failure; its message names the path."""


class MissingFileError(FileAccessError, FileNotFoundError):
    """A file or directory that does not exist (also a FileNotFoundError)."""


class AccessDeniedError(FileAccessError, PermissionError):
    """A file or directory the process may not read or write (also a PermissionError)."""


def file_access_error(error: OSError, path: Optional[str] = None) -> OSError:
    """``error`` as a FileAccessError (MissingFileError, AccessDeniedError, else the base),
    naming ``path`` when the error names no file; a KafkalogError is returned as it is."""
    if isinstance(error, KafkalogError):
        return error
    cls = (MissingFileError if isinstance(error, FileNotFoundError)
           else AccessDeniedError if isinstance(error, PermissionError) else FileAccessError)
    filename = error.filename if error.filename is not None else path
    if error.errno is None:  # an OSError of a message only
        return cls("%s: %s" % (filename, error) if filename is not None else str(error))
    return cls(error.errno, error.strerror, filename, None, error.filename2)


F = TypeVar("F", bound=Callable[..., Any])


def _translated(items: Iterator[Any], path: Optional[str]) -> Iterator[Any]:
    try:
        yield from items
    except OSError as e:
        raise file_access_error(e, path) from e


def api_errors(path_attribute: str) -> Callable[[F], F]:
    """A method of the Python API: an OSError it raises, or that the generator it returns
    raises as it is read, comes out as a FileAccessError (file_access_error), naming the
    instance's ``path_attribute`` when the error names no file."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            path = os.fspath(getattr(self, path_attribute))
            try:
                result = method(self, *args, **kwargs)
            except OSError as e:
                raise file_access_error(e, path) from e
            if isinstance(result, types.GeneratorType):
                return _translated(result, path)
            return result
        return call  # type: ignore[return-value]
    return wrap
