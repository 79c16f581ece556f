"""The `kafkalog` command group. Each command's module is imported only when that command
runs: start-up time counts for a tool run from cron and shell loops."""

from __future__ import annotations

import gc
import importlib
import signal
import sys
from gettext import gettext as _
from typing import List, Optional, Tuple

# click's import makes thousands of objects that live until exit: the cycle collector is paused
# while it is made, as main() pauses it for the command's imports.
_gc_was_enabled = gc.isenabled()
gc.disable()
try:
    import click
finally:
    if _gc_was_enabled:
        gc.enable()

from .. import __version__  # noqa: E402

COMMANDS = {
    "dump": "dump:dump",
    "describe": "describe:describe",
    "verify-index": "verify_index:verify_index",
    "recover": "recover:recover",
    "quarantine": "quarantine:quarantine",
    "append": "append:append",
    "roll": "append:roll",
    "retain": "retain:retain",
    "transactions": "transactions:transactions",
    "cleaner": "cleaner:cleaner",
    "compact": "compact:compact",
    "export": "spark_cmds:export",
    "scan": "spark_cmds:scan",
}

# Each command's short help as its module gives it (tests/cli/test_startup.py holds them equal), so
# that `kafkalog --help` and the shell completion of a command name list the commands without
# importing all their modules. A command not here is imported to be listed.
SHORT_HELP = {
    "dump": "Print log, index and snapshot files as kafka-dump-log.sh.",
    "describe": "A log directory, partition or segment at a glance.",
    "verify-index": "Check .index, .timeindex and .txnindex files against logs.",
    "recover": "Recover partitions as a broker's load does, losing nothing.",
    "quarantine": "List, restore or purge what recover set aside.",
    "append": "Append records from stdin to a partition directory.",
    "roll": "Seal the active segment; start a new one at the next offset.",
    "retain": "Delete expired segments, as a broker's retention does.",
    "transactions": "List the transactions of partitions; find hanging ones.",
    "cleaner": "Why a compacted partition is or is not being cleaned.",
    "compact": "Clean compacted partitions as the broker's log cleaner does.",
    "export": "Export records to Parquet, JSON Lines or CSV with Spark.",
    "scan": "Check every segment with Spark tasks; sum up partitions.",
}


class LazyGroup(click.Group):
    # Set by main() while the cycle collector is paused for start-up (see main).
    gc_paused = False

    def list_commands(self, ctx: click.Context) -> List[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        command = getattr(importlib.import_module("." + module, __package__), attr)
        if LazyGroup.gc_paused:
            _resume_gc()
        return command

    def resolve_command(self, ctx: click.Context, args: List[str]
                        ) -> Tuple[Optional[str], Optional[click.Command], List[str]]:
        """As click.Group resolves a command, with a mistyped name's nearest commands named in
        the usage error (difflib, as click names the nearest options), on click 8.1 too."""
        name = args[0] if args else ""
        if (name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing
                and ctx.token_normalize_func is None):
            from difflib import get_close_matches
            near = get_close_matches(name, list(COMMANDS))
            message = "No such command %r." % name
            if len(near) == 1:
                message += " Did you mean %r?" % near[0]
            elif near:
                message += " (Did you mean one of: %s?)" % ", ".join(repr(n) for n in near)
            ctx.fail(message)
        return super().resolve_command(ctx, args)

    def _listed(self, ctx: click.Context) -> Optional[List[Tuple[str, str]]]:
        """(name, short help) of every command, or None when one's must be imported."""
        names = self.list_commands(ctx)
        if not all(name in SHORT_HELP for name in names):
            return None
        return [(name, SHORT_HELP[name]) for name in names]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = self._listed(ctx)
        if rows is None:
            return super().format_commands(ctx, formatter)
        with formatter.section(_("Commands")):  # as click.Group writes it
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list:
        rows = self._listed(ctx)
        if rows is None:
            return super().shell_complete(ctx, incomplete)
        from click.shell_completion import CompletionItem
        # as click.Group completes: the command names, then the group's own options
        return ([CompletionItem(name, help=text) for name, text in rows
                 if name.startswith(incomplete)]
                + click.Command.shell_complete(self, ctx, incomplete))


def _resume_gc() -> None:
    """The command's modules are imported: what they made lives until exit. gc.freeze moves it
    out of the collector's sight (no collection walks it again, nor the one at exit), and the
    collector runs again for what the command itself makes."""
    LazyGroup.gc_paused = False
    gc.freeze()
    gc.enable()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafkalog")
def cli() -> None:
    """Offline toolkit for Apache Kafka log directories."""


def _never_an_encoding_error() -> None:
    """Text that cannot be encoded for the terminal (a file name that is not UTF-8 reaches
    Python as lone surrogates; an ASCII locale refuses any accent) is written with backslash
    escapes rather than raising UnicodeEncodeError in the middle of a report. Commands escape
    the names they print themselves (files.printable_name); this is the net under them."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass  # not a TextIOWrapper (a test runner's stream): left as it is


def main() -> None:
    # Die quietly on a closed pipe (`kafkalog dump ... | head`), as Unix tools do.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _never_an_encoding_error()
    # Start-up: the imports make thousands of long-lived objects, and the cycle collector would
    # walk them again and again while they are made (and once more at exit). It is paused until
    # the command's module is imported (LazyGroup.get_command), or the run ends.
    if gc.isenabled():
        gc.disable()
        LazyGroup.gc_paused = True
    try:
        cli(prog_name="kafkalog")
    finally:
        if LazyGroup.gc_paused:
            _resume_gc()
