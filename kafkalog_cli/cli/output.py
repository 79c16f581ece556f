"""The output layer of the reports (recover, retain, describe, transactions): one of three
layouts (JSON Lines, plain lines on a pipe, rich tables on a terminal), and what they share in
words: sizes, counts and offset ranges."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Sequence

import click


def human_bytes(n: Optional[int]) -> str:
    """Bytes as a short figure for a terminal (1024-based units: 1.2 MiB), "-" for None; JSON
    keeps the exact integer."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return ("%d B" % n) if unit == "B" else ("%.1f %s" % (size, unit))
        size /= 1024
    return str(n)  # pragma: no cover


def table_output(fmt: str) -> bool:
    """One layout per output: a rich table on a terminal, plain lines on a pipe (or JSON)."""
    return fmt == "text" and sys.stdout.isatty()


class Output:
    """A command's report in one layout: JSON Lines (``fmt`` "json"), plain lines (text on a
    pipe) or rich tables (text on a terminal: ``table``). ``emit(obj, text)`` writes one item:
    its JSON object, or its line; on a terminal the line is held in ``lines``, for the command
    to print beside its tables. ``buffered``: every line is held until ``flush``."""

    def __init__(self, fmt: str, buffered: bool = False) -> None:
        self.fmt = fmt
        self.json = fmt == "json"
        self.table = table_output(fmt)
        self.buffered = buffered
        self.lines: List[str] = []

    def emit(self, obj: Dict[str, Any], text: str) -> None:
        line = json.dumps(obj) if self.json else text
        if self.table or self.buffered:
            self.lines.append(line)
        else:
            click.echo(line)

    def flush(self) -> None:
        """Write the lines held, and hold none."""
        if self.lines:
            click.echo("\n".join(self.lines))
        self.lines = []


def plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def offsets_text(first: Optional[int], last: Optional[int], records: int) -> str:
    """"offsets 290-299, 10 records", or "no batch"."""
    if first is None or last is None:
        return "no batch"
    return "offsets %d-%d, %s" % (first, last, plural(records, "record"))


def new_offsets_text(label: str, objs: Sequence[Dict[str, Any]], key: str) -> str:
    """The summary's tail naming each partition's new offset (``key`` of its JSON object):
    "; new log end offset 290", or one per partition when there are several."""
    if len(objs) == 1:
        return "; new %s %s" % (label, objs[0][key])
    if objs:
        return "; new %ss %s" % (label, ", ".join(
            "%s-%s %s" % (o["topic"], o["partition"], o[key]) for o in objs))
    return ""
