"""The Spark pipeline on a real local Spark session: the `kafkalog` data source against
kafka-python's parse of the same files, segment splitting, includeInvalid, the record bounds and
topics options (fromTimestamp as `kafkalog dump --from-timestamp` has it: offsets-for-times),
`kafkalog export` and `kafkalog scan`, the workers' interpreter, and the message when pyspark is
missing.

One Spark session serves the whole module (start-up is slow) and the number of Spark jobs is
kept small: each DataFrame is collected once by a module-scoped fixture and the tests compare
what it returned. Expected rows always come from kafka-python (tests/kafkagen.py), never from
kafkalog_cli's own decoder. Only one command starts a Spark of its own (`kafkalog export` as a
real process); the other CLI runs go through click's CliRunner in this process, where the
command's ``getOrCreate`` returns the module session's context (its ``stop`` and the session's are
disabled meanwhile).
"""

import base64
import csv
import datetime
import functools
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow.parquet as pq  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import indexgen as ig  # noqa: E402
import jsonschema  # noqa: E402
from kafkalog_cli.schema import load as load_output_schema  # noqa: E402
import kafkagen as kg  # noqa: E402
from dumpcheck import REPO  # noqa: E402
from sparkrows import (arrow_rows, by_segment, kafka_python_batches,  # noqa: E402
                       kafka_python_dir_rows, kafka_python_rows, logs_under, order,
                       part_files, topic_partition)

FIXTURES = os.path.join(REPO, "fixtures", "logdir")
T0 = 1704067200000  # the fixtures' first timestamp (fixtures/make_fixtures.py)

COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
           "segment", "batchPosition", "magic", "codec", "producerId", "isTransactional",
           "isControl", "isValid"]
# export --output-format csv: dump's record names (README, "JSON output")
CSV_COLUMNS = ["topic", "partition", "file", "offset", "position", "timestamp", "timestampType",
               "key", "keyEncoding", "value", "valueEncoding", "headers", "magic",
               "compresscodec", "producerId", "isTransactional", "isControl", "isValid"]
SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
          "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>,"
          "segment:string,batchPosition:bigint,magic:int,codec:string,producerId:bigint,"
          "isTransactional:boolean,isControl:boolean,isValid:boolean>")

# The segment corrupted in the copy of the fixtures: its second batch (snappy, producer 2001)
# gets a flipped bit, then a garbage tail follows the last batch.
BROKEN_PARTITION = "orders-1"
BROKEN_SEGMENT = "00000000000000000000.log"
GARBAGE = 37

BIG_MAX_BYTES = 128 * 1024  # maxBytesPerPartition of the split reads (segments of ~2 MB)
KG_T0 = kg.T0  # the big partition's first timestamp (a batch a second from there)


# -- Spark helpers ----------------------------------------------------------------------------------

def read(spark, path, **options):
    return spark.read.format("kafkalog").options(**{k: str(v) for k, v in options.items()}).load(
        str(path))


def _b(x):
    return None if x is None else bytes(x)


def row_dict(row):
    d = row.asDict()
    d["key"], d["value"] = _b(d["key"]), _b(d["value"])
    d["headers"] = [(h["key"], _b(h["value"])) for h in d["headers"]]
    return d


def collect(df):
    """Rows as dicts in the order Spark returns them; timestamp as epoch milliseconds."""
    return [row_dict(r) for r in df.withColumn("timestamp", F.unix_millis("timestamp")).collect()]


def strip(rows, *names):
    return [{k: v for k, v in r.items() if k not in names} for r in rows]


def run_cli(spark, *args):
    """`kafkalog ARGS` in this process: the command's Spark is the module's (its context, by
    getOrCreate), which it must not stop."""
    from kafkalog_cli.cli.main import cli
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spark, "stop", lambda: None)
        mp.setattr(spark.sparkContext, "stop", lambda: None)
        res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError("kafkalog %s raised %r" % (args[0], res.exception)) from res.exception
    return res


# -- module fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    from kafkalog_cli.spark import start
    session = start.session("local[2]", [("spark.ui.enabled", "false")])
    yield session
    session.stop()


@pytest.fixture(scope="module")
def full_rows(spark):
    """The fixtures with control records (job 1)."""
    return collect(read(spark, FIXTURES, includeControl="true"))


@pytest.fixture(scope="module")
def default_rows(spark):
    """The fixtures with the default options (job 2)."""
    return collect(read(spark, FIXTURES))


@pytest.fixture(scope="module")
def big_partition(tmp_path_factory):
    """A partition of three segments with broker-style indexes: ~2.1 MB, ~1.5 MB (timestamps
    going back every 4th batch, an aborted transaction) and a small zstd one."""
    d = tmp_path_factory.mktemp("big") / "big-3"
    a, n1 = ig.busy_segment(0, n_batches=2000)
    b, n2 = ig.busy_segment(n1, n_batches=1500, t0=KG_T0 + 2000 * 1000, backwards_every=4,
                            txn_at=7, seed=1)
    c, _ = ig.busy_segment(n2, n_batches=300, t0=KG_T0 + 3500 * 1000, codec="zstd", seed=2)
    segs = ig.write_partition(d, [(0, a), (n1, b), (n2, c)])
    assert len(a) > 10 * BIG_MAX_BYTES and len(b) > 10 * BIG_MAX_BYTES
    assert all(s.indexes.offset_entries for s in segs)
    return d


@pytest.fixture(scope="module")
def big_reads(spark, big_partition):
    """(default read, split read) of the big partition: (number of input partitions, rows)
    each; the split rows carry the id of the Spark partition that produced them (jobs 3, 4)."""
    default = read(spark, big_partition)
    split = read(spark, big_partition, maxBytesPerPartition=BIG_MAX_BYTES)
    return ((default.rdd.getNumPartitions(), collect(default)),
            (split.rdd.getNumPartitions(),
             collect(split.withColumn("sparkPartition", F.spark_partition_id()))))


