"""Bytes to records and back: pure functions over bytes and memoryviews, no file handling."""

from __future__ import annotations
