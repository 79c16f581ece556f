"""Helpers for the dump tests: run the CLI, parse its output, and compute what every printed field
must be from kafka-python's reading of the same bytes (never from kafkalog_cli's own code).

Expected values come from ``kafkagen.kafka_python_read`` (kafka.record.MemoryRecords). Where
kafka-python keeps a parsed header field private (legacy wrapper CRC and timestamp) the private
attribute of kafka-python's own parse is used.
"""

import base64
import json
import os
import re
import struct
import subprocess
import sys

from click.testing import CliRunner

from kafkagen import CODEC_NAMES, kafka_python_read

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TS_NAMES = {0: "CreateTime", 1: "LogAppendTime", None: "NoTimestampType"}
CONTROL_NAMES = {0: "ABORT", 1: "COMMIT"}


def jbool(b):
    return "true" if b else "false"


# -- running ---------------------------------------------------------------------------------------

class Result:
    def __init__(self, code, out, err, exception=None):
        self.code = code
        self.out = out
        self.err = err
        self.exception = exception

    @property
    def lines(self):
        """stdout lines (split on \\n only, the tool's line separator)."""
        assert self.out == "" or self.out.endswith("\n"), "stdout does not end with a newline"
        return self.out.split("\n")[:-1]

    @property
    def err_lines(self):
        return self.err.split("\n")[:-1] if self.err else []

    def __repr__(self):
        return "Result(code=%r, out=%r..., err=%r)" % (self.code, self.out[:2000], self.err[:2000])


def dump(*args):
    """Run ``kafkalog dump ARGS`` in-process with click's CliRunner."""
    from kafkalog_cli.cli.main import cli
    r = CliRunner().invoke(cli, ["dump", *[str(a) for a in args]], catch_exceptions=True)
    exc = r.exception
    if isinstance(exc, SystemExit):
        exc = None
    if exc is not None:
        raise AssertionError("kafkalog dump raised %r" % (exc,)) from exc
    # decode the raw bytes: click's Result.stdout turns \r\n into \n
    return Result(r.exit_code, r.stdout_bytes.decode("utf-8"), r.stderr_bytes.decode("utf-8"))


def dump_subprocess(*args, cwd=None, timeout=60):
    """Run ``python -m kafkalog_cli dump ARGS`` as a real process."""
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", *[str(a) for a in args]],
                       cwd=cwd or REPO, capture_output=True, timeout=timeout)
    return Result(p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8"))


def kafkalog_process(*args, timeout=120):
    """``python -m kafkalog_cli ARGS`` (any subcommand) as a real process, its output as text
    (a CompletedProcess); a Python traceback on stderr fails the test."""
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *[str(a) for a in args]],
                       cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def json_lines(out):
    """The JSON Lines objects of a command's text output."""
    return [json.loads(line) for line in out.splitlines()]


def assert_clean_exit2(res):
    """Exit 2, one line on stderr, nothing on stdout, no Python traceback."""
    assert res.code == 2, res
    assert "Traceback" not in res.err, res
    assert len(res.err_lines) == 1, res.err
    assert res.err_lines[0].strip(), res.err
    assert res.out == "", res


# -- parsing ---------------------------------------------------------------------------------------

def pairs(text):
    """``label: value label: value ...`` (values without spaces) as [(label, value), ...]."""
    toks = text.split(" ")
    assert len(toks) % 2 == 0, "odd number of tokens in %r" % text
    out = []
    for label, value in zip(toks[0::2], toks[1::2]):
        assert label.endswith(":"), "%r is not a label in %r" % (label, text)
        out.append((label[:-1], value))
    return out


def split_record_line(line, n_meta_pairs, prefix="| "):
    """A record line as ([(label, value)] for the first ``n_meta_pairs`` pairs, data tail)."""
    assert line.startswith(prefix), line
    toks = line[len(prefix):].split(" ")
    meta = pairs(" ".join(toks[:2 * n_meta_pairs]))
    return meta, " ".join(toks[2 * n_meta_pairs:])


# -- expected values from kafka-python --------------------------------------------------------------

def _legacy_ts(b):
    return -1 if b.magic == 0 else b._timestamp  # kafka-python's parse of the wrapper timestamp


def ts_label(b):
    return TS_NAMES[b.timestamp_type]


def codec_name(b):
    return CODEC_NAMES.get(b.compression_type, "<codec id %d>" % b.compression_type)