@pytest.fixture(scope="module")
def corrupt_copy(tmp_path_factory):
    """A copy of the fixtures whose orders-1 segment has a flipped bit in its second batch and
    a garbage tail. Returns (root, original segment bytes, corrupted bytes)."""
    root = tmp_path_factory.mktemp("corrupt") / "logdir"
    shutil.copytree(FIXTURES, root)
    path = root / BROKEN_PARTITION / BROKEN_SEGMENT
    data = path.read_bytes()
    kbs = kg.kafka_python_read(data, deep=False)
    mid = kbs[1]
    bad = kg.flip_bit(data, mid.position + mid.size - 5, 3)  # inside its compressed records
    bad = kg.garbage_tail(bad, GARBAGE)
    path.write_bytes(bad)
    # what kafka-python makes of it: the second batch fails its CRC, the tail is not an entry
    got = kg.kafka_python_read(bad, deep=False)
    assert [kb.crc_ok for kb in got] == [i != 1 for i in range(len(kbs))]
    assert sum(kb.size for kb in got) == len(data)
    return root, data, bad


@pytest.fixture(scope="module")
def invalid_reads(spark, corrupt_copy):
    """The corrupted partition read with and without includeInvalid (jobs 5, 6)."""
    part = corrupt_copy[0] / BROKEN_PARTITION
    return collect(read(spark, part, includeInvalid="true")), collect(read(spark, part))


# -- 1. rows against kafka-python -------------------------------------------------------------------

def test_schema(spark):
    df = read(spark, FIXTURES)
    assert df.columns == COLUMNS
    assert df.schema.simpleString() == SCHEMA


def test_default_rows_equal_kafka_python(default_rows):
    expected = kafka_python_dir_rows(FIXTURES)
    assert len(default_rows) == len(expected) > 700
    # every segment's rows in file order, field by field
    got, want = by_segment(default_rows), by_segment(expected)
    assert sorted(got) == sorted(want)
    for seg in want:
        assert got[seg] == want[seg], seg
    assert not any(r["isControl"] for r in default_rows)


def test_fixtures_cover_the_format_matrix(default_rows):
    """The comparison above met every codec of every format, headers with null values, null
    keys and values, LogAppendTime and timestamp-less v0 records."""
    combos = {(r["magic"], r["codec"]) for r in default_rows}
    assert {(0, c) for c in kg.LEGACY_CODECS} <= combos
    assert {(1, c) for c in kg.LEGACY_CODECS} <= combos
    assert {(2, c) for c in kg.V2_CODECS} <= combos
    assert any(v is None for r in default_rows for _, v in r["headers"])
    assert any(r["key"] is None for r in default_rows)
    assert any(r["value"] is None for r in default_rows)
    assert {(r["magic"], r["timestampType"]) for r in default_rows} >= {(0, -1), (1, 0), (1, 1),
                                                                          (2, 0), (2, 1)}
    assert all((r["timestamp"] is None) == (r["magic"] == 0) for r in default_rows)
    assert any(r["isTransactional"] for r in default_rows)
    assert {r["producerId"] for r in default_rows} >= {-1, 1000, 2000, 2001}


def test_include_control_rows_equal_kafka_python(full_rows, default_rows):
    expected = kafka_python_dir_rows(FIXTURES, include_control=True)
    got, want = by_segment(full_rows), by_segment(expected)
    assert sorted(got) == sorted(want)
    for seg in want:
        assert got[seg] == want[seg], seg
    control = [(r["topic"], r["partition"], r["offset"]) for r in full_rows if r["isControl"]]
    assert control == [("orders", 0, 41), ("orders", 1, 15)]  # a COMMIT and an ABORT marker
    assert [r for r in full_rows if not r["isControl"]] == default_rows


# -- 2. segment splitting ---------------------------------------------------------------------------

def test_split_segments_give_the_same_rows(big_partition, big_reads):
    (n_default, default), (n_split, split) = big_reads
    segments = len(logs_under(big_partition.parent))
    assert segments == 3
    assert n_default == segments  # one task per segment
    assert n_split > segments + 10
    # more than one Spark partition produced rows of each large segment
    tasks = {}
    for r in split:
        tasks.setdefault(r["segment"], set()).add(r["sparkPartition"])
    assert sorted(len(t) for t in tasks.values())[-2] >= 10  # both large segments
    split = strip(split, "sparkPartition")
    by_offset = functools.partial(sorted, key=lambda r: r["offset"])
    assert by_offset(split) == by_offset(default)
    # and both are what kafka-python reads
    expected = kafka_python_dir_rows(big_partition.parent)
    assert by_offset(default) == by_offset(expected)
    assert len(expected) > 10000


@pytest.fixture(scope="module")
def thirty_mb_partition(tmp_path_factory):
    """One partition of one ~33 MB segment (3000 batches of ten 1 KB records) with its index."""
    d = tmp_path_factory.mktemp("thirty") / "thirty-0"
    data, _ = ig.busy_segment(0, n_batches=3000, records_per_batch=10, value_size=1000)
    ig.write_partition(d, [(0, data)])
    assert 30e6 < len(data) < 40e6
    return d


def test_export_splits_a_segment_for_every_core(spark, thirty_mb_partition, tmp_path):
    """A 33 MB segment on 2 cores (the module's local[2]) is two tasks of about the same size
    (it was one: the split size was a fixed 128 MiB), their rows kafka-python's; the split
    size given with maxBytesPerPartition still wins."""
    assert spark.sparkContext.defaultParallelism == 2
    expected = order(kafka_python_dir_rows(str(thirty_mb_partition.parent)))
    out = tmp_path / "split"
    res = run_cli(spark, "export", thirty_mb_partition, "--output", out, "--master", "local[2]")
    assert res.exit_code == 0, res.output
    files = part_files(out, ".parquet")
    assert len(files) == 2
    counts = [pq.read_metadata(f).num_rows for f in files]
    assert max(counts) - min(counts) < 0.05 * sum(counts), counts
    assert order(arrow_rows(pq.read_table(files))) == expected
    out = tmp_path / "given"
    res = run_cli(spark, "export", thirty_mb_partition, "--output", out, "--master", "local[2]",
                  "--option", "maxBytesPerPartition=%d" % (128 << 20))
    assert res.exit_code == 0, res.output
    assert len(part_files(out, ".parquet")) == 1


