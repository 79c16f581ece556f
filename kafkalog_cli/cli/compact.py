"""`kafkalog compact`: one pass of the broker's log cleaner over compacted partitions."""

from __future__ import annotations

import functools
import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from ..errors import KafkalogError, UsageError
from ..log.compact import CompactionResult, compactions
from ..log.files import printable_name
from ..log.verify import TargetError
from .. import jsonvocab
from .cleaner import given_settings, setting_options
from .errors import error_text, exit_code, fail
from .numbers import java_int
from .output import Output, human_bytes, plural

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _json(r: CompactionResult) -> Dict[str, Any]:
    return {"type": "partition", "directory": printable_name(r.directory), "topic": r.topic,
            "partition": r.partition, "dryRun": r.dry_run, "skipped": r.skipped,
            "firstDirtyOffset": r.first_dirty_offset, "endOffset": r.end_offset,
            "recordsBefore": r.records_before, "recordsRemoved": r.records_removed,
            "bytesBefore": r.bytes_before, "bytesRemoved": r.bytes_removed,
            "tombstonesRemoved": r.tombstones_removed,
            "groups": [{jsonvocab.camel(name): getattr(g, name)
                        for name in g.__report_fields__} for g in r.groups],
            "renamed": [printable_name(n) for n in r.renamed],
            "config": {name: {"value": value, "source": r.status.config.sources[name]}
                       for name, value in r.status.config.values.items()}}


def _line(r: CompactionResult) -> str:
    name = printable_name(r.directory)
    if r.skipped:
        return "%s: not cleaned: %s" % (name, r.skipped)
    segments = sum(len(g.bases) for g in r.groups)
    return "%s: %s offsets %d-%d (%s into %s): %s %s of %s, %s of %s, %s; %s %d" % (
        name, "would clean" if r.dry_run else "cleaned", r.first_dirty_offset or 0,
        (r.end_offset or 1) - 1, plural(segments, "segment"), plural(len(r.groups), "segment"),
        "would remove" if r.dry_run else "removed", plural(r.records_removed, "record"),
        plural(r.records_before, "record"), human_bytes(r.bytes_removed),
        human_bytes(r.bytes_before), plural(r.tombstones_removed, "tombstone") + " among them",
        "the cleaner checkpoint would move to" if r.dry_run
        else "the cleaner checkpoint moved to", r.end_offset or 0)


@click.command(short_help="Clean compacted partitions as the broker's log cleaner does.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@setting_options
@click.option("--segment-bytes", type=java_int(14), default=None,
              help="The topic's segment.bytes, the most a group of segments cleaned into one "
              "holds (default: as above, else 1073741824).")
@click.option("--index-interval-bytes", type=java_int(0), default=None,
              help="The topic's index.interval.bytes (default: as above, else 4096).")
@click.option("--dry-run", is_flag=True, help="Say what the pass would do; change nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout (a line per partition, then "
              "a summary).")
def compact(paths: Tuple[str, ...], now: Optional[int], cleanup_policy: Optional[str],
            min_cleanable_dirty_ratio: Optional[float], delete_retention_ms: Optional[int],
            min_compaction_lag_ms: Optional[int], max_compaction_lag_ms: Optional[int],
            dedupe_buffer_size: Optional[int], cleaner_threads: Optional[int],
            high_watermark: Optional[int], segment_bytes: Optional[int],
            index_interval_bytes: Optional[int], dry_run: bool, fmt: str) -> None:
    """Make one pass of the broker's log cleaner over each compacted partition.

    PATHS are partition directories, .log files (their partition) or log directories (every
    partition). The pass cleans from the first dirty offset to the first uncleanable one (as
    `kafkalog cleaner` shows them): it keeps the last record of each key, tombstones until
    their delete horizon (stamped on the first pass, delete.retention.ms after --now), no
    record of an aborted transaction, transaction markers while needed and the batches holding
    an active producer's last sequence; the segments are grouped up to segment.bytes and
    each group written as one new segment, swapped in as the broker swaps (the old segments
    are left as .deleted files); cleaner-offset-checkpoint is updated. Every batch kept whole
    is copied byte for byte; one that loses records is written again with its codec.
    Refuses a log directory a running broker holds. Exit status: 0 done, 1 a partition on
    which the broker's cleaner would fail (left as it was), 2 usage error or unreadable
    input.
    """
    given = given_settings(cleanup_policy, min_cleanable_dirty_ratio, delete_retention_ms,
                           min_compaction_lag_ms, max_compaction_lag_ms, dedupe_buffer_size,
                           cleaner_threads)
    given.update({"segment.bytes": segment_bytes, "index.interval.bytes": index_interval_bytes})
    out = Output(fmt)
    status = EXIT_OK
    done: List[CompactionResult] = []
    for target in paths:
        try:
            for item in compactions(target, given, now, dry_run, high_watermark):
                if isinstance(item, TargetError):
                    click.echo("kafkalog: " + error_text(item.error, item.path), err=True)
                    status = max(status, exit_code(item.error))
                    continue
                done.append(item)
                out.emit(functools.partial(_json, item), _line(item))
        except (UsageError, OSError, KafkalogError) as e:
            fail(e)
    cleaned = [r for r in done if not r.skipped]
    counts = {"partitions": len(done), "cleaned": len(cleaned),
              "records_removed": sum(r.records_removed for r in cleaned),
              "bytes_removed": sum(r.bytes_removed for r in cleaned)}
    text = "%s, %d %s: %s and %s %s" % (
        plural(counts["partitions"], "partition"), counts["cleaned"],
        "would be cleaned" if dry_run else "cleaned", plural(counts["records_removed"],
                                                               "record"),
        human_bytes(counts["bytes_removed"]), "would go" if dry_run else "removed")
    # no summary line after a run that failed before any partition: its error line says it all
    out.summary("compact", None if status == EXIT_USAGE and not done else text, **counts)
    sys.exit(status)
