"""The output layer of the reports (recover, retain, describe, transactions, verify-index,
quarantine, append, scan): one of three layouts (JSON Lines, plain lines on a pipe, rich tables
on a terminal: each table from the description of its columns, ``Column``, drawn by ``table``),
and what they share in words: sizes, counts and offset ranges."""

from __future__ import annotations

import json
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NamedTuple, Optional, \
    Sequence, Union

import click

if TYPE_CHECKING:
    from rich.console import JustifyMethod, OverflowMethod
    from rich.table import Table


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


# A report item's JSON object, or a function that makes it (only JSON needs it)
Item = Union[Dict[str, Any], Callable[[], Dict[str, Any]]]


class Output:
    """A command's report in one layout: JSON Lines (``fmt`` "json", on stdout), plain lines
    (text on a pipe) or rich tables (text on a terminal: ``table``, checked on the stream the
    text goes to). ``emit(obj, text)`` writes one item: its JSON object, or its line;
    ``summary(command, text, **counts)`` the run's last. ``err``: the text goes to stderr (JSON
    stays on stdout). ``buffered``: every line is held until ``flush``; ``beside_tables``:
    on a terminal, the lines are held, for the command to print beside its tables.
    ``verbatim``: lines written as they are (click.echo would take what looks like an escape
    sequence out of a path on a pipe), each flushed at once."""

    def __init__(self, fmt: str, buffered: bool = False, beside_tables: bool = False,
                 err: bool = False, verbatim: bool = False) -> None:
        self.fmt = fmt
        self.json = fmt == "json"
        self.err = err and not self.json
        self.table = fmt == "text" and (sys.stderr if self.err else sys.stdout).isatty()
        self.buffered = buffered or (beside_tables and self.table)
        self.verbatim = verbatim
        self.lines: List[str] = []

    def emit(self, obj: Item, text: Optional[str]) -> None:
        """One item: its JSON object (``obj``, or a function that makes it, called only for
        JSON), or its line ``text`` (an item only JSON has: None)."""
        if self.json:
            self._put(json.dumps(obj() if callable(obj) else obj))
        elif text is not None:
            self._put(text)

    def summary(self, command: str, text: Optional[str] = None, **counts: Any) -> None:
        """The run's last item: in JSON its ``{"type": "summary"}`` object (jsonvocab.summary
        of ``command`` and ``counts``), else its line ``text`` (none when None); then every
        line held is written."""
        if self.json:
            from .. import jsonvocab  # here: only JSON output needs the vocabulary
            self._put(json.dumps(jsonvocab.summary(command, **counts)))
        elif text is not None:
            self._put(text)
        self.flush()

    def flush(self) -> None:
        """Write the lines held, and hold none."""
        if self.lines:
            self._write("\n".join(self.lines))
        self.lines = []

    def _put(self, line: str) -> None:
        if self.buffered:
            self.lines.append(line)
        else:
            self._write(line)

    def _write(self, text: str) -> None:
        if self.verbatim:
            stream = sys.stderr if self.err else sys.stdout
            stream.write(text + "\n")
            stream.flush()
        else:
            click.echo(text, err=self.err)


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


class Column(NamedTuple):
    """One column of a report's table: its header, where its cells sit (``justify``: numbers
    right, names and words left), whether a cell may be wrapped over lines (``no_wrap``: a file
    name is not; a column of words is wrapped between words). No cell is ever cut: ``show``
    prints the rows as blocks of lines where the table would not fit; ``overflow``, how rich
    shows a word too long for its column, is "fold" (it does not happen)."""
    header: str
    justify: "JustifyMethod" = "left"
    no_wrap: bool = False
    overflow: "OverflowMethod" = "fold"


def table(title: str, columns: Sequence[Column], rows: Iterable[Sequence[Optional[str]]],
          caption: Optional[str] = None) -> "Table":
    """A rich table of ``rows`` (cells in rich markup, in the order of ``columns``; None is an
    empty cell). ``show`` draws it, or its rows as blocks of lines where it would not fit."""
    from rich.table import Table
    drawn = Table(title=title, caption=caption)
    for c in columns:
        drawn.add_column(c.header, justify=c.justify, no_wrap=c.no_wrap, overflow=c.overflow)
    kept = [list(row) for row in rows]
    for row in kept:
        drawn.add_row(*row)
    _LAYOUTS[drawn] = (title, list(columns), kept, caption)
    return drawn