# -- 3. includeInvalid ------------------------------------------------------------------------------

def test_include_invalid(corrupt_copy, invalid_reads):
    root, data, bad = corrupt_copy
    with_invalid, without = invalid_reads
    broken = kg.kafka_python_read(bad, deep=False)[1]
    valid = kafka_python_rows(str(root / BROKEN_PARTITION / BROKEN_SEGMENT))
    assert valid and without == valid

    invalid = [r for r in with_invalid if not r["isValid"]]
    assert [r for r in with_invalid if r["isValid"]] == valid
    # one row for the batch that fails its CRC, one for the garbage after the last batch
    assert [(r["batchPosition"], r["offset"]) for r in invalid] == [
        (broken.position, broken.batch.base_offset), (len(data), None)]
    for r in invalid:
        assert (r["topic"], r["partition"], r["segment"]) == ("orders", 1, BROKEN_SEGMENT)
        assert r["key"] is None and r["value"] is None and r["timestamp"] is None
        assert r["headers"] == []
    assert (invalid[0]["magic"], invalid[0]["codec"], invalid[0]["producerId"]) == (
        2, "snappy", broken.batch.producer_id)
    # rows in file order: the invalid batch between the records of its neighbours
    positions = [r["batchPosition"] for r in with_invalid]
    assert positions == sorted(positions)


# -- 4. bounds and topics options -------------------------------------------------------------------

XFAIL_CASES = {}  # case -> reason of a known bug (strict xfail); none open


def _fixture_case(options, keep, path=FIXTURES):
    return path, options, keep


def _ts_at_most(t):
    return lambda r: r["timestamp"] is not None and r["timestamp"] <= t


class OffsetsForTimes:
    """The expectation of a case with fromTimestamp ``t``: in each partition, the rows from the
    first record, in offset order (at or after ``from_offset``), whose timestamp is at least
    ``t`` (a consumer's offsets-for-times lookup; kafka-python's records of the partition,
    control records included, as the broker looks at every record), then cut by ``keep`` (the
    other bounds). Later records are kept even where their timestamps go back."""

    def __init__(self, t, keep=lambda r: True, from_offset=None):
        self.t = t
        self.keep = keep
        self.from_offset = from_offset

    def starts(self, records):
        """{(topic, partition): first offset} from kafka-python's rows of every partition."""
        out = {}
        for r in sorted(records, key=lambda r: r["offset"]):
            tp = (r["topic"], r["partition"])
            if (tp not in out and r["timestamp"] is not None and r["timestamp"] >= self.t
                    and (self.from_offset is None or r["offset"] >= self.from_offset)):
                out[tp] = r["offset"]
        return out

    def expected(self, rows, records):
        starts = self.starts(records)
        return [r for r in rows if (r["topic"], r["partition"]) in starts
                and r["offset"] >= starts[(r["topic"], r["partition"])] and self.keep(r)]


@functools.lru_cache(maxsize=None)
def _kafka_python_records(root):
    return kafka_python_dir_rows(root, include_control=True)


# name: (path (None: the big partition), options, filter on the full rows)
CASES = {
    # toOffset 30 falls inside legacy-0's v1 snappy wrapper of offsets 28..31
    "offsets": _fixture_case({"fromOffset": 5, "toOffset": 30},
                             lambda r: 5 <= r["offset"] <= 30),
    # toOffset 27 is the last offset of a wrapper
    "offsets-at-batch-ends": _fixture_case({"fromOffset": 5, "toOffset": 27},
                                           lambda r: 5 <= r["offset"] <= 27),
    "fromOffset-in-second-segment": _fixture_case({"fromOffset": 330},
                                                  lambda r: r["offset"] >= 330),
    "fromTimestamp": _fixture_case({"fromTimestamp": T0 + 150 * 60000},
                                   OffsetsForTimes(T0 + 150 * 60000)),
    "fromTimestamp-past-the-end": _fixture_case({"fromTimestamp": T0 + 10 ** 12},
                                                OffsetsForTimes(T0 + 10 ** 12)),
    "toTimestamp": _fixture_case({"toTimestamp": T0 + 20000}, _ts_at_most(T0 + 20000)),
    "toTimestamp-no-v0": _fixture_case(
        {"toTimestamp": T0 + 20000, "topics": "orders,events,metrics"},
        lambda r: r["topic"] != "legacy" and _ts_at_most(T0 + 20000)(r)),
    "all-bounds": _fixture_case(
        {"fromOffset": 3, "toOffset": 400, "fromTimestamp": T0 + 5000,
         "toTimestamp": T0 + 300 * 60000},
        OffsetsForTimes(T0 + 5000, lambda r: r["offset"] <= 400 and _ts_at_most(T0 + 18000000)(r),
                        from_offset=3)),
    "topics": _fixture_case({"topics": "orders,legacy"},
                            lambda r: r["topic"] in ("orders", "legacy")),
    "unknown-topic": _fixture_case({"topics": "nosuch"}, lambda r: False),
    "past-the-end": _fixture_case({"fromOffset": 10 ** 6}, lambda r: False),
    "control-in-bounds": _fixture_case({"includeControl": "true", "fromOffset": 40,
                                        "toOffset": 41}, lambda r: 40 <= r["offset"] <= 41),
    "partition-dir": _fixture_case({}, lambda r: r["topic"] == "events",
                                   os.path.join(FIXTURES, "events-0")),
    "segment-file": _fixture_case(
        {}, lambda r: (r["topic"], r["segment"]) == ("orders", "00000000000000000042.log"),
        os.path.join(FIXTURES, "orders-0", "00000000000000000042.log")),
    "split-offsets": (None, {"maxBytesPerPartition": BIG_MAX_BYTES, "fromOffset": 3333,
                             "toOffset": 8000}, lambda r: 3333 <= r["offset"] <= 8000),
    # from the end of the first segment (the middle record of its last batch: the one after it
    # goes back in time) into the second, whose timestamps go back now and then
    "split-timestamps": (None, {"maxBytesPerPartition": BIG_MAX_BYTES,
                                "fromTimestamp": KG_T0 + 1999005,
                                "toTimestamp": KG_T0 + 2600 * 1000},
                         OffsetsForTimes(KG_T0 + 1999005, _ts_at_most(KG_T0 + 2600000))),
    # in the second segment: the start's batch ends with an earlier record, batch 7 (aborted
    # transaction and marker) goes back below the start's timestamp
    "split-timestamps-back": (None, {"maxBytesPerPartition": BIG_MAX_BYTES,
                                     "includeControl": "true", "fromTimestamp": KG_T0 + 2005005,
                                     "toTimestamp": KG_T0 + 2300 * 1000},
                              OffsetsForTimes(KG_T0 + 2005005, _ts_at_most(KG_T0 + 2300000))),
    # fromOffset 6021 lies after the record offsets-for-times finds (6016), in records older
    # than fromTimestamp: the rows start at the first record from 6021 on that is not, as dump's
    # do
    "split-both-from-bounds": (None, {"maxBytesPerPartition": BIG_MAX_BYTES,
                                      "includeControl": "true", "fromOffset": 6021,
                                      "fromTimestamp": KG_T0 + 2005005, "toOffset": 6500},
                               OffsetsForTimes(KG_T0 + 2005005, lambda r: r["offset"] <= 6500,
                                               from_offset=6021)),
}


