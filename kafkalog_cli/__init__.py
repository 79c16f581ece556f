"""kafkalog: an offline toolkit for Apache Kafka log directories.

The Python API (see the README's "Python API" section):

    from kafkalog_cli import LogDir, Partition, Segment

    for record in Partition("/var/lib/kafka/data/orders-0").records(from_offset=100):
        print(record.offset, record.timestamp, record.key, record.value)

The names below are imported when first used, so that importing the package (as every
`kafkalog` command does) costs nothing.
"""

__version__ = "0.1.0"

# the codec error handler the readers decode text with (Java's UTF-8 replacement), registered
# before any of them runs
from .format import utf8 as _utf8  # noqa: E402,F401

_API = {
    "LogDir": "kafkalog_cli.log.logdir",
    "Partition": "kafkalog_cli.log.partition",
    "Segment": "kafkalog_cli.log.segment",
    "Record": "kafkalog_cli.log.read",
    "KafkalogError": "kafkalog_cli.errors",
    "InvalidDataError": "kafkalog_cli.errors",
    "UsageError": "kafkalog_cli.errors",
    "FileAccessError": "kafkalog_cli.errors",
    "MissingFileError": "kafkalog_cli.errors",
    "AccessDeniedError": "kafkalog_cli.errors",
    "LockHeld": "kafkalog_cli.log.lock",
    # the operations' inputs and reports (Partition and LogDir methods)
    "Policy": "kafkalog_cli.log.retain",
    "AppendSettings": "kafkalog_cli.log.produce",
    "Description": "kafkalog_cli.log.describe",
    "PartitionDescription": "kafkalog_cli.log.describe",
    "SegmentDescription": "kafkalog_cli.log.describe",
    "KraftSnapshotDescription": "kafkalog_cli.log.describe",
    "FileReport": "kafkalog_cli.log.verify",
    "Transaction": "kafkalog_cli.log.transactions",
    "PartitionSummary": "kafkalog_cli.log.transactions",
    "PartitionPlan": "kafkalog_cli.log.recover_plan",
    "RecoveryTotals": "kafkalog_cli.log.recover_plan",
    "LogDirRecovery": "kafkalog_cli.log.recover_run",
    "RetentionPlan": "kafkalog_cli.log.retain",
    "RollResult": "kafkalog_cli.log.append",
    "AppendResult": "kafkalog_cli.log.produce",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError("module 'kafkalog_cli' has no attribute %r" % name)


def __dir__() -> "list[str]":
    return __all__