def batch_pairs(kb):
    """[(label, value)] of the kafka-dump-log batch line for one kafka-python batch."""
    b = kb.batch
    if b.magic >= 2:
        attrs = b.attributes & 0xFF
        dh = "OptionalLong[%d]" % b.first_timestamp if attrs & 0x40 else "OptionalLong.empty"
        return [("baseOffset", str(b.base_offset)), ("lastOffset", str(b.last_offset)),
                ("count", str(b.records_count)), ("baseSequence", str(b.base_sequence)),
                ("lastSequence", str(b.last_sequence)), ("producerId", str(b.producer_id)),
                ("producerEpoch", str(b.producer_epoch)),
                ("partitionLeaderEpoch", str(b.leader_epoch)),
                ("isTransactional", jbool(b.is_transactional)),
                ("isControl", jbool(b.is_control_batch)), ("deleteHorizonMs", dh),
                ("position", str(kb.position)), (ts_label(b), str(b.max_timestamp)),
                ("size", str(b.size_in_bytes)), ("magic", str(b.magic)),
                ("compresscodec", codec_name(b)), ("crc", str(b.crc)),
                ("isvalid", jbool(kb.crc_ok))]
    return [("offset", str(b.base_offset)), ("position", str(kb.position)),
            (ts_label(b), str(_legacy_ts(b))), ("size", str(b.size_in_bytes)),
            ("magic", str(b.magic)), ("compresscodec", codec_name(b)),
            ("crc", str(b._crc)), ("isvalid", jbool(kb.crc_ok))]


def record_sequence(b, r):
    if b.magic < 2 or b.base_sequence == -1:
        return -1
    return b._increment_sequence(b.base_sequence, r.offset - b.base_offset)


def control_fields(r):
    """(type name, coordinator epoch) of a transaction marker read by kafka-python."""
    epoch = struct.unpack(">hi", r.value[:6])[1]
    return CONTROL_NAMES[r.type], epoch


def size_of(x):
    return -1 if x is None else len(x)


def record_meta_pairs(kb, r, kafka_format="4.2"):
    b = kb.batch
    ts = -1 if r.timestamp is None else r.timestamp
    out = [("offset", str(r.offset)), (ts_label(b), str(ts)), ("keySize", str(size_of(r.key))),
           ("valueSize", str(size_of(r.value)))]
    if b.magic >= 2:
        out += [("sequence", str(record_sequence(b, r))),
                ("headerKeys", "[%s]" % ",".join(k for k, _ in r.headers))]
        if b.is_control_batch:
            name, epoch = control_fields(r)
            out += [("endTxnMarker", name), ("coordinatorEpoch", str(epoch))]
    else:
        brace = "" if kafka_format >= "4.3" else "}"
        out += [("isValid", jbool(r.validate_crc())), ("crc", "%d%s" % (r.checksum, brace))]
    return out


# A UTF-16 surrogate's UTF-8 bytes (0xED 0xA0-0xBF, and a continuation byte after them): Java's
# String decoder replaces them with one U+FFFD where Python's "replace" gives one per byte
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")


def text_string(b):
    """Java's new String(b, UTF_8): Python's replacement, but one U+FFFD per surrogate."""
    return "\ufffd".join(part.decode("utf-8", "replace") for part in _SURROGATE.split(bytes(b)))


def data_tail(kb, r, key_text=text_string, value_text=text_string):
    """The ``key: ... payload: ...`` part of a record line (no leading space)."""
    if kb.batch.magic >= 2 and kb.batch.is_control_batch:
        return ""
    parts = []
    if r.key is not None:
        parts.append("key: " + key_text(r.key))
    if r.value is not None:
        parts.append("payload: " + value_text(r.value))
    return " ".join(parts)


def kafka_file_lines_check(lines, start, path, data, *, deep=False, print_data=False,
                           kafka_format="4.2", base_offset=0, key_text=text_string,
                           value_text=text_string, trailing=None):
    """Check the kafka-format lines of one file dump beginning at ``lines[start]`` field by field
    against kafka-python; return the index after them. ``trailing`` is the expected invalid-byte
    count at the end (default: bytes kafka-python does not read as complete entries)."""
    i = start
    assert lines[i] == "Dumping %s" % path
    assert lines[i + 1] == "Log starting offset: %d" % base_offset
    i += 2
    kbs = kafka_python_read(data, deep=deep or print_data)
    for kb in kbs:
        assert pairs(lines[i]) == batch_pairs(kb), "batch at position %d" % kb.position
        i += 1
        if not (deep or print_data):
            continue
        for r in kb.records:
            expected = record_meta_pairs(kb, r, kafka_format)
            meta, tail = split_record_line(lines[i], len(expected))
            assert meta == expected, "record at offset %d" % r.offset
            if print_data:
                assert tail == data_tail(kb, r, key_text, value_text), "record at offset %d" % r.offset
            else:
                assert tail == ""
            i += 1
    if trailing is None:
        trailing = len(data) - sum(kb.size for kb in kbs)
    if trailing:
        assert lines[i] == "Found %d invalid bytes at the end of %s" % (
            trailing, os.path.basename(path))
        i += 1
    return i