@pytest.fixture(scope="module")
def option_rows(spark, big_partition):
    """Every case read in one job (a union of the reads, each row tagged with its case)."""
    dfs = [read(spark, big_partition if path is None else path, **options)
           .withColumn("case", F.lit(name)) for name, (path, options, _) in CASES.items()]
    rows = collect(functools.reduce(DataFrame.unionByName, dfs))
    out = {name: [] for name in CASES}
    for r in rows:
        out[r.pop("case")].append(r)
    return out


@pytest.mark.parametrize("case", [
    pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=XFAIL_CASES[name])]
                 if name in XFAIL_CASES else []) for name in CASES])
def test_options_equal_a_filter(case, option_rows, full_rows, big_reads, big_partition):
    path, options, keep = CASES[case]
    control = str(options.get("includeControl")) == "true"
    if path is None:
        base = big_reads[0][1]
        if control:  # the big partition's one control record, from kafka-python
            base = base + [r for r in _kafka_python_records(str(big_partition.parent))
                     if r["isControl"]]
    else:
        base = [r for r in full_rows if control or not r["isControl"]]
    if isinstance(keep, OffsetsForTimes):
        root = str(big_partition.parent) if path is None else FIXTURES
        expected = keep.expected(base, _kafka_python_records(root))
    else:
        expected = [r for r in base if keep(r)]
    got = option_rows[case]
    ids = [(r["topic"], r["partition"], r["offset"]) for r in got]
    want = [(r["topic"], r["partition"], r["offset"]) for r in expected]
    missing = sorted(set(want) - set(ids))
    extra = sorted(set(ids) - set(want))
    assert not missing and not extra, "missing %s, extra %s" % (missing[:10], extra[:10])
    assert order(got) == order(expected)
    if case not in ("unknown-topic", "past-the-end", "fromTimestamp-past-the-end"):
        assert got, "the case selects something"


def test_from_timestamp_is_not_a_filter(option_rows):
    """fromTimestamp starts each partition at a record and keeps what follows: records after
    the start whose timestamps go back below it are rows (a filter on the timestamp would drop
    them), none before the start is."""
    for case in ("split-timestamps", "split-timestamps-back"):
        t = CASES[case][1]["fromTimestamp"]
        got = sorted(option_rows[case], key=lambda r: r["offset"])
        assert got[0]["timestamp"] >= t, case
        older = [r["offset"] for r in got if r["timestamp"] < t]
        assert older, case
    older = [r["offset"] for r in option_rows["split-timestamps-back"]
             if r["timestamp"] < KG_T0 + 2005005]
    assert {6017, 6021, 6022, 6023, 6024} <= set(older)  # the marker (6024) with them


DUMP_OPTIONS = {"fromOffset": "--from-offset", "toOffset": "--to-offset",
                "fromTimestamp": "--from-timestamp", "toTimestamp": "--to-timestamp"}


def dump_offsets(path, options):
    """{(topic, partition): [offsets]} of the records `kafkalog dump` gives with the same bounds
    (control records only with includeControl)."""
    args = [a for k, v in options.items() if k in DUMP_OPTIONS for a in (DUMP_OPTIONS[k], str(v))]
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", str(path), "--format",
                        "json", "--deep-iteration", *args], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    control = str(options.get("includeControl")) == "true"
    out = {}
    in_control = False
    for line in p.stdout.splitlines():
        obj = json.loads(line)
        if obj["type"] == "batch":
            in_control = obj["isControl"]
        elif obj["type"] == "record" and (control or not in_control):
            tp = topic_partition(os.path.dirname(obj["file"]))
            out.setdefault(tp, []).append(obj["offset"])
    return out


@pytest.mark.parametrize("case", ["fromTimestamp", "all-bounds", "split-timestamps",
                                  "split-timestamps-back", "split-both-from-bounds"])
def test_bounds_as_dump(case, option_rows, big_partition):
    """`kafkalog dump` with the same bounds gives the same records, partition by partition:
    one meaning per option name."""
    path, options, _ = CASES[case]
    got = {}
    for r in sorted(option_rows[case], key=lambda r: r["offset"]):
        got.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    assert got == dump_offsets(big_partition if path is None else path, options)


# -- 5. export --------------------------------------------------------------------------------------

def test_export_parquet_partitioned_process(tmp_path, default_rows):
    """`python -m kafkalog_cli export` with its own local Spark, partitioned by topic and
    partition: topic=/partition= folders whose Parquet files hold the DataFrame's rows."""
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, "-m", "kafkalog_cli", "export", FIXTURES, "--output", str(out),
         "--output-format", "parquet", "--partition-by", "topic,partition",
         "--master", "local[2]", "--spark-conf", "spark.ui.enabled=false"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "exported" in p.stdout
    assert (out / "_SUCCESS").exists()
    leaves = sorted({os.path.relpath(os.path.dirname(f), out) for f in part_files(out, ".parquet")})
    want = sorted({"topic=%s/partition=%d" % (r["topic"], r["partition"]) for r in default_rows})
    assert leaves == want
    got = []
    for leaf in leaves:
        topic, partition = (x.split("=", 1)[1] for x in leaf.split("/"))
        got += arrow_rows(pq.read_table(str(out / leaf)), topic=topic, partition=int(partition))
    assert order(got) == order(default_rows)


