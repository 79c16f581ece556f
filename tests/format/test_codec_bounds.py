"""Decompression bombs: inflating is bounded in memory and time for every codec.

Each bomb is built here with the codec libraries themselves (zlib, cramjam, lz4, zstandard),
never with our code: about 1 GiB of zeros compressed, or a header that claims far more than it
holds. Each is inflated in a child process (``Inflater.inflate`` with a small limit) whose
address space is capped (RLIMIT_AS) a little above what it holds before inflating, and whose
peak resident size (VmHWM, reset before inflating) is read afterwards: a codec that allocates
the whole output first, or keeps more than the limit, fails. The refusal must be a
LimitExceededError, quickly. Nested compression (a compressed legacy wrapper inside another)
and the whole command line are checked too.
"""

import json
import os
import struct
import subprocess
import sys
import zlib

import pytest

import kafkagen as kg

# Decompression bombs refused in bounded memory and time: left out of the quick suite
# (pytest -m "not slow").
pytestmark = pytest.mark.slow

MiB = 1 << 20
GiB = 1 << 30
LIMIT = 1 * MiB
# What inflating may take beyond its limit: a codec's working buffers (an LZ4 block of up to
# 4 MiB, zstd's window of up to 8 MiB when the limit is smaller, a gzip read step) and the
# interpreter's own slack.
SLACK = 24 * MiB
SECONDS = 3.0  # for a bomb of 1 GiB, from a cold start of the codec library

CHILD = r"""
import json, os, resource, sys, time
from kafkalog_cli.format import codecs
from kafkalog_cli.format.errors import LimitExceededError, CorruptRecordError

path, codec, magic, limit, headroom = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with open(path, "rb") as f:
    data = f.read()
inflater = codecs.Inflater()
# warm up: import the codec library now, so that what follows measures inflating only
try:
    inflater.inflate(codec, data[:64], limit, magic)
except Exception:
    pass

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None

have_proc = os.path.exists("/proc/self/clear_refs")
if have_proc:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident size
    rss0 = status("VmRSS")
    vm0 = status("VmSize")
    resource.setrlimit(resource.RLIMIT_AS, (vm0 + limit + headroom,) * 2)
else:
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
try:
    out = inflater.inflate(codec, data, limit, magic)
    result = {"error": None, "size": len(out)}
except (CorruptRecordError, MemoryError) as e:
    result = {"error": type(e).__name__, "message": str(e)}
result["seconds"] = time.perf_counter() - t0
if have_proc:
    result["peak"] = status("VmHWM") - rss0
else:
    result["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
print(json.dumps(result))
"""


