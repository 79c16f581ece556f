"""Errors raised by the format layer."""

from __future__ import annotations

from ..errors import InvalidDataError


class CorruptRecordError(InvalidDataError, ValueError):
    """The bytes do not form a valid record, batch or compressed stream."""


class LimitExceededError(CorruptRecordError):
    """A length or a decompressed size goes past the configured bound."""