def test_export_parquet(spark, tmp_path, default_rows):
    out = tmp_path / "plain"
    res = run_cli(spark, "export", FIXTURES, "--output", out, "--master", "local[2]")
    assert res.exit_code == 0, res.output
    table = pq.read_table(part_files(out, ".parquet"))
    assert table.column_names == COLUMNS
    assert order(arrow_rows(table)) == order(default_rows)


# A Python worker's tasks, run here in a process of their own: every export writer over every
# slice of the corrupted copy (invalid rows, control records, headers, partitioned output), then
# the compacted reading; prints the modules of pandas the process then holds.
TASKS_WITHOUT_PANDAS = r"""
import json, os, sys
from kafkalog_cli.spark import jobs, source
root, out = sys.argv[1:3]
rows = 0
for compacted in ("false", "true"):
    options = source.Options({"includeInvalid": "true", "includeControl": "true",
                              "compacted": compacted, "maxBytesPerPartition": "4096"})
    for n, piece in enumerate(source.slices(root, options)):
        where = os.path.join(out, compacted, "%d" % n)
        rows += jobs.write_parquet_slice((n, piece), where + "pq", ["topic"], options, "t").rows
        rows += jobs.write_text_slice((n, piece), where + "json", "json", [], options, "t").rows
        rows += jobs.write_text_slice((n, piece), where + "csv", "csv", ["partition"], options,
                                      "t").rows
print(json.dumps([rows, sorted(m for m in sys.modules if m.split(".")[0] == "pandas")]))
"""


def test_tasks_import_no_pandas(corrupt_copy, tmp_path):
    """The export's tasks never import pandas (0.2 s of every Python worker's start): pyarrow
    imports it whenever pa.array() or a compute function is given a Python object, so the
    tasks build their Arrow arrays from buffers (source.arrow_array)."""
    p = subprocess.run([sys.executable, "-c", TASKS_WITHOUT_PANDAS, str(corrupt_copy[0]),
                        str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    rows, pandas = json.loads(p.stdout)
    assert rows > 1000
    assert pandas == []


@pytest.mark.parametrize("arrow_type", ["string", "bool_", "int32", "int64"])
def test_arrow_array_equals_pyarrow_s_own(arrow_type):
    """source.arrow_array, from buffers, against pyarrow's own pa.array on the same values:
    nulls anywhere, empty, the extremes of each type, an array.array given as it is."""
    import array
    import random

    import pyarrow as pa

    from kafkalog_cli.spark.source import arrow_array
    rnd = random.Random(7)
    typ = getattr(pa, arrow_type)()
    bits = {"int32": 32, "int64": 64}.get(arrow_type)

    def value():
        if arrow_type == "string":
            return "".join(rnd.choice(["a", "é", "\u20ac", "\U0001f600", ""])
                           for _ in range(rnd.randrange(6)))
        if arrow_type == "bool_":
            return rnd.random() < 0.5
        return rnd.choice([0, -1, 2 ** (bits - 1) - 1, -2 ** (bits - 1),
                           rnd.randrange(-2 ** (bits - 1), 2 ** (bits - 1))])

    cases = [[], [None], [None, None]]
    for n in (1, 2, 7, 8, 9, 64, 1000):
        values = [value() for _ in range(n)]
        cases.append(values)
        cases.append([None if rnd.random() < 0.3 else v for v in values])
    if bits:
        cases.append(array.array("i" if bits == 32 else "q", [value() for _ in range(100)]))
    for values in cases:
        got = arrow_array(values, typ)
        got.validate(full=True)
        assert got.type == typ
        assert got.equals(pa.array(list(values), typ)), values


def _unb64(s):
    return None if s is None else base64.b64decode(s)


def test_export_json(spark, tmp_path, full_rows):
    """JSON Lines with --option includeControl=true: one object per record, control included."""
    out = tmp_path / "json"
    res = run_cli(spark, "export", FIXTURES, "--output", out, "--output-format",
                  "json", "--option", "includeControl=true", "--master", "local[2]")
    assert res.exit_code == 0, res.output
    objs = [json.loads(line) for f in part_files(out, ".json") for line in open(f, encoding="utf-8")]
    assert len(objs) == len(full_rows)
    # dump's vocabulary (README, "JSON output"): bytes as text or {"base64": ...}, epoch ms,
    # timestampType names, headers as [key, value] pairs
    got = sorted((o["topic"], o["partition"], o["offset"], _vocab_bytes(o["key"]),
                  _vocab_bytes(o["value"]), o["isControl"], o["timestamp"], o["timestampType"],
                  [(k, _vocab_bytes(v)) for k, v in o["headers"]]) for o in objs)
    want = sorted((r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["isControl"],
                   _epoch_ms(r["timestamp"]), TIMESTAMP_TYPES[r["timestampType"]],
                   [tuple(h) for h in r["headers"]]) for r in full_rows)
    assert got == want
    validator = jsonschema.Draft202012Validator(load_output_schema())
    for o in objs:
        assert not list(validator.iter_errors(o)), o
    assert all(o["type"] == "record" for o in objs)
    text = [o for o in objs if isinstance(o["value"], str)]
    assert text and all(isinstance(o["key"], (str, type(None))) or "base64" in o["key"]
                        for o in objs)


TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime", None: "NoTimestampType"}


def _vocab_bytes(v):
    if v is None:
        return None
    if isinstance(v, dict):
        assert list(v) == ["base64"], v
        return base64.b64decode(v["base64"])
    return v.encode("utf-8")


def _epoch_ms(ts):
    if ts is None:
        return -1
    if isinstance(ts, int):
        return ts
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=datetime.timezone.utc)
    return (ts - epoch) // datetime.timedelta(milliseconds=1)


@pytest.fixture(scope="module")
def csv_export(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("csv") / "out"
    res = run_cli(spark, "export", FIXTURES, "--output", out, "--output-format", "csv",
                  "--master", "local[2]")
    return res, part_files(out, ".csv") if res.exit_code == 0 else []


def test_export_csv(csv_export, default_rows):
    """CSV: binary columns as base64, headers as JSON; one row per record (read with Spark's
    CSV conventions: quotes escaped by a backslash, fields may hold line breaks)."""
    res, files = csv_export
    assert res.exit_code == 0, res.output
    rows = []
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))  # RFC 4180: quotes doubled
    assert len(rows) == len(default_rows)
    assert list(rows[0]) == CSV_COLUMNS

    def cell(r, side):  # text, or base64 with its marker; an empty encoding is a null
        enc = r[side + "Encoding"]
        if enc == "":
            return None
        return base64.b64decode(r[side]) if enc == "base64" else r[side].encode("utf-8")

    def headers(s):
        return [(k, _vocab_bytes(v)) for k, v in json.loads(s)]

    got = sorted((r["topic"], int(r["partition"]), int(r["offset"]), cell(r, "key"),
                  cell(r, "value"), headers(r["headers"]), int(r["timestamp"]),
                  r["timestampType"]) for r in rows)
    want = sorted((r["topic"], r["partition"], r["offset"], r["key"], r["value"],
                   [tuple(h) for h in r["headers"]], _epoch_ms(r["timestamp"]),
                   TIMESTAMP_TYPES[r["timestampType"]]) for r in default_rows)
    assert got == want


