"""Fuzz tests of the format layer, in-process: the scan, batch headers, records of v2 batches
and legacy messages, every codec, nested compression, decompression bombs and control records,
on seeds written by kafka-python (fuzzlib), mutated by bit flips, truncations, splices, length
fields at their extremes and mutations under the compression (hypothesis, thousands of inputs).
Only the documented exceptions may escape (CorruptRecordError and its LimitExceededError), in
bounded time; the C decoder's records are the pure-Python decoder's, and kafka-python reads the
same entries, offsets, CRC verdicts and records.

``KAFKALOG_FUZZ_EXAMPLES`` scales every budget (default 1; 10 for a longer run). For a long run
use fuzz/run.py.
"""

import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fuzzlib as F
import kafkagen as kg

# Randomized fuzzing runs, a few minutes: left out of the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

OPS = F.ops_strategy()
LOG_SEEDS = F.log_seeds()
LOG_NAMES = sorted(LOG_SEEDS)


@pytest.mark.parametrize("name", LOG_NAMES)
def test_every_seed_reads_clean(name):
    """The seeds themselves: every entry complete (bombs stop at the bound, as they must)."""
    for pure in (False, True):
        run = F.with_pure_python if pure else (lambda fn, *a: fn(*a))
        assert run(F.read_log_bytes, LOG_SEEDS[name]) >= 1


@F.fuzz_settings(2500)
@given(name=st.sampled_from(LOG_NAMES), other=st.sampled_from(LOG_NAMES), ops=OPS,
       resync=st.booleans(), pure=st.booleans())
def test_log_bytes_mutated(name, other, ops, resync, pure):
    data = F.apply_ops(LOG_SEEDS[name], ops, LOG_SEEDS[other])
    allowed = F.allowed_exceptions()
    try:
        if pure:
            F.timed(F.with_pure_python, F.read_log_bytes, data, resync=resync)
        else:
            F.timed(F.read_log_bytes, data, resync=resync)
    except allowed:
        pass  # the scan itself raises nothing for bad bytes; a reader may say why it stopped


def test_log_bytes_against_kafka_python():
    """Mutated segments with their CRCs fixed up, read by kafka-python (independent) and by
    kafkalog: the same entries, offsets and CRC verdicts, and the same records of every v2
    batch both can decode. A comparison that kafka-python cannot make compares nothing, so at
    least 90% of the inputs must have had entries compared."""
    counts = {"inputs": 0, "compared": 0}

    @F.fuzz_settings(600)
    @given(name=st.sampled_from(LOG_NAMES), other=st.sampled_from(LOG_NAMES), ops=OPS)
    def compare(name, other, ops):
        data = F.fix_crcs(F.apply_ops(LOG_SEEDS[name], ops, LOG_SEEDS[other]))
        counts["inputs"] += 1
        if F.timed(F.compare_with_kafka_python, data):
            counts["compared"] += 1

    compare()
    assert counts["compared"] >= 0.9 * counts["inputs"], (counts, F.COMPARE_FAILURES)


LARGE_SEEDS = F.large_seeds()


@F.fuzz_settings(60)
@given(name=st.sampled_from(sorted(LARGE_SEEDS)), ops=OPS, pure=st.booleans())
def test_large_batches_mutated(name, ops, pure):
    """Batches inflating to about 5 MiB (more than the codecs join from pieces: their output
    is gathered in one growing mapping), read with the default bounds; the C decoder's records
    must be the pure-Python decoder's."""
    data = F.apply_ops(LARGE_SEEDS[name], ops)
    run = F.with_pure_python if pure else (lambda fn, *a: fn(*a))
    F.timed(run, F.read_log_bytes, data, 5 << 20, 80 << 20)
    F.timed(F.compare_implementations, data, 5 << 20, 80 << 20)


@F.fuzz_settings(1500)
@given(data=st.binary(max_size=300), count=st.integers(-2, 70), pure=st.booleans())
def test_records_area_random_bytes(data, count, pure):
    if pure:
        F.timed(F.with_pure_python, F.read_records_area, data, count)
    else:
        F.timed(F.read_records_area, data, count)


@F.fuzz_settings(1000)
@given(raw=st.binary(max_size=200), version_field=st.integers(-3, 3), type_id=st.integers(-1, 8))
def test_control_records_random_bytes(raw, version_field, type_id):
    from kafkalog_cli.format import control
    from kafkalog_cli.format.errors import CorruptRecordError
    for key, value in ((struct.pack(">hh", version_field, type_id), raw), (raw, raw)):
        try:
            control.control_type(key)
        except CorruptRecordError:
            pass
        try:
            control.end_txn_marker(value)
        except CorruptRecordError:
            pass
        try:
            control.kraft_control_json(type_id, value)
        except CorruptRecordError:
            pass


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("magic", [1, 2])
def test_decompression_bomb_in_process(codec, magic):
    """A record of 64 MiB of zeros: the default bounds (5 MiB records, 80 MiB batches) stop
    the inflation at the limit, quickly and without holding the whole payload."""
    if magic < 2 and codec == "zstd":
        pytest.skip("zstd needs message format v2")
    from kafkalog_cli.format.codecs import Inflater
    from kafkalog_cli.format.errors import CorruptRecordError, LimitExceededError
    from kafkalog_cli.format.records import decode_records
    from kafkalog_cli.format.scan import scan
    cid = kg.CODECS[codec]
    if magic == 2:
        data = F._big_record_batch_v2(cid, 64 << 20)
    else:
        data = F._big_record_legacy(magic, cid, 64 << 20)
    (batch,) = list(scan(data, 0, len(data)))
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError):
        decode_records(data, batch, Inflater(), 5 << 20, 4 << 20)
    assert time.monotonic() - t0 < F.SECONDS
    if magic == 2:
        # The payload fits the batch bound but the record does not: the record bound says so.
        with pytest.raises(CorruptRecordError):
            decode_records(data, batch, Inflater(), 5 << 20, 80 << 20)

