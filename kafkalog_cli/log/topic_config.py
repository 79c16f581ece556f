"""The configuration the log cleaner reads for a topic, and where each value comes from: the
topic's own setting or the cluster-wide default held by the cluster's metadata log
(``__cluster_metadata``: ConfigRecords, replayed from its newest snapshot on, as a KRaft broker
replays them), else Kafka's default; a value given by the caller (an option) wins.

Names as Kafka's LogConfig and CleanerConfig spell them; the topic setting first, then the
broker (cluster default) setting that stands for it."""

from __future__ import annotations

import os
from typing import Dict, Iterator, List, Optional, Tuple

from . import names
from .partition import Partition
from .report import Report, field, report
from .segment import LogFile

METADATA_PARTITION = "__cluster_metadata-0"
TOPIC_RESOURCE = 2   # ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER ("" names the cluster-wide default)

DEFAULT = "default"
TOPIC_CONFIG = "topic config"
CLUSTER_DEFAULT = "cluster default"
GIVEN = "given"

LONG_MAX = (1 << 63) - 1

# topic setting: (broker setting, Kafka's default)
SETTINGS: Dict[str, Tuple[str, object]] = {
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", 86_400_000),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", 0),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", LONG_MAX),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", 0.5),
    "segment.bytes": ("log.segment.bytes", 1_073_741_824),
    "max.message.bytes": ("message.max.bytes", 1_048_588),
    "segment.index.bytes": ("log.index.size.max.bytes", 10_485_760),
    "index.interval.bytes": ("log.index.interval.bytes", 4096),
}
# the cleaner's own settings (broker only): (Kafka's default)
CLEANER_SETTINGS: Dict[str, object] = {
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.io.buffer.size": 524_288,
    "log.cleaner.threads": 1,
}


@report
class TopicConfig(Report):
    """The settings (``values``, by Kafka's names, typed) and where each comes from
    (``sources``: "topic config", "cluster default", "default" or "given")."""

    topic: Optional[str]
    values: Dict[str, object] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> object:
        return self.values[name]

    def integer(self, name: str) -> int:
        value = self.values[name]
        return value if isinstance(value, int) else int(str(value))

    def number(self, name: str) -> float:
        value = self.values[name]
        return float(value) if isinstance(value, (int, float)) else float(str(value))

    @property
    def compacted(self) -> bool:
        return "compact" in [p.strip() for p in str(self.values["cleanup.policy"]).split(",")]


def _typed(name: str, text: str) -> object:
    default = SETTINGS[name][1] if name in SETTINGS else CLEANER_SETTINGS[name]
    if isinstance(default, str):
        return text.strip().lower()
    if isinstance(default, float):
        return float(text)
    return int(text)


class ClusterConfigs:
    """The ConfigRecords of a cluster's metadata log: each topic's settings and the
    cluster-wide broker defaults, as they stand at the log's end."""

    def __init__(self) -> None:
        self.topics: Dict[str, Dict[str, str]] = {}
        self.cluster: Dict[str, str] = {}
        self.source: Optional[str] = None  # the metadata partition read, None when none

    def apply(self, value: Dict[str, object]) -> None:
        kind, name = value.get("resourceType"), value.get("resourceName")
        key, setting = value.get("name"), value.get("value")
        if not isinstance(key, str) or not isinstance(name, str):
            return
        if kind == TOPIC_RESOURCE:
            target = self.topics.setdefault(name, {})
        elif kind == BROKER_RESOURCE and name == "":
            target = self.cluster
        else:
            return
        if setting is None:
            target.pop(key, None)  # a deleted setting: back to the default
        elif isinstance(setting, str):
            target[key] = setting

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)


def _metadata_values(path: str) -> Iterator[Tuple[int, str, Dict[str, object]]]:
    """(offset, record type, value) of the metadata records in the metadata partition
    ``path``: its newest KRaft snapshot's, then its log's from the snapshot's end offset on."""
    from ..format.metadata_record import decode_metadata_record
    from .read import BatchRead, SegmentReader, read_records
    snapshots = sorted((sid, n) for n in os.listdir(path)
                       for sid in [names.kraft_snapshot_id(n)] if sid is not None)
    start = 0
    if snapshots:
        (end, _), name = snapshots[-1]
        with LogFile(os.path.join(path, name)) as log:
            for event in SegmentReader(log, 0, records=True, skip_control=True):
                if isinstance(event, BatchRead) and event.records is not None:
                    for offset, value in zip(event.records.offsets, event.records.values):
                        if value is not None:
                            kind, _, decoded = decode_metadata_record(value)
                            yield offset, kind, decoded
        start = end
    for record in read_records(Partition(path).segments(), from_offset=start):
        if record.value is not None:
            kind, _, decoded = decode_metadata_record(record.value)
            yield record.offset, kind, decoded


def cluster_configs(log_dir: str) -> ClusterConfigs:
    """The configs held by ``log_dir``'s metadata partition (``__cluster_metadata-0``, where a
    KRaft broker keeps it by default: the first of its log.dirs); none when it holds none.
    Raises InvalidDataError (or CorruptRecordError) for a metadata log that cannot be read."""
    configs = ClusterConfigs()
    path = os.path.join(log_dir, METADATA_PARTITION)
    if not os.path.isdir(path):
        return configs
    configs.source = path
    topic_names: Dict[str, str] = {}  # topic id -> name, for RemoveTopicRecord
    for _, kind, value in _metadata_values(path):
        if kind == "CONFIG_RECORD":
            configs.apply(value)
        elif kind == "TOPIC_RECORD":
            topic_names[str(value.get("topicId"))] = str(value.get("name"))
        elif kind == "REMOVE_TOPIC_RECORD":
            name = topic_names.pop(str(value.get("topicId")), None)
            if name is not None:
                configs.remove_topic(name)
    return configs


def topic_config(topic: Optional[str], configs: Optional[ClusterConfigs] = None,
                 given: Optional[Dict[str, object]] = None) -> TopicConfig:
    """The settings of ``topic``: ``given`` (by Kafka's names) first, then its topic config
    and the cluster default in ``configs``, then Kafka's defaults."""
    out = TopicConfig(topic)
    given = given or {}
    topic_settings = configs.topics.get(topic or "", {}) if configs else {}
    cluster = configs.cluster if configs else {}
    wanted: List[Tuple[str, Optional[str], object]] = [
        (name, broker, default) for name, (broker, default) in SETTINGS.items()]
    wanted += [(name, name, default) for name, default in CLEANER_SETTINGS.items()]
    for name, broker, default in wanted:
        try:
            if given.get(name) is not None:
                out.values[name], out.sources[name] = given[name], GIVEN
                continue
            if name in topic_settings and name in SETTINGS:
                out.values[name], out.sources[name] = _typed(name, topic_settings[name]), \
                    TOPIC_CONFIG
                continue
            if broker in cluster:
                out.values[name], out.sources[name] = _typed(name, cluster[broker]), \
                    CLUSTER_DEFAULT
                continue
        except ValueError:
            pass  # a value Kafka would have refused: its default stands
        out.values[name], out.sources[name] = default, DEFAULT
    # LogConfig.segmentSize: the internal (test-only) internal.segment.bytes, when a topic has
    # it, stands in for segment.bytes
    internal = topic_settings.get("internal.segment.bytes")
    if internal is not None and given.get("segment.bytes") is None:
        try:
            out.values["segment.bytes"], out.sources["segment.bytes"] = int(internal), \
                TOPIC_CONFIG
        except ValueError:
            pass
    return out


__all__ = ["TopicConfig", "ClusterConfigs", "cluster_configs", "topic_config"]