def check_kafka_dump(res, path, data, **kw):
    """The whole stdout of a one-file dump matches kafka-python's reading of ``data``."""
    end = kafka_file_lines_check(res.lines, 0, path, data, **kw)
    assert end == len(res.lines), res.lines[end:]


def expected_nonconsecutive(offsets, kafka_format="4.2"):
    """The pairs DumpLogSegments reports for a file's record offsets, in print order."""
    found = []
    last = -1 if kafka_format >= "4.3" else None
    for off in offsets:
        if last is not None and off != last + 1:
            found.append((last, off))
        last = off
    if kafka_format >= "4.3":
        return sorted(dict(found).items())
    return list(reversed(found))


def record_offsets(data):
    return [r.offset for kb in kafka_python_read(data) for r in kb.records]


# -- messages format ----------------------------------------------------------------------------------

def messages_meta_pairs(kb, r):
    b = kb.batch
    if b.magic >= 2:
        valid, crc = kb.crc_ok, b.crc
    else:
        valid, crc = r.validate_crc(), r.checksum
    ts = -1 if r.timestamp is None else r.timestamp
    out = [("offset", str(r.offset)), ("position", str(kb.position)), (ts_label(b), str(ts)),
           ("isvalid", jbool(valid)), ("crc", str(crc)), ("keysize", str(size_of(r.key))),
           ("payloadsize", str(size_of(r.value))), ("magic", str(b.magic)),
           ("compresscodec", codec_name(b))]
    if b.magic >= 2 and b.is_control_batch:
        name, epoch = control_fields(r)
        out += [("endTxnMarker", name), ("coordinatorEpoch", str(epoch))]
    return out


def check_messages_dump(res, data, key_text=text_string, value_text=text_string):
    lines = res.lines
    i = 0
    for kb in kafka_python_read(data):
        for r in kb.records:
            expected = messages_meta_pairs(kb, r)
            meta, tail = split_record_line(lines[i], len(expected), prefix="")
            assert meta == expected, "record at offset %d" % r.offset
            assert tail == data_tail(kb, r, key_text, value_text)
            i += 1
    return i


# -- json format ------------------------------------------------------------------------------------

def json_objects(res):
    return [json.loads(line) for line in res.lines]


def b64(x):
    return None if x is None else base64.b64encode(x).decode("ascii")


def lossless(x):
    """The JSON vocabulary's bytes: UTF-8 text when valid, else {"base64": ...}."""
    if x is None:
        return None
    try:
        return x.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(x).decode("ascii")}


def topic_partition_of(path):
    """(topic, partition) from the name of the directory holding ``path``: <topic>-<n>."""
    name = os.path.basename(os.path.dirname(os.path.abspath(path)))
    m = re.fullmatch(r"(.+)-([0-9]+)", name)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def expected_json_batch(kb, path):
    b = kb.batch
    legacy = b.magic < 2
    attrs = b.attributes & 0xFF if not legacy else 0
    topic, partition = topic_partition_of(path)
    return {
        "type": "batch", "topic": topic, "partition": partition,
        "file": path, "position": kb.position, "size": b.size_in_bytes,
        "magic": b.magic, "baseOffset": b.base_offset,
        "lastOffset": b.base_offset if legacy else b.last_offset,
        "crc": b._crc if legacy else b.crc, "isValid": kb.crc_ok,
        "compresscodec": codec_name(b), "timestampType": ts_label(b),
        "maxTimestamp": _legacy_ts(b) if legacy else b.max_timestamp,
        "producerId": -1 if legacy else b.producer_id,
        "producerEpoch": -1 if legacy else b.producer_epoch,
        "baseSequence": -1 if legacy else b.base_sequence,
        "lastSequence": -1 if legacy else b.last_sequence,
        "partitionLeaderEpoch": -1 if legacy else b.leader_epoch,
        "isTransactional": False if legacy else b.is_transactional,
        "isControl": False if legacy else b.is_control_batch,
        "deleteHorizonMs": b.first_timestamp if attrs & 0x40 else None,
    }


