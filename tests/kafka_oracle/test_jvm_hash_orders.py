"""The hash-table orders kafkalog dump prints Kafka's summaries and sets in, against the JVM's own
tables (tests/kafka/HashOrderProbe.java, run with Kafka 3.9.1's Scala 2.13 library and
kafka-clients): Scala 2.13's mutable.HashMap and mutable.HashSet[TopicPartition]
(format/jvmhash.py) and java.util.HashMap filled by computeIfAbsent (log/javahash.py), on
random keys, repeated calls, resizes and tree bins (keys with equal String hashes)."""

import itertools
import random
import subprocess

import pytest

import kafkajvm
from kafkalog_cli.format.jvmhash import ScalaHashTable, scala_string_map_order, topic_partition_hash
from kafkalog_cli.log.javahash import java_string_hash_order

pytestmark = pytest.mark.kafka

PROBE = kafkajvm.POM_DIR / "HashOrderProbe.java"


def _cases(seed):
    rng = random.Random(seed)
    colliding = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=5)]  # equal hashes
    for _ in range(150):
        n = rng.choice([1, 3, 11, 12, 13, 14, 24, 25, 26, 48, 49, 50, 100, 300])
        keys = ["/tmp/%s/%020d.%s" % (rng.choice(["a-0", "topic-x-3", "__consumer_offsets-7"]),
                                      rng.randrange(10 ** 6), rng.choice(["log", "index"]))
                for _ in range(n)]
        if rng.random() < 0.2:
            keys += rng.sample(colliding, rng.randrange(8, 32))
            rng.shuffle(keys)
        calls = [rng.choice(keys) for _ in range(rng.randrange(n, 2 * n + 1))]
        topics = [(rng.choice(["t", "orders", "x-y"]),
                   rng.sample(range(60), rng.choice([1, 2, 4, 5, 9, 17])))
                  for _ in range(rng.randrange(1, 5))]
        yield keys, calls, topics


def test_hash_orders_are_the_jvms(kafka_classpath):
    cases = list(_cases(23))
    lines = []
    for keys, calls, topics in cases:
        lines += ["M " + k for k in calls] + ["C " + k for k in calls]
        lines += ["S %s %s" % (t, ",".join(map(str, ps))) for t, ps in topics]
        lines.append("P")
    proc = subprocess.run([kafkajvm.java(), "-cp", kafkajvm.classpath("3.9.1"), str(PROBE)],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.splitlines()
    assert len(out) == 3 * len(cases)
    for i, (keys, calls, topics) in enumerate(cases):
        scala_map, scala_set, java_map = (line[2:].split("\x01") if line[2:] else []
                                          for line in out[3 * i:3 * i + 3])
        assert scala_map == scala_string_map_order(calls), i
        assert java_map == java_string_hash_order(calls, compute=True), i
        table = ScalaHashTable()
        for topic, partitions in topics:
            table.add_all([(topic, p) for p in partitions],
                          lambda tp: topic_partition_hash(*tp))
        assert scala_set == ["%s-%d" % tp for tp in table.order()], i
