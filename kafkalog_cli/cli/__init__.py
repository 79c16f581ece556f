"""Command-line interface: click commands and output formats only."""

from __future__ import annotations
