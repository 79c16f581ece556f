"""The encoder's control batches, read back by kafka-python (the rest of the encoder is tested
through `kafkalog append` in test_append.py)."""

import pytest

from kafkagen import kafka_python_read
from kafkalog_cli.format.control import ABORT, COMMIT
from kafkalog_cli.format.encode import encode_control_batch


@pytest.mark.parametrize("marker", [ABORT, COMMIT])
def test_control_batch_as_the_broker_writes_it(marker):
    data = encode_control_batch(marker, 41, producer_id=1000, producer_epoch=3,
                                coordinator_epoch=7, timestamp=1700000000000,
                                partition_leader_epoch=2)
    assert len(data) == 78  # DefaultRecordBatch header 61 + one EndTransactionMarker record 17
    (kb,) = kafka_python_read(data)
    b = kb.batch
    assert kb.crc_ok and b.is_control_batch and b.is_transactional
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.leader_epoch) == (
        41, 1000, 3, -1, 2)
    (rec,) = kb.records
    assert rec.offset == 41 and rec.timestamp == 1700000000000
    assert (rec.abort, rec.commit) == (marker == ABORT, marker == COMMIT)
    assert rec.value[2:] == (7).to_bytes(4, "big")  # coordinator epoch


def test_control_batch_refuses_other_types():
    with pytest.raises(ValueError):
        encode_control_batch(2, 0, 1, 0, 0, 0)