CSV_CHUNKED_BASE64 = (
    "the CSV export breaks base64 keys/values into 76-character lines (CRLF inside the quoted "
    "field): jobs.export uses F.base64, which Spark 4 chunks by default "
    "(spark.sql.chunkBase64String.enabled=true), so a record spans several lines and "
    "spark.read.csv without multiLine reads 2 rows for one record (kafkalog_cli/spark/jobs.py "
    "export)")


def test_export_csv_one_line_per_record(csv_export, default_rows):
    res, files = csv_export
    assert res.exit_code == 0, res.output
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            lines += fh.read().count(b"\n") - 1  # the header line
    assert lines == len(default_rows)


# -- 6. scan ----------------------------------------------------------------------------------------

def kafka_python_partition_summary(partition_dir):
    recs = batches = 0
    codecs = set()
    offsets = []
    for log in sorted(glob.glob(os.path.join(str(partition_dir), "*.log"))):
        with open(log, "rb") as f:
            for kb, records in kafka_python_batches(f.read()):
                batches += 1
                codecs.add(kg.CODEC_NAMES[kb.batch.compression_type])
                if records is not None:
                    recs += len(records)
                    offsets += [r.offset for r in records]
    return {"records": recs, "batches": batches, "codecs": sorted(codecs),
            "firstOffset": min(offsets), "lastOffset": max(offsets),
            "segments": len(glob.glob(os.path.join(str(partition_dir), "*.log"))),
            "sizeBytes": sum(os.path.getsize(p) for p in glob.glob(os.path.join(str(partition_dir),
                                                                             "*.log")))}


def scan_objects(res):
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    validator = jsonschema.Draft202012Validator(load_output_schema())
    for o in objs:
        assert not list(validator.iter_errors(o)), o
    assert all(o["type"] == "partition" for o in objs[:-1])
    summary = objs[-1]
    assert (summary["type"], summary["command"], summary["partitions"]) == (
        "summary", "scan", len(objs) - 1)
    assert summary["records"] == sum(o["records"] for o in objs[:-1])
    return {"%s-%d" % (o["topic"], o["partition"]): o for o in objs[:-1]}


def test_scan_fixtures(spark):
    res = run_cli(spark, "scan", FIXTURES, "--format", "json", "--master", "local[2]")
    assert res.exit_code == 0, res.output
    objs = scan_objects(res)
    parts = sorted(os.path.basename(os.path.dirname(p)) for p in logs_under(FIXTURES))
    assert sorted(objs) == sorted(set(parts))
    for name, o in objs.items():
        want = kafka_python_partition_summary(os.path.join(FIXTURES, name))
        assert {k: o[k] for k in want} == want, name  # records include the control records
        assert (o["invalidBatches"], o["invalidBytes"], o["problems"]) == (0, 0, 0)


def test_scan_corrupted_copy(spark, corrupt_copy):
    root, data, bad = corrupt_copy
    res = run_cli(spark, "scan", root, "--format", "json", "--master", "local[2]")
    assert res.exit_code == 1, res.output
    objs = scan_objects(res)
    broken = objs[BROKEN_PARTITION]
    assert broken["invalidBatches"] == 1
    assert broken["invalidBytes"] > 0
    assert broken["records"] == kafka_python_partition_summary(root / BROKEN_PARTITION)["records"]
    assert all(o["invalidBatches"] == o["invalidBytes"] == 0
               for name, o in objs.items() if name != BROKEN_PARTITION)
    assert "kafkalog: orders-1: " in res.stderr


def _tasks_since(spark, before):
    """The task counts of the Spark jobs run since the job ids ``before``, in order."""
    tracker = spark.sparkContext.statusTracker()
    jobs = sorted(set(tracker.getJobIdsForGroup()) - set(before))
    return [sum(tracker.getStageInfo(s).numTasks for s in tracker.getJobInfo(j).stageIds)
            for j in jobs]


def _whole_segment_scan(partition):
    """The scan object of a partition of one segment read whole (log.summary.summarize_segment,
    which each scan task ran on a whole segment before scans were split)."""
    from kafkalog_cli.cli.spark_cmds import _scan_json
    from kafkalog_cli.log.summary import summarize_segment
    from kafkalog_cli.spark.jobs import partition_totals
    topic, number = topic_partition(str(partition))
    logs = sorted(glob.glob(os.path.join(str(partition), "*.log")))
    return _scan_json(partition_totals(topic, number, [summarize_segment(p) for p in logs]))