def inflate_in_child(path, codec, magic=2, limit=LIMIT, headroom=SLACK):
    p = subprocess.run([sys.executable, "-c", CHILD, str(path), str(codec), str(magic),
                        str(limit), str(headroom)],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    return json.loads(p.stdout)


# -- bombs, built with the codec libraries ----------------------------------------------------

ZEROS = bytes(16 * MiB)


def gzip_bomb(total=GiB):
    """One gzip member of ``total`` zero bytes (zlib, level 1: quick to build)."""
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    parts = [c.compress(ZEROS) for _ in range(total // len(ZEROS))]
    parts.append(c.flush())
    return b"".join(parts)


def gzip_members(total=GiB, member=16 * MiB):
    """Concatenated gzip members (Java's GZIPInputStream reads on into the next one)."""
    return gzip_bomb(member) * (total // member)


def gzip_empty_members(n=100_000):
    """Many empty gzip members: no output at all, but a member each few bytes."""
    return gzip_bomb(0) * n


def snappy_raw(total=256 * MiB):
    import cramjam
    return bytes(cramjam.snappy.compress_raw(bytes(total)))


def snappy_claims(claim=(1 << 31) + 5):
    """A raw snappy block whose length preamble claims ``claim`` bytes, over a short body."""
    import cramjam
    block = bytes(cramjam.snappy.compress_raw(b"x" * 1000))
    return kg.uvarint(claim) + block[len(kg.uvarint(1000)):]


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def xerial(chunks):
    return XERIAL_HEADER + b"".join(struct.pack(">i", len(c)) + c for c in chunks)


def xerial_bomb(total=GiB, chunk=MiB):
    import cramjam
    block = bytes(cramjam.snappy.compress_raw(bytes(chunk)))
    return xerial([block] * (total // chunk))


def lz4_frame(total=GiB, content_size=None, magic0_checksum=False):
    """An LZ4 frame of independent 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream writes;
    ``content_size`` sets the descriptor's content size field (any value: a lie is allowed);
    ``magic0_checksum`` computes the header checksum over the magic bytes too, as Kafka's
    magic-0 writers did."""
    import lz4.frame
    import xxhash
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                     content_checksum=False)
    parts = [c.begin()]
    chunk = ZEROS[:MiB]
    parts += [c.compress(chunk) for _ in range(total // MiB)]
    parts.append(c.flush())
    frame = bytearray(b"".join(parts))
    flg, bd = frame[4], frame[5]
    assert frame[:4] == b"\x04\x22\x4d\x18" and not flg & 0x08
    descriptor = bytes([flg | (0x08 if content_size is not None else 0), bd])
    if content_size is not None:
        descriptor += struct.pack("<Q", content_size)
    hashed = (bytes(frame[:4]) if magic0_checksum else b"") + descriptor
    hc = (xxhash.xxh32(hashed).intdigest() >> 8) & 0xFF
    return bytes(frame[:4]) + descriptor + bytes([hc]) + bytes(frame[7:])


def zstd_stream(total=GiB, level=3, window_log=None):
    """A zstd frame written as a stream (no content size in its header, as zstd-jni writes)."""
    import zstandard
    if window_log is None:
        cctx = zstandard.ZstdCompressor(level=level, write_content_size=False)
    else:
        params = zstandard.ZstdCompressionParameters.from_level(level, window_log=window_log,
                                                                write_content_size=0)
        cctx = zstandard.ZstdCompressor(compression_params=params)
    c = cctx.compressobj()
    parts = [c.compress(ZEROS) for _ in range(total // len(ZEROS))]
    parts.append(c.flush())
    return b"".join(parts)


def zstd_declared(total=GiB):
    """A zstd frame that declares its content size (1 GiB) in its header."""
    import zstandard
    c = zstandard.ZstdCompressor(level=1, write_content_size=True).compressobj(size=total)
    parts = [c.compress(ZEROS) for _ in range(total // len(ZEROS))]
    parts.append(c.flush())
    frame = b"".join(parts)
    assert zstandard.get_frame_parameters(frame).content_size == total
    return frame


def zstd_frames(total=GiB, frame=16 * MiB):
    """Many frames of 16 MiB each, 1 GiB in all."""
    return zstd_stream(frame) * (total // frame)


def zstd_window_claim():
    """A frame whose header asks for a 128 MiB window (window_log 27), as zstd-jni writes at
    level 22: the decoder reserves the window before any output."""
    import zstandard
    frame = zstd_stream(GiB, level=1, window_log=27)
    assert zstandard.get_frame_parameters(frame).window_size == 128 * MiB
    return frame


GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

BOMBS = {
    "gzip": (GZIP, 2, gzip_bomb),
    "gzip-members": (GZIP, 2, gzip_members),
    "snappy-raw": (SNAPPY, 2, snappy_raw),
    "snappy-raw-claims-2GiB": (SNAPPY, 2, snappy_claims),
    "snappy-xerial": (SNAPPY, 2, xerial_bomb),
    "snappy-xerial-claims-2GiB": (SNAPPY, 2, lambda: xerial([snappy_claims()])),
    "lz4": (LZ4, 2, lz4_frame),
    "lz4-magic0-header": (LZ4, 0, lambda: lz4_frame(magic0_checksum=True)),
    "lz4-magic1": (LZ4, 1, lz4_frame),
    "lz4-claims-content-size": (LZ4, 2, lambda: lz4_frame(256 * MiB, content_size=1 << 62)),
    "zstd": (ZSTD, 2, zstd_stream),
    "zstd-declared-size": (ZSTD, 2, zstd_declared),
    "zstd-frames": (ZSTD, 2, zstd_frames),
    "zstd-window-128MiB": (ZSTD, 2, zstd_window_claim),
    "gzip-v0": (GZIP, 0, gzip_bomb),
    "snappy-v1": (SNAPPY, 1, xerial_bomb),
}


@pytest.fixture(scope="module")
def bomb_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bombs")


def _bomb_file(bomb_dir, name):
    path = bomb_dir / name
    if not path.exists():
        path.write_bytes(BOMBS[name][2]())
    return path


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_is_refused_in_bounded_memory_and_time(bomb_dir, name):
    codec, magic, _ = BOMBS[name]
    path = _bomb_file(bomb_dir, name)
    res = inflate_in_child(path, codec, magic)
    assert res["error"] == "LimitExceededError", res
    assert res["seconds"] < SECONDS, res
    assert res["peak"] < LIMIT + SLACK, res


def test_gzip_empty_members_take_linear_time(tmp_path):
    """100,000 empty members (2 MB): nothing to inflate, and no quadratic copying of the rest of
    the input at each member."""
    path = tmp_path / "members"
    path.write_bytes(gzip_empty_members())
    res = inflate_in_child(path, GZIP)
    assert res["error"] is None and res["size"] == 0, res
    assert res["seconds"] < SECONDS, res
    assert res["peak"] < LIMIT + SLACK, res


# Legitimate data close to the limit: inflating keeps one copy of it, not two (no final join
# of the pieces into a second buffer).
NEAR = 48 * MiB


def _text(n):
    """Compressible but not trivial bytes."""
    line = b"".join(b"%08d the quick brown fox jumps over the lazy dog\n" % i for i in range(4096))
    return (line * (n // len(line) + 1))[:n]


LEGIT = {
    "gzip": (GZIP, lambda d: zlib.compress(d, 1, wbits=31)),
    "snappy-xerial": (SNAPPY, lambda d: xerial(
        [bytes(__import__("cramjam").snappy.compress_raw(d[i:i + 32 * 1024]))
         for i in range(0, len(d), 32 * 1024)])),
    "snappy-raw": (SNAPPY, lambda d: bytes(__import__("cramjam").snappy.compress_raw(d))),
    "lz4": (LZ4, lambda d: __import__("lz4.frame").frame.compress(
        d, block_size=__import__("lz4.frame").frame.BLOCKSIZE_MAX64KB, block_linked=False)),
    "zstd": (ZSTD, lambda d: __import__("zstandard").ZstdCompressor(
        write_content_size=False).compress(d)),
}


@pytest.mark.parametrize("name", sorted(LEGIT))
def test_output_near_the_limit_is_held_once(tmp_path, name):
    codec, compress = LEGIT[name]
    data = _text(NEAR)
    path = tmp_path / name
    path.write_bytes(compress(data))
    limit = NEAR + MiB
    res = inflate_in_child(path, codec, limit=limit)
    assert res["error"] is None and res["size"] == NEAR, res
    assert res["peak"] < limit + SLACK, res


# -- nested compression and the command line --------------------------------------------------

CLI = r"""
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, (1500 * 1024 * 1024,) * 2)
sys.argv = ["kafkalog"] + sys.argv[1:]
try:
    runpy.run_module("kafkalog_cli", run_name="__main__")
except SystemExit as e:
    rc = e.code
with open("/proc/self/status") as f:
    hwm = [line.split()[1] for line in f if line.startswith("VmHWM:")][0]
sys.stderr.write("VMHWM %s\n" % hwm)
sys.exit(rc)
"""


def run_cli(*args):
    """``kafkalog ARGS`` in a child capped at 1.5 GB of address space; returns (exit status,
    stdout, stderr without the last line, peak resident bytes). VmHWM, unlike ru_maxrss, starts
    afresh at execve, so it measures the child alone."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc")
    p = subprocess.run([sys.executable, "-c", CLI, *map(str, args)], capture_output=True,
                       timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    err, _, hwm = err.rpartition("VMHWM ")
    return p.returncode, p.stdout.decode("utf-8", "replace"), err, int(hwm) * 1024


def _legacy_message(magic, offset, value, codec=0):
    body = struct.pack(">bb", magic, codec)
    if magic == 1:
        body += struct.pack(">q", kg.T0)
    body += struct.pack(">ii", -1, len(value)) + value
    entry = bytearray(struct.pack(">qiI", offset, len(body) + 4, 0) + body)
    return bytes(kg.fix_legacy_crc(entry))


@pytest.mark.parametrize("magic", [0, 1])
def test_nested_legacy_wrapper_is_not_inflated(tmp_path, magic):
    """A gzip wrapper whose inner message is itself a gzip wrapper around a 1 GiB bomb: Kafka
    refuses compressed inner messages; we must too, without inflating the inner bomb."""
    inner = _legacy_message(magic, 0, gzip_bomb(), codec=GZIP)
    outer = kg.legacy_wrapper(magic, inner, 0, "gzip", lambda d: zlib.compress(d, 9, wbits=31))
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(outer)
    # limit 16 MiB: the outer wrapper (about 1 MB inflated) is read, the inner bomb is not
    code, out, err, peak = run_cli("dump", "--deep-iteration", "--max-message-size", MiB, log)
    assert code == 1, (code, out, err)
    assert "Traceback" not in err, err
    assert "inner messages must not be compressed" in out + err, (out, err)
    assert peak < 100 * MiB, peak


@pytest.mark.parametrize("name", ["gzip", "gzip-members", "snappy-xerial", "lz4", "zstd",
                                  "zstd-declared-size", "zstd-window-128MiB"])
def test_dump_refuses_a_v2_bomb(bomb_dir, tmp_path, name):
    """End to end: a v2 batch whose records area is a 1 GiB bomb, dumped deep with the default
    limit (16 x 5 MiB of inflated records), in a process capped at 1.5 GB of address space: no
    traceback, the refusal said, peak memory about the limit."""
    codec, _, _ = BOMBS[name]
    body = _bomb_file(bomb_dir, name).read_bytes()
    plain = kg.v2_batch([kg.Rec(None, b"x")])
    batch = kg.recompress_v2(plain, kg.CODEC_NAMES[codec], lambda records: body)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(batch)
    code, out, err, peak = run_cli("dump", "--deep-iteration", log)
    # its CRC holds: a valid batch whose records are not decoded (said on stderr), exit 0
    assert code == 0, (code, out, err)
    assert "Traceback" not in err, err
    assert "inflate past" in err, (out, err)
    # A zstd frame may ask for the 128 MiB window zstd-jni accepts (a level-22 producer writes
    # one); the decoder then touches as much of its window as it writes, so a bomb in such a
    # frame costs up to twice the limit.
    bound = 2 * 80 * MiB if name == "zstd-window-128MiB" else 80 * MiB
    assert peak < bound + 60 * MiB, peak


# -- a zstd stream that ends inside a frame -------------------------------------------------------

def _zstd_block_ends(frame):
    """Offsets in ``frame`` where each of its blocks ends (RFC 8878 block headers)."""
    fhd = frame[4]
    single = fhd & 0x20
    fcs = (0, 2, 4, 8)[fhd >> 6] or (1 if single else 0)
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + fcs
    ends = []
    while True:
        header = int.from_bytes(frame[pos:pos + 3], "little")
        pos += 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)
        ends.append(pos)
        if header & 1:
            return ends


@pytest.mark.parametrize("checksum", [False, True])
def test_zstd_stream_ending_inside_a_frame_is_corrupt(checksum):
    """zstd-jni, which Kafka reads with, fails on a source that ends before its frame does
    ("truncated source"); the zstandard decoder instead returns what it has. A cut anywhere
    inside a frame, even right after a complete block, must be reported as corrupt, not read
    as fewer records; whole frames (one, several, after a skippable frame) read in full."""
    import zstandard
    from kafkalog_cli.format import codecs
    from kafkalog_cli.format.errors import CorruptRecordError
    data = _text(600 * 1024) + os.urandom(300 * 1024)  # several blocks of each kind
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False,
                                     write_checksum=checksum).compress(data)
    ends = _zstd_block_ends(frame)
    assert len(ends) > 3 and ends[-1] == len(frame) - (4 if checksum else 0)
    inflater = codecs.Inflater()
    skippable = struct.pack("<II", 0x184D2A5A, 5) + b"hello"
    for whole, expected in ((frame, data), (frame * 3, data * 3), (skippable + frame, data)):
        assert bytes(inflater.inflate(ZSTD, whole, 4 * len(data), 2)) == expected
    cuts = sorted(set(ends[:-1] + [e + 1 for e in ends[:-1]] + [5, 9, len(frame) - 1]))
    for cut in cuts:
        assert zstandard.ZstdDecompressor().decompressobj().decompress(frame[:cut]) is not None
        with pytest.raises(CorruptRecordError, match="truncated"):
            inflater.inflate(ZSTD, frame[:cut], 4 * len(data), 2)
        with pytest.raises(CorruptRecordError):
            inflater.inflate(ZSTD, frame + frame[:cut], 4 * len(data), 2)


def test_a_level_22_zstd_batch_is_read(tmp_path):
    """A producer at zstd level 22 streams frames with no content size and a 128 MiB window
    (zstd-jni pledges no size), whatever the batch's size. Kafka reads them; so must we: a
    small batch in such a frame is decoded in full, its records those kafka-python reads."""
    import zstandard
    recs = [kg.Rec(b"k%d" % i, b"value %d" % i, kg.T0 + i) for i in range(50)]
    plain = kg.v2_batch(recs, 7)
    params = zstandard.ZstdCompressionParameters.from_level(22, window_log=27,
                                                             write_content_size=False)

    def compress(records):
        cctx = zstandard.ZstdCompressor(compression_params=params)
        return _stream(cctx, records)

    batch = kg.recompress_v2(plain, "zstd", compress)
    assert zstandard.get_frame_parameters(batch[61:]).window_size == 128 * MiB
    (kb,) = kg.kafka_python_read(batch)
    assert [r.value for r in kb.records] == [r.value for r in recs]
    log = tmp_path / "00000000000000000007.log"
    log.write_bytes(batch)
    code, out, err, peak = run_cli("dump", "--format", "json", "--deep-iteration", log)
    assert code == 0, (code, out, err)
    values = [json.loads(line).get("value") for line in out.splitlines()
              if json.loads(line)["type"] == "record"]
    assert values == [r.value.decode() for r in recs]
    assert peak < 100 * MiB, peak


def _stream(cctx, data):
    """One streamed frame, as zstd-jni's output stream writes it (no content size)."""
    obj = cctx.compressobj()
    return obj.compress(data) + obj.flush()
