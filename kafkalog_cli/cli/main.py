"""The `kafkalog` command group."""

import signal

import click

from .. import __version__
from .append import append, roll
from .dump import dump
from .recover import recover
from .retain import retain
from .spark_cmds import export, scan
from .verify_index import verify_index


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafkalog")
def cli():
    """Offline toolkit for Apache Kafka log directories."""


cli.add_command(dump)
cli.add_command(verify_index)
cli.add_command(recover)
cli.add_command(append)
cli.add_command(roll)
cli.add_command(retain)
cli.add_command(export)
cli.add_command(scan)


def main():
    # Die quietly on a closed pipe (`kafkalog dump ... | head`), as Unix tools do.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    cli(prog_name="kafkalog")