# What ``show`` needs of each table ``table`` made: its title, columns, rows (rich markup) and
# caption
_LAYOUTS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _plain(markup: Optional[str]) -> str:
    from rich.text import Text
    return Text.from_markup(markup).plain if markup else ""


def _width(text: str) -> int:
    from rich.cells import cell_len
    return max((cell_len(line) for line in text.split("\n")), default=0)


def _word_width(text: str) -> int:
    from rich.cells import cell_len
    return max((cell_len(word) for word in text.split()), default=0)


def needed_widths(columns: Sequence[Column], rows: Sequence[Sequence[Optional[str]]]) -> List[int]:
    """The width each column needs to cut no cell: a column of numbers or names (justified
    right, or not wrapped) its widest cell and header, a column of words its longest word (its
    cells and header wrapped between words)."""
    widths = []
    for i, c in enumerate(columns):
        cells = [_plain(row[i]) for row in rows if i < len(row)]
        words = c.justify == "left" and not c.no_wrap
        measure = _word_width if words else _width
        widths.append(max([measure(c.header)] + [measure(cell) for cell in cells]))
    return widths


def fitted(drawn: "Table", width: int) -> bool:
    """Whether a table ``table`` made fits in ``width`` columns with no cell cut: then its
    columns are set to widths that cut none (the columns of words share what is left, up to
    their widest cell)."""
    layout = _LAYOUTS.get(drawn)
    if layout is None:
        return True
    title, columns, rows, caption = layout
    need = needed_widths(columns, rows)
    # each column's padding (one space each side) and the vertical lines between and around
    overhead = 3 * len(columns) + 1
    annotation = max(_word_width(_plain(title)), _word_width(_plain(caption)))
    if sum(need) + overhead > width or annotation > width:
        return False
    spare = width - sum(need) - overhead
    widest = [max([_width(c.header)] + [_width(_plain(row[i])) for row in rows])
              for i, c in enumerate(columns)]
    widths = list(need)
    for i, c in enumerate(columns):
        give = min(spare, widest[i] - widths[i])
        widths[i] += give
        spare -= give
    # the title and caption are wrapped to the table's width: widen the last column for their
    # longest word
    short = annotation - (sum(widths) + overhead)
    if short > 0:
        widths[-1] += short
    for column, w in zip(drawn.columns, widths):
        column.width = w
    return True


def _blocks(drawn: "Table") -> List[str]:
    """The rows of a table ``table`` made as blocks of ``header: value`` lines (rich markup),
    one block a row, under the title; the caption last."""
    from rich.markup import escape
    title, columns, rows, caption = _LAYOUTS[drawn]
    lines = [title]
    for row in rows:
        lines.append("")
        for c, cell in zip(columns, row):
            if cell is None or not _plain(cell).strip():
                continue
            key = escape(" ".join(c.header.split()))
            line = ("%s: " % key if key else "") + "\n  ".join(cell.split("\n"))
            lines.append(line if lines[-1] else "[bold]%s[/bold]" % line)
    if caption:
        lines += ["", caption]
    return lines + [""]


def show(*items: Any, err: bool = False) -> None:
    """Print tables (and lines of rich markup) on the terminal, one after the other. A table
    ``table`` made that would not fit the terminal with every cell whole is printed as blocks
    of ``header: value`` lines, one a row (the terminal wraps a line too long for it)."""
    from rich.console import Console
    console = Console(stderr=err)
    for item in items:
        if _drawn_by_table(item) and not fitted(item, console.width):
            for line in _blocks(item):
                console.print(line, soft_wrap=True)
        else:
            console.print(item)


def _drawn_by_table(item: Any) -> bool:
    try:
        return item in _LAYOUTS
    except TypeError:  # not weakly referable (a str)
        return False
