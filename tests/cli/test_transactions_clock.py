"""What `kafkalog transactions` ages open transactions against: the wall clock by default (a
cron job sees a transaction left open for years as hanging), `--now` as epoch ms or ISO 8601
(as `dump --from-timestamp` reads it), or each partition's newest batch timestamp when asked
(`--age-from newest-timestamp`); the JSON says which. `retain --now` reads the same times."""

import shutil
import time
from pathlib import Path

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO
from dumpcheck import json_lines as json_objs
from dumpcheck import kafkalog_process as kafkalog
from kafkagen import Rec

T2019 = 1546300800000  # 2019-01-01T00:00:00Z
FIXTURES = Path(REPO, "fixtures", "logdir")


def open_since_2019(tmp_path):
    """A partition whose only batches are a transaction opened on 2019-01-01 (its newest
    timestamp a second later) and never ended."""
    w = kg.SegmentWriter(0)
    w.add_v2([Rec(b"k0", b"v", T2019), Rec(b"k1", b"v", T2019 + 1000)], producer_id=42,
             producer_epoch=0, base_sequence=0, transactional=True)
    directory = tmp_path / "logs" / "payments-0"
    ig.write_partition(directory, [(0, w.data())])
    return directory


def _open_and_summary(out):
    objs = json_objs(out)
    (txn,) = [o for o in objs if o["type"] == "transaction"]
    (part,) = [o for o in objs if o["type"] == "partition"]
    return txn, part


def test_default_ages_against_the_wall_clock(tmp_path):
    directory = open_since_2019(tmp_path)
    before = int(time.time() * 1000)
    p = kafkalog("transactions", "--format", "json", directory)
    after = int(time.time() * 1000)
    assert p.returncode == 1, p  # hanging: open for years
    txn, part = _open_and_summary(p.stdout)
    assert txn["state"] == "OPEN" and txn["hanging"] is True
    assert before - (T2019 + 1000) <= txn["ageMs"] <= after - (T2019 + 1000)
    assert part["referenceSource"] == "wallClock" and before <= part["referenceMs"] <= after
    assert part["hanging"] == 1
    text = kafkalog("transactions", directory)
    assert text.returncode == 1 and "HANGING" in text.stdout
    assert "ages against the wall clock" in text.stdout


def test_age_from_the_newest_timestamp_is_asked_for(tmp_path):
    directory = open_since_2019(tmp_path)
    p = kafkalog("transactions", "--format", "json", "--age-from", "newest-timestamp", directory)
    assert p.returncode == 0, p
    txn, part = _open_and_summary(p.stdout)
    assert txn["ageMs"] == 0 and txn["hanging"] is False
    assert (part["referenceSource"], part["referenceMs"]) == ("newestTimestamp", T2019 + 1000)
    text = kafkalog("transactions", "--age-from", "newest-timestamp", directory)
    assert text.returncode == 0 and "ages against the partition's newest timestamp" in text.stdout


def test_now_takes_iso_8601_as_dump_does(tmp_path):
    directory = open_since_2019(tmp_path)
    iso = kafkalog("transactions", "--format", "json", "--now", "2019-01-01T00:10:01+00:00",
                   directory)
    ms = kafkalog("transactions", "--format", "json", "--now", T2019 + 601000, directory)
    assert iso.returncode == ms.returncode == 0, (iso, ms)  # 10 minutes: not past 15
    assert iso.stdout == ms.stdout
    txn, part = _open_and_summary(iso.stdout)
    assert txn["ageMs"] == 600000
    assert (part["referenceSource"], part["referenceMs"]) == ("now", T2019 + 601000)
    late = kafkalog("transactions", "--now", "2019-01-01 01:00Z", directory)
    assert late.returncode == 1 and "HANGING" in late.stdout
    assert "--now %d (2019-01-01T01:00:00.000Z)" % (T2019 + 3600000) in late.stdout


def test_now_and_newest_timestamp_contradict(tmp_path):
    directory = open_since_2019(tmp_path)
    for args in (["--now", "2019-01-02", "--age-from", "newest-timestamp"],
                 ["--now", "yesterday"], ["--age-from", "newest"]):
        p = kafkalog("transactions", *args, directory)
        assert p.returncode == 2 and p.stdout == "", (args, p)
    p = kafkalog("transactions", "--now", "yesterday", directory)
    assert len(p.stderr.splitlines()) == 1 and "ISO 8601" in p.stderr


def test_library_default_is_the_wall_clock(tmp_path):
    from kafkalog_cli import Partition
    directory = open_since_2019(tmp_path)
    *txns, summary = Partition(str(directory)).transactions()
    assert summary.reference_source == "wallClock" and summary.hanging == 1
    *txns, summary = Partition(str(directory)).transactions(age_from="newest-timestamp")
    assert summary.reference_source == "newestTimestamp" and summary.hanging == 0


def test_retain_now_takes_iso_8601(tmp_path):
    copy = tmp_path / "logdir"
    shutil.copytree(FIXTURES, copy)
    plans = [kafkalog("retain", "--dry-run", "--format", "json", "--retention-ms", 1000,
                      "--now", now, copy / "orders-0")
             for now in ("2024-01-01T00:01:00Z", 1704067260000)]
    assert plans[0].returncode == plans[1].returncode, plans
    assert plans[0].returncode in (0, 1) and plans[0].stdout == plans[1].stdout
    bad = kafkalog("retain", "--retention-ms", 1000, "--now", "noon", copy / "orders-0")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
