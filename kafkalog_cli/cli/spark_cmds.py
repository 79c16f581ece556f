"""`kafkalog export` and `kafkalog scan`: the Spark pipeline's commands."""

from __future__ import annotations

import errno
import importlib.util
import os
import sys
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NoReturn, Sequence, Tuple,
                    TypeVar)

import click

from ..errors import EXIT_INVALID, EXIT_OK, KafkalogError, UsageError
from .errors import fail
from .output import Column, Output, show, table

if TYPE_CHECKING:
    from pyspark import SparkContext

F = TypeVar("F", bound=Callable[..., Any])


def _spark_options(f: F) -> F:
    f = click.option("--verbose", is_flag=True,
                     help="Show Spark's own warnings (by default only its errors).")(f)
    f = click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
                     help="A Spark setting (repeatable), e.g. spark.executor.memory=4g.")(f)
    f = click.option("--master", default="local[*]", show_default=True,
                     help="Spark master: local[N], spark://host:7077, yarn, k8s://...")(f)
    return f


def _conf(pairs: Iterable[str]) -> List[Tuple[str, str]]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter("expected KEY=VALUE, got %r" % pair, param_hint="--spark-conf")
        out.append((key.strip(), value))
    return out


def _need_pyspark() -> None:
    try:
        found = importlib.util.find_spec("pyspark") is not None
        if found:
            import pyspark.sql  # noqa: F401  (installed but broken counts as missing)
    except (ImportError, ValueError):
        found = False
    if not found:
        fail(UsageError("this command runs on Apache Spark and needs pyspark: "
                        "pip install 'kafkalog[spark]'"))


def _check_path(path: str) -> str:
    if not os.path.exists(path):
        fail(FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path))
    return os.path.abspath(path)


def _spark(master: str, conf: Sequence[Tuple[str, str]], app: str,
           verbose: bool) -> SparkContext:
    """The jobs' Spark (start.context: no SQL session, which they do not use), or one line on
    stderr and exit 2 (a master URL Spark does not take, a master that cannot be reached, a JVM
    or cluster that would not start)."""
    from ..spark import start
    try:
        return start.context(master, conf, app, verbose)
    except KafkalogError as e:
        fail(e)


def _job_failed(what: str, error: BaseException) -> NoReturn:
    """Stop at a failed Spark job: Spark reports analysis and job errors as Java exceptions
    of many lines, of which the first says what went wrong; a task's Python worker that
    failed, by its traceback, whose exception line says why (a worker whose Python cannot
    import kafkalog, say)."""
    lines = str(error).strip().splitlines()
    said = lines[0] if lines else type(error).__name__
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            cause = next((x for x in lines[i + 1:] if x.strip() and not x[0].isspace()), None)
            if cause:
                said = "a Python worker failed: %s" % cause.strip()
                if "No module named" in cause:
                    said += (" (the executors' Python, spark.pyspark.python, needs kafkalog and "
                             "its dependencies)")
            break
    fail(KafkalogError("%s failed: %s" % (what, said)))


@click.command(short_help="Export records to Parquet, JSON Lines or CSV with Spark.")
@click.argument("path", type=click.Path())
@click.option("--output", required=True, type=click.Path(), help="Where to write (a directory).")
@click.option("--output-format", type=click.Choice(["parquet", "json", "csv"]), default="parquet",
              show_default=True)
@click.option("--partition-by", default="", metavar="COLS", help="e.g. topic,partition")
@click.option("--mode", type=click.Choice(["errorifexists", "overwrite", "append"]),
              default="errorifexists", show_default=True, help="When OUTPUT exists.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A kafkalog data source option (includeControl=true, fromOffset=N, ...).")
@click.option("--include-invalid", is_flag=True,
              help="Write invalid batches and bytes as rows (isValid=false); exit 0.")
@click.option("--skip-invalid", is_flag=True,
              help="Leave invalid data out without a word; exit 0.")
@_spark_options
def export(path: str, output: str, output_format: str, partition_by: str, mode: str,
           options: Tuple[str, ...], include_invalid: bool, skip_invalid: bool, master: str,
           spark_conf: Tuple[str, ...], verbose: bool) -> None:
    """Export the records of a log directory, partition directory or segment to Parquet, JSON
    Lines or CSV, with Spark (local by default; any cluster with --master).

    Invalid data (what `kafkalog scan` counts: batches whose CRC fails, whose records cannot be
    read or whose offsets are out of place, bytes that are no batch) is said on stderr, each
    with its position, and the exit status is 1; the valid records are exported all the same.
    --include-invalid writes them as rows instead, --skip-invalid leaves them out quietly."""
    _need_pyspark()
    if include_invalid and skip_invalid:
        fail(UsageError("--include-invalid and --skip-invalid exclude each other"))
    path = _check_path(path)
    conf = _conf(spark_conf)
    opts = dict(_conf(options))
    if include_invalid:
        opts["includeInvalid"] = "true"
    from ..spark.source import Options
    include_invalid = Options(opts).include_invalid  # --option includeInvalid=true as well
    cols = [c for c in partition_by.split(",") if c]
    from ..spark import jobs
    with jobs.Progress(sys.stderr.isatty()) as progress:
        spark = progress.attach(_spark(master, conf, "kafkalog export", verbose))
        try:
            result = jobs.export(spark, path, os.path.abspath(output), output_format, cols,
                                 mode, opts)
            progress.finish()
        except Exception as e:
            _job_failed("export", e)
        finally:
            spark.stop()
    click.echo("exported %s to %s (%s)" % (path, output, output_format))
    if not result.problems or skip_invalid:
        sys.exit(EXIT_OK)
    counts = "%d invalid batches and %d invalid bytes" % (result.invalid_batches,
                                                         result.invalid_bytes)
    if include_invalid:
        click.echo("kafkalog: export: %s written as rows with isValid=false" % counts, err=True)
        sys.exit(EXIT_OK)
    for topic, partition, segment, p in result.problems:
        click.echo("kafkalog: %s: %s: %s" % (_partition_name(topic, partition), segment, p.text),
                   err=True)
    click.echo("kafkalog: export: %s not exported (--include-invalid writes them as rows, "
               "--skip-invalid leaves them out quietly)" % counts, err=True)
    sys.exit(EXIT_INVALID)


