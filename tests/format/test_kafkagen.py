"""The test-file writer itself (the oracle side): its bytes follow Kafka's layouts
(``DefaultRecordBatch``, ``LegacyRecord``, ``EndTransactionMarker``), and kafka-python reads back
what was written."""

import struct

import pytest
from crc32c import crc32c

import kafkagen as kg


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # DefaultRecordBatch's CRC-32C (Crc32C) check value


def test_v2_header_patch_keeps_crc():
    b = kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)], base_offset=2 ** 40, partition_leader_epoch=9)
    kb = kg.kafka_python_read(b)[0]
    assert (kb.batch.base_offset, kb.batch.leader_epoch, kb.crc_ok) == (2 ** 40, 9, True)


def test_control_batch_as_kafka_writes_it():
    b = kg.control_batch(kg.COMMIT, 5, 7, 0, 3)
    assert len(b) == 78  # EndTransactionMarker batch: 61-byte header + 17-byte record
    kb = kg.kafka_python_read(b)[0]
    assert kb.crc_ok and kb.batch.is_control_batch and kb.batch.is_transactional
    assert (kb.batch.producer_id, kb.batch.producer_epoch, kb.batch.base_sequence) == (7, 0, -1)
    (r,) = kb.records
    assert (r.offset, r.type, r.commit) == (5, 1, True)
    assert struct.unpack(">hi", r.value) == (0, 3)


@pytest.mark.parametrize("codec", kg.V2_CODECS)
def test_v2_codecs_really_compress(codec):
    b = kg.v2_batch([kg.Rec(b"k", kg.filler(i), kg.T0) for i in range(5)], 0, codec)
    kb = kg.kafka_python_read(b)[0]
    assert kb.batch.compression_type == kg.CODECS[codec]
    assert [r.value for r in kb.records] == [kg.filler(i) for i in range(5)]


def test_uncompressible_batch_is_refused_unless_allowed():
    recs = [kg.Rec(b"k", kg.random_bytes(100), kg.T0)]
    with pytest.raises(AssertionError):
        kg.v2_batch(recs, 0, "gzip")
    assert kg.kafka_python_read(kg.v2_batch(recs, 0, "gzip", expect_compressed=False))[0].crc_ok


def test_lz4_frame_headers_per_magic():
    """``KafkaLZ4BlockOutputStream``/``KafkaLZ4BlockInputStream``: a magic-0 frame carries Kafka's
    wrong header checksum (the 4 magic bytes hashed too); magic 1 and 2 carry the correct one."""
    import xxhash
    v0 = kg.legacy_entries(0, [kg.Rec(b"k", kg.filler(1))], 0, "lz4")
    assert v0[26:33].hex() == "04224d1860401a"
    v1 = kg.legacy_entries(1, [kg.Rec(b"k", kg.filler(1), kg.T0)], 0, "lz4")
    v2 = kg.v2_batch([kg.Rec(b"k", kg.filler(1), kg.T0)], 0, "lz4")
    for frame in (v1[34:], v2[61:]):
        assert frame[:4].hex() == "04224d18"
        hc_index = 14 if frame[4] & 0x08 else 6
        assert frame[hc_index] == (xxhash.xxh32(frame[4:hc_index]).intdigest() >> 8) & 0xFF


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", kg.LEGACY_CODECS[1:])
def test_legacy_wrapper_offsets(magic, codec):
    offsets = [100, 102, 105]
    b = kg.legacy_entries(magic, [kg.Rec(b"k", kg.filler(i), kg.T0 + i) for i in range(3)],
                          codec=codec, offsets=offsets)
    (kb,) = kg.kafka_python_read(b)
    assert kb.crc_ok and kb.batch.base_offset == 105
    assert [r.offset for r in kb.records] == offsets
    if magic == 1:
        assert kb.batch._timestamp == kg.T0 + 2  # wrapper timestamp = max inner timestamp
    # The raw inner offsets, read from the decompressed wrapper value: relative for magic 1,
    # absolute for magic 0 (LegacyRecord / AbstractLegacyRecordBatch in Kafka).
    assert _inner_offsets(b, magic, codec) == ([0, 2, 5] if magic == 1 else offsets)


def _inner_offsets(wrapper, magic, codec):
    import struct
    import kafka.codec as kc
    value_at = (18 if magic == 0 else 26) + 4
    (size,) = struct.unpack_from(">i", wrapper, value_at)
    value = bytes(wrapper[value_at + 4:value_at + 4 + size])
    decode = {"gzip": kc.gzip_decode, "snappy": kc.snappy_decode,
              "lz4": kc.lz4_decode_old_kafka if magic == 0 else kc.lz4_decode}[codec]
    inner = decode(value)
    found, pos = [], 0
    while pos < len(inner):
        offset, entry_size = struct.unpack_from(">qi", inner, pos)
        found.append(offset)
        pos += 12 + entry_size
    return found


def test_gzip_output_is_reproducible():
    import time
    a = kg.sample_segment(2, "gzip") + kg.sample_segment(1, "gzip")
    time.sleep(1.05)
    assert kg.sample_segment(2, "gzip") + kg.sample_segment(1, "gzip") == a


def test_corruption_helpers():
    d = bytes(range(100))
    assert kg.truncated(d, 10) == d[:90]
    assert kg.garbage_tail(d, 5, 1) == kg.garbage_tail(d, 5, 1) != kg.garbage_tail(d, 5, 2)
    assert kg.zero_tail(d, 3) == d + b"\0\0\0"
    assert kg.flip_bit(d, 4, 1)[4] == 6 and kg.flip_bit(kg.flip_bit(d, 4, 1), 4, 1) == d
    assert kg.set_size_field(bytes(20), 0, 2 ** 31 - 1)[8:12] == b"\x7f\xff\xff\xff"
    assert b"\n" not in kg.binary(1, 500) and b"\r" not in kg.binary(1, 500)
