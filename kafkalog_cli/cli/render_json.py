"""`dump --format messages` (one line per message) and `dump --format json` (JSON Lines in the
project's one vocabulary, ``jsonvocab``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format.records import record_sequence
from ..format.validity import control_record_error, record_validity
from .. import jsonvocab
from . import decoders, render
from .render import BOOL_TEXT, Writer, control_fields, control_text

if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable, Dict, Optional, Sequence, TextIO

    from ..format.records import Batch, Headers, Records
    from ..format.scan import InvalidBytes
    from ..log.findings import Finding
    from .render import DumpOptions

    JsonFunction = Callable[[bytes, int], Any]  # a decoder's (bytes, offset) -> JSON value


class MessagesWriter(Writer):
    """One line per message, the classic kafka-dump-log style, for grep and awk."""

    def __init__(self, out: BinaryIO, err: TextIO, opts: DumpOptions) -> None:
        super().__init__(out, err, opts)
        self._key_text = decoders.text_function(opts.key_decoder)
        self._value_text = decoders.text_function(opts.value_decoder)

    def batch(self, b: Batch, recs: Optional[Records]) -> None:
        if recs is not None:
            self.records(b, recs)

    def records(self, b: Batch, recs: Records) -> None:
        add = self._lines.append
        codec = b.codec_name
        tl = b.timestamp_type_name
        kt = self._key_text
        vt = self._value_text
        pos = b.position
        for i, off in enumerate(recs.offsets):
            k = recs.keys[i]
            v = recs.values[i]
            valid, crc = record_validity(b, recs, i)
            line = ("offset: %d position: %d %s: %s isvalid: %s crc: %d keysize: %d "
                    "payloadsize: %d magic: %d compresscodec: %s" % (
                        off, pos, tl, self._ts(recs.timestamps[i]), BOOL_TEXT[valid], crc,
                        -1 if k is None else len(k), -1 if v is None else len(v), b.magic, codec))
            if b.is_control:
                error = control_record_error(k, v)
                if error is None:
                    line += control_text(k, v, self.opts.kafka_format)
                else:
                    self.bad_record(off, error)
            elif self.opts.parser is not None:
                key_text, payload_text = self.opts.parser.text(off, k, v)
                if key_text is not None:
                    line += " key: " + key_text
                if payload_text is not None:
                    line += " payload: " + payload_text
            else:
                if k is not None:
                    line += " key: " + kt(k, off)
                if v is not None:
                    line += " payload: " + vt(v, off)
            add(line)
        self._maybe_flush()


# -- json --------------------------------------------------------------------------------------

class JsonWriter(Writer):
    """JSON Lines in the shared vocabulary (kafkalog_cli/jsonvocab.py, README "JSON output"):
    a "batch" object per batch, a "record" object per record, a "summary" object at the end."""

    def __init__(self, out: BinaryIO, err: TextIO, opts: DumpOptions) -> None:
        super().__init__(out, err, opts)
        # key and value are always the bytes (lossless); a decoder other than the default
        # string adds its reading as keyDecoded/valueDecoded
        self._key_json: Optional[JsonFunction] = (
            None if opts.key_decoder == "string" else decoders.json_function(opts.key_decoder))
        self._value_json: Optional[JsonFunction] = (
            None if opts.value_decoder == "string"
            else decoders.json_function(opts.value_decoder))
        self._header_json: Optional[JsonFunction] = (
            None if opts.value_decoder == "string"
            else decoders.header_json_function(opts.value_decoder))
        self._dumps = decoders.StrictEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self._topic: Optional[str] = None
        self._partition: Optional[int] = None
        self._counts = {"files": 0, "batches": 0, "invalidBatches": 0, "records": 0,
                        "invalidBytes": 0, "problems": 0, "deletedFiles": 0, "deletedBatches": 0,
                        "deletedRecords": 0}
        # the counts a batch and its records go to: a .log.deleted's are counted apart
        self._batches_key, self._records_key = "batches", "records"
        self._deleted = False

    def _emit(self, obj: Dict[str, Any]) -> None:
        self._lines.append(self._dumps(obj))

    def _where(self, path: str) -> None:
        self._topic, self._partition = jsonvocab.partition_of(path)
        self._counts["files"] += 1

    def _emit_record(self, obj: Dict[str, Any], k: Optional[bytes], v: Optional[bytes],
                     hdrs: Headers) -> None:
        try:
            self._emit(obj)
        except RecursionError:
            # a payload parsed (--*-decoder json) that nests too deep to write back: as text
            for name, data in (("keyDecoded", k), ("valueDecoded", v)):
                if name in obj:
                    obj[name] = None if data is None else decoders.TEXT["string"](data)
            if "headersDecoded" in obj:
                obj["headersDecoded"] = [[hk, None if hv is None else decoders.TEXT["string"](hv)]
                                         for hk, hv in hdrs]
            self._emit(obj)

    def begin_file(self, path: str, base_offset: int,
                   buf: Optional[memoryview] = None) -> None:
        super().begin_file(path, base_offset, buf)
        self._where(path)
        self._batches_key, self._records_key = "batches", "records"
        self._deleted = False

    def deleted_file(self) -> None:
        super().deleted_file()
        self._emit({"type": "note", "file": self.path, "kind": "deleted_segment",
                    "message": render.deleted_note(self.path or "")})
        self._counts["deletedFiles"] += 1
        self._batches_key, self._records_key = "deletedBatches", "deletedRecords"
        self._deleted = True

    def batch(self, b: Batch, recs: Optional[Records]) -> None:
        tst = b.timestamp_type_name
        self._counts[self._batches_key] += 1
        if not b.is_valid:
            self._counts["invalidBatches"] += 1
        obj = {
            "type": "batch", "topic": self._topic, "partition": self._partition,
            "file": self.path, "position": b.position, "size": b.size,
            "magic": b.magic, "baseOffset": b.base_offset, "lastOffset": b.last_offset,
            "count": b.count, "crc": b.crc, "isValid": b.is_valid, "compresscodec": b.codec_name,
            "timestampType": tst, "maxTimestamp": b.max_timestamp, "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch, "baseSequence": b.base_sequence,
            "lastSequence": b.last_sequence, "partitionLeaderEpoch": b.partition_leader_epoch,
            "isTransactional": b.is_transactional, "isControl": b.is_control,
            "deleteHorizonMs": b.delete_horizon_ms}
        if self._deleted:
            obj["deletedSegment"] = True  # a batch of a .log.deleted: no longer in the log
        self._emit(obj)
        if recs is not None:
            self.records(b, recs)

    def records(self, b: Batch, recs: Records) -> None:
        tst = b.timestamp_type_name
        kj = self._key_json
        vj = self._value_json
        parser = self.opts.parser
        if kj is None and vj is None and parser is None and not b.is_control:
            self._plain_records(b, recs)
            return
        topic, partition = self._topic, self._partition
        bj = jsonvocab.bytes_json
        self._counts[self._records_key] += len(recs.offsets)
        for i, off in enumerate(recs.offsets):
            k = recs.keys[i]
            v = recs.values[i]
            valid, crc = record_validity(b, recs, i)
            seq = -1 if b.magic < 2 else record_sequence(b.base_sequence, off - b.base_offset)
            obj: Dict[str, Any] = {
                "type": "record", "topic": topic, "partition": partition, "file": self.path,
                "offset": off, "position": b.position, "timestamp": recs.timestamps[i],
                "timestampType": tst, "keySize": -1 if k is None else len(k),
                "valueSize": -1 if v is None else len(v), "key": bj(k), "value": bj(v)}
            if not b.is_control:
                if kj is not None:
                    obj["keyDecoded"] = None if k is None else kj(k, off)
                if vj is not None:
                    obj["valueDecoded"] = None if v is None else vj(v, off)
                if parser is not None:
                    for name, field in parser.json(off, k, v).items():
                        obj[_PARSER_FIELDS.get(name, name)] = field
            hdrs = recs.headers[i] if recs.headers is not None else ()
            obj["headers"] = jsonvocab.headers_json(hdrs)
            if self._header_json is not None and hdrs:
                hj = self._header_json
                obj["headersDecoded"] = [[hk, None if hv is None else hj(hv, off)]
                                         for hk, hv in hdrs]
            obj["sequence"] = seq
            obj["isValid"] = valid
            obj["crc"] = crc
            if b.is_control:
                error = control_record_error(k, v)
                if error is None:
                    obj.update(control_fields(k, v))
                else:
                    obj["controlError"] = error
                    self.bad_record(off, error)
            self._emit_record(obj, k, v, hdrs)
        self._maybe_flush()

    def _plain_records(self, b: Batch, recs: Records) -> None:
        """The record objects of ``records`` for data records shown with the string decoders,
        written as text directly: the very bytes the encoder writes for those objects (the same
        keys in the same order; integers, strings, booleans and null as it writes them), for a
        fraction of its cost per record."""
        # the string encoder JSONEncoder(ensure_ascii=False) uses (json imported by then)
        from json.encoder import encode_basestring as enc
        head = (self._dumps({"type": "record", "topic": self._topic,
                             "partition": self._partition, "file": self.path})[:-1]
                + ',"offset":')
        mid = ',"position":%d,"timestamp":' % b.position
        tail_ts = ',"timestampType":%s,"keySize":' % enc(b.timestamp_type_name)
        base_seq, base_off, v2 = b.base_sequence, b.base_offset, b.magic >= 2
        valids, crcs = recs.valids, recs.crcs or ()  # both for a legacy entry
        batch_valid = "true" if b.is_valid else "false"
        headers = recs.headers
        add = self._lines.append
        self._counts[self._records_key] += len(recs.offsets)
        for i, (off, ts, k, v) in enumerate(zip(recs.offsets, recs.timestamps, recs.keys,
                                                recs.values)):
            if valids is not None:
                valid, crc = ("true" if valids[i] else "false"), crcs[i]
            else:
                valid, crc = batch_valid, b.crc
            seq = record_sequence(base_seq, off - base_off) if v2 else -1
            hdrs = headers[i] if headers is not None else ()
            hj = ("[%s]" % ",".join(["[%s,%s]" % (enc(hk), _bytes_json_text(hv, enc))
                                     for hk, hv in hdrs])) if hdrs else "[]"
            add("%s%d%s%d%s%d,\"valueSize\":%d,\"key\":%s,\"value\":%s,\"headers\":%s,"
                "\"sequence\":%d,\"isValid\":%s,\"crc\":%d}"
                % (head, off, mid, ts, tail_ts, -1 if k is None else len(k),
                   -1 if v is None else len(v), _bytes_json_text(k, enc), _bytes_json_text(v, enc),
                   hj,
                   seq, valid, crc))
        self._maybe_flush()

    def records_not_decoded(self, batch: Batch, limit: int) -> None:
        super().records_not_decoded(batch, limit)
        self._emit({"type": "recordsNotDecoded", "topic": self._topic,
                    "partition": self._partition, "file": self.path, "position": batch.position,
                    "baseOffset": batch.base_offset, "lastOffset": batch.last_offset,
                    "inflateLimit": limit})

    def record_error(self, batch: Batch, message: str) -> None:
        super().record_error(batch, message)
        self._emit({"type": "error", "file": self.path, "position": batch.position,
                    "reason": message})

    def begin_aux(self, path: str) -> None:
        self.path = path
        self._where(path)

    def entry(self, kind: str, fields: Dict[str, Any]) -> None:
        obj = {"type": jsonvocab.camel(kind.replace("-", "_") + "_entry"), "file": self.path}
        obj.update(jsonvocab.camel_keys(fields))
        self._emit(obj)
        self._maybe_flush()

    def note(self, text: str) -> None:
        self._emit({"type": "note", "file": self.path, "message": text})

    def problems(self, problems: Sequence[Finding]) -> None:
        for p in problems:
            self._counts["problems"] += 1
            self._emit(jsonvocab.camel_keys(p.as_dict()))

    def unreadable(self, problem: Finding) -> None:
        self._counts["problems"] += 1
        self._emit(jsonvocab.camel_keys(problem.as_dict()))
        super().unreadable(problem)

    def invalid(self, inv: InvalidBytes, counted: bool) -> None:
        super().invalid(inv, counted)
        if counted:
            self._counts["invalidBytes"] += inv.size
            self._emit({"type": "invalidBytes", "file": self.path, "position": inv.position,
                        "size": inv.size, "reason": inv.reason})

    def finish(self) -> None:
        self._emit(jsonvocab.summary("dump", **self._counts))
        super().finish()


def _bytes_json_text(data: Optional[bytes], enc: Callable[[str], str]) -> str:
    """jsonvocab.bytes_json(data) as the JSON text the writers' encoder makes of it (``enc``:
    its string encoder)."""
    if data is None:
        return "null"
    try:
        return enc(data.decode("utf-8"))
    except UnicodeDecodeError:
        return '{"base64":"%s"}' % jsonvocab.bytes_json(data)["base64"]


# the parsers' (--cluster-metadata-decoder...) names for the value side, in the vocabulary's
_PARSER_FIELDS = {"payloadDecoded": "valueDecoded", "payloadError": "valueError",
                  "payloadErrorCause": "valueErrorCause"}
