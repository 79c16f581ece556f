"""Text of malformed UTF-8 as Kafka's own code makes it: ``Utils.utf8`` (Java's String decoder,
tests/kafka/Utf8Probe.java) against ``format.utf8.java_text`` on random and edge byte strings,
then DumpLogSegments against ``kafkalog dump`` (the C text path and the pure-Python one) on a
segment whose keys and payloads are those bytes. Java and Python's "replace" handler differ on
0xED 0xA0-0xBF; the broker's own traffic holds such bytes only by chance (a timestamp or an id in
a binary payload), so the dump oracle alone would meet them only now and then."""

import os
import random
import subprocess
import sys

import pytest

import kafkagen
import kafkajvm
from kafkalog_cli.format.utf8 import java_text

pytestmark = pytest.mark.kafka

PROBE = kafkajvm.POM_DIR / "Utf8Probe.java"

EDGES = [b"\xed\xa0\x80", b"\xed\xa0", b"\xed\xbfA", b"A\xed\xbf", b"\xed\x9f\xbf", b"\xed\x80",
         b"\xed\xa0\x80\x80", b"\xe0\x80\xaf", b"\xe0\xa0", b"\xf0\x90\x80", b"\xf4\x90\x80\x80",
         b"\xf0\x8f\xbf\xbf", b"\xc0\xaf", b"\xc2", b"\x80", b"\xff\xfe", b"\xe2\x82A", b"\xf0\x9f\x98",
         "h\u00e9llo \u2603 \U0001F600".encode()]


def _random_bytes(rng):
    def one():
        pick = rng.random()
        if pick < 0.3:
            return rng.randrange(0x80)
        if pick < 0.6:
            return rng.randrange(0x80, 0xC0)
        if pick < 0.8:
            return rng.choice((0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xC2, 0xDF))
        return rng.randrange(0xC0, 0x100)
    return bytes(one() for _ in range(rng.randrange(1, 9)))


def _cases():
    rng = random.Random(41)
    return EDGES + [_random_bytes(rng) for _ in range(20000)]


def test_text_is_javas(kafka_classpath):
    cases = _cases()
    proc = subprocess.run([kafkajvm.java(), "-cp", kafkajvm.classpath(), str(PROBE)],
                          input="\n".join(c.hex() for c in cases) + "\n", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = proc.stdout.splitlines()
    assert len(got) == len(cases)
    differing = [(c, java, java_text(c)) for c, java in zip(cases, got)
                 if java_text(c).encode("utf-16-be").hex() != java]
    assert not differing, differing[:5]
    assert java_text(b"\xed\xa0A") != b"\xed\xa0A".decode("utf-8", "replace")  # the case it is for


@pytest.mark.parametrize("impl", ["c", "py"])
def test_dump_prints_keys_and_payloads_as_kafka_does(kafka_classpath, tmp_path, impl):
    cases = EDGES + [_random_bytes(random.Random(43)) for _ in range(300)]
    recs = [kafkagen.Rec(key=c, value=b"v" + c + b"|" + cases[i - 1]) for i, c in enumerate(cases)]
    path = kafkagen.write_segment(tmp_path, 0, *(kafkagen.v2_batch(recs[i:i + 50], base_offset=i)
                                                 for i in range(0, len(recs), 50)))
    options = ["--deep-iteration", "--print-data-log"]
    rc, out, err = kafkajvm.dump_log_segments([path], options)
    env = dict(os.environ)
    if impl == "py":
        env["KAFKALOG_PURE_PYTHON"] = "1"
    ours = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--files", path,
                           "--kafka-format", "4.4", *options], capture_output=True, env=env)
    assert (rc, err) == (0, "")
    assert (ours.returncode, ours.stderr) == (0, b"")
    assert "\ufffd" in out
    assert ours.stdout.decode("utf-8") == out