def expected_json_record(kb, r, path):
    """The record object with --key-decoder base64 --value-decoder base64."""
    b = kb.batch
    if b.magic >= 2:
        valid, crc = kb.crc_ok, b.crc
    else:
        valid, crc = r.validate_crc(), r.checksum
    topic, partition = topic_partition_of(path)
    obj = {"type": "record", "topic": topic, "partition": partition, "file": path,
           "offset": r.offset, "position": kb.position,
           "timestamp": -1 if r.timestamp is None else r.timestamp, "timestampType": ts_label(b),
           "keySize": size_of(r.key), "valueSize": size_of(r.value),
           "key": lossless(r.key), "value": lossless(r.value),
           "headers": [[k, lossless(v)] for k, v in (r.headers or [])],
           "sequence": record_sequence(b, r), "isValid": valid, "crc": crc}
    if b.magic >= 2 and b.is_control_batch:
        name, epoch = control_fields(r)
        obj.update({"controlType": name, "controlTypeId": r.type, "coordinatorEpoch": epoch})
    else:
        obj["keyDecoded"] = b64(r.key)
        obj["valueDecoded"] = b64(r.value)
    if r.headers:
        obj["headersDecoded"] = [[k, b64(v)] for k, v in r.headers]
    return obj


def check_json_dump(res, path, data, deep=True):
    """JSON Lines (run with --key-decoder base64 --value-decoder base64) vs kafka-python.
    ``deep``: record objects are expected (--deep-iteration / --print-data-log)."""
    objs = json_objects(res)
    i = 0
    kbs = kafka_python_read(data, deep=True)
    for kb in kbs:
        got = dict(objs[i])
        exp = expected_json_batch(kb, path)
        count = got.pop("count")
        if kb.batch.magic >= 2:
            assert count == kb.batch.records_count
        else:
            # legacy entries have no count field on disk; null or the real number are both fine
            assert count in (None, len(kb.records))
        assert got == exp, "batch at position %d" % kb.position
        i += 1
        if not deep:
            continue
        for r in kb.records:
            assert objs[i] == expected_json_record(kb, r, path), "record at offset %d" % r.offset
            i += 1
    trailing = len(data) - sum(kb.size for kb in kbs)
    if trailing:
        inv = objs[i]
        assert (inv["type"], inv["file"], inv["position"], inv["size"]) == (
            "invalidBytes", path, len(data) - trailing, trailing)
        assert isinstance(inv["reason"], str) and inv["reason"]
        i += 1
    summary = objs[i]
    assert summary["type"] == "summary" and summary["command"] == "dump", summary
    assert summary["batches"] == len(kbs), summary
    assert summary["records"] == (sum(len(kb.records) for kb in kbs) if deep else 0), summary
    assert summary["invalidBytes"] == trailing, summary
    i += 1
    assert i == len(objs), objs[i:]


def kafkalog(*args):
    """Run ``kafkalog ARGS`` (any subcommand) in-process; an uncaught exception fails the test."""
    from kafkalog_cli.cli.main import cli
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    exc = r.exception
    if isinstance(exc, SystemExit):
        exc = None
    if exc is not None:
        raise AssertionError("kafkalog %s raised %r" % (args[0] if args else "", exc)) from exc
    return Result(r.exit_code, r.stdout_bytes.decode("utf-8"), r.stderr_bytes.decode("utf-8"))


def kafkalog_checked(*args):
    """``kafkalog(ARGS)``, checked to print no traceback on stdout or stderr."""
    res = kafkalog(*args)
    assert "Traceback" not in res.err, res
    assert "Traceback" not in res.out, res
    return res


def files_in(directory):
    """{name: bytes} of the regular files directly in ``directory`` (a partition's Kafka files;
    the quarantine folder is a directory)."""
    out = {}
    for n in os.listdir(directory):
        p = os.path.join(directory, n)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[n] = f.read()
    return out


def on_a_terminal(args, columns=200, stderr_too=False, timeout=60):
    """(exit code, output) of ``python -m kafkalog_cli ARGS`` with a pseudo-terminal of
    ``columns`` columns as its stdout (and its stderr with ``stderr_too``), escape sequences
    removed."""
    import fcntl
    import pty
    import re
    import select
    import struct
    import subprocess
    import sys
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns), LINES="50", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-m", "kafkalog_cli"] + [str(a) for a in args],
                            stdout=slave, stderr=slave if stderr_too else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, cwd=REPO)
    os.close(slave)
    out = b""
    # poll, not select: a worker that has opened many files gets descriptors above FD_SETSIZE
    poller = select.poll()
    poller.register(master, select.POLLIN)
    while poller.poll(timeout * 1000):
        try:
            chunk = os.read(master, 65536)
        except OSError:   # the other end closed (Linux: EIO)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    proc.wait(30)
    return proc.returncode, re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", out.decode("utf-8", "replace"))
