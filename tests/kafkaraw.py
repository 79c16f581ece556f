"""Raw Kafka requests for the oracle tests, where a client library hides what a test needs.

``produce(bootstrap, topic, partition, records, producer_id=..., producer_epoch=...,
base_sequence=...)`` sends one ProduceRequest (v9, acks=all) holding one v2 batch built with
kafka-python's ``DefaultRecordBatchBuilder``, with the producer id, epoch and base sequence the
test chooses (kafka-python's producers assign their own and do not let a test set them), and
returns the partition's answer: ``(error_code, base_offset)``. The broker checks the batch as a
client's (``UnifiedLog.analyzeAndValidateProducerState``, ``ProducerAppendInfo``): a duplicate of
one of the producer's last five batches answers error 0 with the original batch's offset, a
sequence gap ``OUT_OF_ORDER_SEQUENCE_NUMBER`` (45).
"""

import socket
import struct
import time

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
DUPLICATE_SEQUENCE_NUMBER = 46

PRODUCE_VERSION = 9


def batch(records, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False):
    """One v2 batch (uncompressed) of ``records``: (key, value, headers, timestamp_ms) tuples;
    offsets from 0 (the broker assigns the real ones)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                        is_transactional=transactional, producer_id=producer_id,
                                        producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 20)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers or ()))
    return bytes(builder.build())


def _recv_exact(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def produce_batch(bootstrap, topic, partition, data, timeout=30.0):
    """Send the batch bytes ``data`` to ``topic``-``partition`` (acks=all); (error_code,
    base_offset) of the answer."""
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    topic_cls = ProduceRequest.TopicProduceData
    part_cls = topic_cls.PartitionProduceData
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=int(timeout * 1000),
                             topic_data=[topic_cls(name=topic, partition_data=[
                                 part_cls(index=partition, records=data)])])
    request.API_VERSION = PRODUCE_VERSION
    request.with_header(correlation_id=1, client_id="kafkalog-tests")
    frame = request.encode(version=PRODUCE_VERSION, header=True, framed=True)
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        payload = _recv_exact(sock, size)
    response = ProduceResponse.decode(payload, version=PRODUCE_VERSION, header=True)
    for t in response.responses:
        for p in t.partition_responses:
            if t.name == topic and p.index == partition:
                return p.error_code, p.base_offset
    raise AssertionError(f"no answer for {topic}-{partition}: {response}")


def produce(bootstrap, topic, partition, records, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, transactional=False, timeout=30.0):
    return produce_batch(bootstrap, topic, partition,
                         batch(records, producer_id, producer_epoch, base_sequence,
                               transactional), timeout)


def now_ms():
    return int(time.time() * 1000)