def _partition_name(topic: str, partition: int) -> str:
    return topic if partition == -1 else "%s-%d" % (topic, partition)


def _offsets(r: Dict[str, Any]) -> str:
    return "-" if r["first_offset"] is None else "%d-%d" % (r["first_offset"], r["last_offset"])


SCAN_COLUMNS = (Column("partition"), Column("segments", "right"), Column("batches", "right"),
                Column("records", "right"), Column("bytes", "right"), Column("offsets"),
                Column("codecs"), Column("invalid batches", "right"),
                Column("invalid bytes", "right"))


def _scan_row(r: Dict[str, Any]) -> Tuple[str, ...]:
    bad = "[red]%d[/red]" if r["invalid_batches"] or r["invalid_bytes"] else "%d"
    return ("%s-%d" % (r["topic"], r["partition"]), str(r["segments"]), str(r["batches"]),
            str(r["records"]), str(r["bytes"]), _offsets(r), ",".join(r["codecs"]),
            bad % r["invalid_batches"], bad % r["invalid_bytes"])


def _table(rows: Sequence[Dict[str, Any]]) -> None:
    show(table("kafkalog scan", SCAN_COLUMNS, [_scan_row(r) for r in rows]))


def _scan_json(r: Dict[str, Any]) -> Dict[str, Any]:
    """A partition's totals in the JSON vocabulary (README, "JSON output"), as describe's:
    sizeBytes, the problems counted (each is also a line on stderr)."""
    unnamed = r["partition"] == -1  # a directory not named <topic>-<n>
    return {"type": "partition", "topic": None if unnamed else r["topic"],
            "partition": None if unnamed else r["partition"],
            "segments": r["segments"], "batches": r["batches"], "records": r["records"],
            "sizeBytes": r["bytes"], "firstOffset": r["first_offset"],
            "lastOffset": r["last_offset"], "minTimestamp": r["min_timestamp"],
            "maxTimestamp": r["max_timestamp"], "codecs": r["codecs"],
            "invalidBatches": r["invalid_batches"], "invalidBytes": r["invalid_bytes"],
            "problems": len(r["problems"])}


@click.command(short_help="Check every segment with Spark tasks; sum up partitions.")
@click.argument("path", type=click.Path())
@click.option("--topics", default="", help="Only these topics (comma-separated).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@_spark_options
def scan(path: str, topics: str, fmt: str, master: str, spark_conf: Tuple[str, ...],
         verbose: bool) -> None:
    """Check every segment under PATH with Spark tasks and sum up each partition: segments,
    batches, records, bytes, offset and time ranges, codecs, invalid batches and bytes.
    Exit status: 0 all valid, 1 anything invalid, 2 errors."""
    _need_pyspark()
    path = _check_path(path)
    conf = _conf(spark_conf)
    from ..spark import jobs
    with jobs.Progress(sys.stderr.isatty()) as progress:
        spark = progress.attach(_spark(master, conf, "kafkalog scan", verbose))
        try:
            result = jobs.scan(spark, path, [t for t in topics.split(",") if t])
            progress.finish()
        except Exception as e:
            _job_failed("scan", e)
        finally:
            spark.stop()
    rows = result.partitions
    out = Output(fmt)
    if out.table:
        _table(rows)
    else:
        for r in rows:
            out.emit(_scan_json(r),
                     "%s-%d: %d segments, %d batches, %d records, %d bytes, offsets %s, "
                     "codecs %s, %d invalid batches, %d invalid bytes" % (
                         r["topic"], r["partition"], r["segments"], r["batches"], r["records"],
                         r["bytes"], _offsets(r), ",".join(r["codecs"]) or "-",
                         r["invalid_batches"], r["invalid_bytes"]))
    out.summary("scan", partitions=len(rows),
                **{name: sum(r[key] for r in rows) for name, key in (
                    ("segments", "segments"), ("batches", "batches"), ("records", "records"),
                    ("size_bytes", "bytes"), ("invalid_batches", "invalid_batches"),
                    ("invalid_bytes", "invalid_bytes"))},
                problems=sum(len(r["problems"]) for r in rows))
    for r in rows:
        for p in r["problems"]:
            click.echo("kafkalog: %s-%d: %s" % (r["topic"], r["partition"], p), err=True)
    sys.exit(EXIT_INVALID if result.invalid else EXIT_OK)