def test_scan_splits_a_segment_like_export(spark, thirty_mb_partition, tmp_path):
    """A 33 MB segment on 2 cores is two scan tasks, as it is two export tasks, and its totals
    those of the whole segment; so they are where the two slices do not join (a batch whose CRC
    fails, bytes that are no batch, offsets going back across the cut): a second job then reads
    the segment again whole, and the problems are said as before."""
    from kafkalog_cli.spark import source
    log = logs_under(thirty_mb_partition.parent)[0]
    data = open(log, "rb").read()
    size = len(data)
    cut = source._cuts(log, source.split_bytes([size], 2))[1:-1]
    assert len(cut) == 1
    batches = kg.kafka_python_read(data, deep=False)
    after = next(i for i, kb in enumerate(batches) if kb.position == cut[0])
    late = batches[(after + len(batches)) // 2]
    variants = {"clean": (data, [2]),
                "crc": (kg.flip_bit(data, late.position + late.size - 5, 3), [2, 1]),
                "garbage": (kg.garbage_tail(data, GARBAGE, seed=3), [2, 1])}
    goes_back = bytearray(data)
    header = bytearray(data[cut[0]:cut[0] + 61])
    kg.set_v2_header(header, base_offset=0)  # outside the CRC: valid, but out of place
    goes_back[cut[0]:cut[0] + 61] = header
    variants["goes back"] = (bytes(goes_back), [2, 1])
    for name, (content, tasks) in variants.items():
        part = tmp_path / name.replace(" ", "_") / "thirty-0"
        shutil.copytree(thirty_mb_partition, part)
        (part / os.path.basename(log)).write_bytes(content)
        before = spark.sparkContext.statusTracker().getJobIdsForGroup()
        res = run_cli(spark, "scan", part, "--format", "json", "--master", "local[2]")
        assert res.exit_code == (0 if name == "clean" else 1), (name, res.output)
        assert _tasks_since(spark, before) == tasks, name
        assert scan_objects(res) == {"thirty-0": _whole_segment_scan(part)}, name
        if name == "clean":
            want = kafka_python_partition_summary(part)
            assert {k: scan_objects(res)["thirty-0"][k] for k in want} == want


# -- 6b. export and invalid data ------------------------------------------------------------------

GARBAGE_TAIL = 1000  # bytes appended to a copy of a fixture segment


@pytest.fixture(scope="module")
def garbage_copy(tmp_path_factory):
    """A copy of the fixtures whose orders-1 segment has 1000 garbage bytes after its last
    batch. Returns (root, the segment's size before)."""
    root = tmp_path_factory.mktemp("garbage") / "logdir"
    shutil.copytree(FIXTURES, root)
    path = root / BROKEN_PARTITION / BROKEN_SEGMENT
    data = path.read_bytes()
    path.write_bytes(kg.garbage_tail(data, GARBAGE_TAIL, seed=7))
    return root, len(data)


def problem_lines(stderr):
    """The lines naming invalid data (kafkalog: <topic>-<n>: <segment>: ...)."""
    return [x for x in stderr.splitlines() if x.startswith("kafkalog: ") and
            not x.startswith("kafkalog: export: ")]


def export_parquet_rows(out):
    return order(arrow_rows(pq.read_table(part_files(out, ".parquet"))))


def test_export_reports_invalid_data_as_scan(spark, garbage_copy, tmp_path):
    """1000 garbage bytes after a segment's last batch: export says them as scan does (same
    lines on stderr: partition, segment, size and position), counts them, exits 1; the valid
    records are exported all the same (it wrote them and exited 0 without a word)."""
    root, size = garbage_copy
    scan = run_cli(spark, "scan", root, "--format", "json", "--master", "local[2]")
    assert scan.exit_code == 1
    want = problem_lines(scan.stderr)
    assert want == ["kafkalog: orders-1: %s: %d bytes at %d: %s" % (
        BROKEN_SEGMENT, GARBAGE_TAIL, size, want[0].rsplit(": ", 1)[1])], scan.stderr
    out = tmp_path / "out"
    res = run_cli(spark, "export", root, "--output", out, "--master", "local[2]")
    assert res.exit_code == 1, res.output
    assert problem_lines(res.stderr) == want
    assert res.stderr.splitlines()[-1].startswith(
        "kafkalog: export: 0 invalid batches and %d invalid bytes not exported" % GARBAGE_TAIL)
    assert export_parquet_rows(out) == order(kafka_python_dir_rows(str(root)))
    assert (out / "_SUCCESS").exists()


def test_export_reports_a_bad_batch_as_scan(spark, corrupt_copy, tmp_path):
    """A batch failing its CRC and a garbage tail, in JSON Lines: the same lines as scan's."""
    root = corrupt_copy[0]
    scan = run_cli(spark, "scan", root, "--master", "local[2]")
    res = run_cli(spark, "export", root, "--output", tmp_path / "out", "--output-format",
                  "json", "--master", "local[2]")
    assert (scan.exit_code, res.exit_code) == (1, 1), res.output
    assert len(problem_lines(scan.stderr)) == 2
    assert problem_lines(res.stderr) == problem_lines(scan.stderr)
    assert "1 invalid batches and %d invalid bytes" % GARBAGE in res.stderr.splitlines()[-1]


def test_export_skip_invalid_is_quiet(spark, garbage_copy, tmp_path):
    root, _ = garbage_copy
    out = tmp_path / "out"
    res = run_cli(spark, "export", root, "--output", out, "--master", "local[2]",
                  "--skip-invalid")
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert export_parquet_rows(out) == order(kafka_python_dir_rows(str(root)))


def test_export_include_invalid_writes_rows(spark, garbage_copy, tmp_path):
    root, size = garbage_copy
    out = tmp_path / "out"
    res = run_cli(spark, "export", root, "--output", out, "--master", "local[2]",
                  "--include-invalid")
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [
        "kafkalog: export: 0 invalid batches and %d invalid bytes written as rows with "
        "isValid=false" % GARBAGE_TAIL]
    rows = arrow_rows(pq.read_table(part_files(out, ".parquet")))
    assert [(r["topic"], r["partition"], r["segment"], r["batchPosition"], r["offset"])
            for r in rows if not r["isValid"]] == [("orders", 1, BROKEN_SEGMENT, size, None)]
    assert order([r for r in rows if r["isValid"]]) == order(kafka_python_dir_rows(str(root)))


def test_export_invalid_flags_exclude_each_other(spark, tmp_path):
    res = run_cli(spark, "export", FIXTURES, "--output", tmp_path / "out", "--include-invalid",
                  "--skip-invalid")
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.output
    assert not (tmp_path / "out").exists()


# -- 7. the workers' interpreter --------------------------------------------------------------------

def test_workers_run_this_interpreter(spark):
    got = spark.sparkContext.parallelize([0], 1).map(
        lambda _: (sys.executable, sys.prefix)).collect()
    assert got == [(sys.executable, sys.prefix)]


# -- 8. without pyspark -----------------------------------------------------------------------------

# pyspark made unimportable as if not installed: a None entry in sys.modules makes both
# importlib.util.find_spec("pyspark") return None and `import pyspark` fail.
NO_PYSPARK = ("import sys; sys.modules['pyspark'] = None; "
              "from kafkalog_cli.cli.main import main; main()")


@pytest.mark.parametrize("args", [["export", FIXTURES, "--output", "OUT"], ["scan", FIXTURES]],
                         ids=["export", "scan"])
def test_without_pyspark(tmp_path, args):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    p = subprocess.run([sys.executable, "-c", NO_PYSPARK, *args], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "pyspark" in lines[0] and "kafkalog[spark]" in lines[0]
    assert not (tmp_path / "out").exists()


# -- compacted=true ---------------------------------------------------------------------------------

def _as_compacted(rows):
    """The rows a fully compacted log would keep, from kafka-python's rows (control records
    included): the transactional records whose producer's next marker is an ABORT go, then of
    each key its last record unless a tombstone; keyless records go."""
    out = []
    by_partition = {}
    for r in rows:
        by_partition.setdefault((r["topic"], r["partition"]), []).append(r)
    for part in by_partition.values():
        part.sort(key=lambda r: r["offset"])
        pending, kept = {}, []
        for r in part:
            if r["isControl"]:
                marker = int.from_bytes(r["key"][2:4], "big")
                held = pending.pop(r["producerId"], [])
                if marker == 1:  # COMMIT
                    kept.extend(held)
            elif r["isTransactional"]:
                pending.setdefault(r["producerId"], []).append(r)
            else:
                kept.append(r)
        for held in pending.values():  # open transactions: not aborted
            kept.extend(held)
        last = {}
        for r in kept:
            if r["key"] is not None:
                last[r["key"]] = r
        out.extend(r for r in last.values() if r["value"] is not None)
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def test_compacted_rows_are_each_keys_last_record(spark):
    rows = collect(read(spark, FIXTURES, compacted="true"))
    want = _as_compacted(kafka_python_dir_rows(FIXTURES, include_control=True))
    got = sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    fields = ("topic", "partition", "offset", "key", "value", "headers", "segment")
    assert [tuple(r[f] for f in fields) for r in got] \
        == [tuple(r[f] for f in fields) for r in want]
    assert len(want) < len(kafka_python_dir_rows(FIXTURES))


def test_a_new_class_archive_removes_other_installations_unused_for_30_days(tmp_path,
                                                                           monkeypatch):
    """Each java, Spark and class path has an archive of its own (~70 MB): when one is about to
    be written, another installation's that has been neither written nor read for 30 days
    goes; one used since, a partial one being written, and other files stay."""
    from kafkalog_cli.spark import classarchive
    home = classarchive.spark_home()
    if home is None or classarchive._java() is None:
        pytest.skip("no Spark home or java")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = tmp_path / "kafkalog"
    cache.mkdir()
    day = 24 * 3600
    now = time.time()
    files = {"spark-classes-0000000000000000.jsa": (now - 40 * day, now - 40 * day),
             "spark-classes-1111111111111111.jsa": (now - 2 * day, now - 40 * day),  # read
             "spark-classes-2222222222222222.jsa": (now - 40 * day, now - 3 * day),
             "spark-classes-3333333333333333.jsa.123.tmp": (now - 2 * day, now - 2 * day),
             "notes.txt": (now - 90 * day, now - 90 * day)}
    for name, (atime, mtime) in files.items():
        (cache / name).write_bytes(b"x")
        os.utime(cache / name, (atime, mtime))
    (tmp_path / "outside.jsa").write_bytes(b"y")
    os.utime(tmp_path / "outside.jsa", (now - 90 * day, now - 90 * day))
    os.symlink(tmp_path / "outside.jsa", cache / "spark-classes-4444444444444444.jsa")
    archive = classarchive.Archive(home, "", "")
    assert "ArchiveClassesAtExit=" in archive.options
    assert sorted(os.listdir(cache)) == sorted(set(files) - {
        "spark-classes-0000000000000000.jsa"} | {"spark-classes-4444444444444444.jsa"})
    assert (tmp_path / "outside.jsa").read_bytes() == b"y"
    # an archive of its own already there: nothing is written, nothing removed
    for name in os.listdir(cache):
        if name.endswith(".jsa"):
            os.utime(cache / name, (now - 40 * day, now - 40 * day), follow_symlinks=False)
    os.rename(cache / "spark-classes-2222222222222222.jsa", archive.path)
    left = sorted(os.listdir(cache))
    assert "SharedArchiveFile=" in classarchive.Archive(home, "", "").options
    assert sorted(os.listdir(cache)) == left


def test_a_symlink_at_the_archive_s_temporary_name_is_removed_not_written_through(
        tmp_path, monkeypatch):
    """The JVM writes the archive to ``<archive>.<pid>.tmp``: a symlink planted at that name
    (pointing outside the cache) is removed before the JVM is given the name."""
    from kafkalog_cli.spark import classarchive
    home = classarchive.spark_home()
    if home is None or classarchive._java() is None:
        pytest.skip("no Spark home or java")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = classarchive.archive_path(home)
    os.makedirs(os.path.dirname(path))
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    planted = "%s.%d.tmp" % (path, os.getpid())
    os.symlink(outside, planted)
    archive = classarchive.Archive(home, "", "")
    assert archive.writing == planted and "ArchiveClassesAtExit=" + planted in archive.options
    assert not os.path.lexists(planted)
    assert outside.read_bytes() == b"keep"
