"""kafkalog's snappy compression (format/snappy.py and its C mirror) against snappy-java, the
library Kafka's clients and broker compress with (its native C++ snappy): the same bytes for
each input, not only bytes it can read."""

import random
import subprocess

import pytest

from kafkalog_cli.format import encode
from kafkalog_cli.format.codecs import SNAPPY
from kafkalog_cli.format.snappy import compress_raw, compress_raw_python

pytestmark = pytest.mark.kafka

JAVA = """
import java.io.*; import java.nio.file.*;
import org.xerial.snappy.Snappy; import org.xerial.snappy.SnappyOutputStream;
public class SnappyHex { public static void main(String[] a) throws Exception {
  for (String f : a) {
    byte[] in = Files.readAllBytes(Paths.get(f));
    ByteArrayOutputStream framed = new ByteArrayOutputStream();
    try (SnappyOutputStream s = new SnappyOutputStream(framed)) { s.write(in); }
    System.out.println(hex(Snappy.compress(in)) + " " + hex(framed.toByteArray()));
  } }
  static String hex(byte[] b) { StringBuilder s = new StringBuilder("x");
    for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); } }
"""


def _inputs():
    rng = random.Random(3)
    out = []
    for k in range(80):
        n = rng.choice([0, 1, 15, 16, 17, 100, 1000, 5000, 32768, 32769, 70000,
                        rng.randrange(150000)])
        kind = k % 4
        if kind == 0:
            data = rng.randbytes(n)
        elif kind == 1:
            data = bytes(rng.choice(b"ab") for _ in range(n))
        elif kind == 2:
            data = (b"hello kafka record %d " * 10000)[:n]
        else:
            data = b"".join(b"k%d-v%d-" % (rng.randrange(50), rng.randrange(9999))
                            + b"x" * rng.randrange(30) for _ in range(n // 10 + 1))[:n]
        out.append(data)
    return out


def test_snappy_bytes_are_snappy_javas(tmp_path, kafka_classpath):
    import kafkajvm
    inputs = _inputs()
    files = []
    for i, data in enumerate(inputs):
        path = tmp_path / ("in%d" % i)
        path.write_bytes(data)
        files.append(str(path))
    source = tmp_path / "SnappyHex.java"
    source.write_text(JAVA)
    proc = subprocess.run([kafkajvm.java(), "-cp", kafka_classpath, str(source), *files],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(inputs)
    for data, line in zip(inputs, lines):
        raw, framed = (bytes.fromhex(x[1:]) for x in line.split())
        assert compress_raw(data) == raw, len(data)
        assert compress_raw_python(data) == raw, len(data)
        assert encode.compress(SNAPPY, data) == framed, len(data)
