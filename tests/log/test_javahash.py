"""java.util.HashMap's iteration order (kafkalog_cli.log.javahash), the order of a producer
snapshot's entries. Small cases are worked out by hand from HashMap's rules; the orders of tree
bins (9 keys or more in one bucket of a table of 64 slots or more) were printed by OpenJDK 17's
HashMap (the program below, HASH_ORDER_JAVA); with a JDK installed, random puts and removals are
compared with a HashMap running now."""

import hashlib
import random
import shutil
import subprocess

import pytest

from kafkalog_cli.log.javahash import JavaHashOrder, java_hash_order, spread_hash

# java.util.HashMap<Long, V>: bucket = (h ^ h >>> 16) & (capacity - 1) with h = Long.hashCode
# (low 32 bits xor high 32 bits); 16 slots, doubled when the size passes 3/4 of them.


def test_hash_order_by_bucket_then_insertion():
    assert java_hash_order([]) == []
    assert java_hash_order([1, 0]) == [0, 1]
    assert java_hash_order([16, 0]) == [16, 0]          # same bucket: insertion order
    assert java_hash_order([0, 16]) == [0, 16]
    assert java_hash_order([0, 16, 0]) == [0, 16]       # put again: no change
    # 2^32 + 5: hashCode 5 ^ 1 = 4, before 5
    assert java_hash_order([5, (1 << 32) + 5]) == [(1 << 32) + 5, 5]
    # 0x10000: hashCode 0x10000, spread to 0x10001: bucket 1, after 0
    assert java_hash_order([0x10000, 0]) == [0, 0x10000]


def test_spread_hash_is_a_signed_int():
    assert spread_hash(5) == 5
    assert spread_hash(0x80000000) == -0x7FFF8000        # 0x80000000 ^ 0x8000
    assert spread_hash(-1) == 0                           # Long.hashCode(-1) is 0


def test_hash_order_after_resize():
    # 12 keys fit in 16 slots: 16 and 0 share bucket 0; the 13th key doubles the table.
    keys = [16, 0] + list(range(1, 11))
    assert java_hash_order(keys)[:2] == [16, 0]
    assert java_hash_order(keys + [11]) == list(range(12)) + [16]


def test_nine_in_a_bucket_of_a_small_table_double_it():
    # HashMap.treeifyBin on a table of fewer than 64 slots: a resize instead of a tree
    t = JavaHashOrder()
    for i in range(8):
        t.put(16 * i)
    assert t.capacity == 16 and t.order() == [16 * i for i in range(8)]
    t.put(128)
    assert t.capacity == 32
    assert t.order() == [0, 32, 64, 96, 128, 16, 48, 80, 112]


def test_removal_then_put_goes_last():
    t = JavaHashOrder()
    for k in (0, 16, 32):
        t.put(k)
    t.remove(0)
    t.remove(99)
    t.put(0)
    assert t.order() == [16, 32, 0]


# Printed by OpenJDK 17 (HASH_ORDER_JAVA): tree bins, from puts, and from puts then removals.
TREE_CASES = [
    ([str(64 * i) for i in range(20)],
     [448, 192, 0, 64, 128, 256, 320, 384, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 1088,
      1152, 1216]),
    ([str(1024 * i) for i in (7, 3, 11, 0, 19, 5, 14, 2, 9, 16, 1, 12, 18, 4, 8, 15, 6, 10,
                              17, 13)],
     [7168, 3072, 11264, 12288, 13312, 0, 19456, 5120, 6144, 4096, 14336, 2048, 9216, 10240,
      8192, 16384, 17408, 15360, 18432, 1024]),
    ([str((i * 37 % 25) * 128) for i in range(25)] + ["-1280", "-0", "-2560", "-384", "-3072"],
     [1536, 128, 256, 640, 512, 896, 768, 1408, 2944, 2816, 1152, 2688, 1024, 2432, 2304, 2176,
      2048, 1920, 1792, 1664]),
]


def _model(ops):
    table = JavaHashOrder()
    for op in ops:
        if op.startswith("-"):
            table.remove(int(op[1:]))
        else:
            table.put(int(op))
    return table


@pytest.mark.parametrize("ops,expected", TREE_CASES)
def test_tree_bins_as_openjdk_orders_them(ops, expected):
    assert _model(ops).order() == expected


HASH_ORDER_JAVA = """
import java.util.*;
public class HashOrder {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        Map<Long, Object> m = new HashMap<>();
        StringBuilder out = new StringBuilder();
        while (in.hasNext()) {
            String op = in.next();
            if (op.equals("new")) m = new HashMap<>();
            else if (op.equals("=")) {
                for (Long k : m.keySet()) out.append(k).append(' ');
                out.append('\\n');
            } else if (op.startsWith("-")) m.remove(Long.parseLong(op.substring(1)));
            else m.put(Long.parseLong(op), Boolean.TRUE);
        }
        System.out.print(out);
    }
}
"""


def _scenario(rnd):
    """Puts (and some removals) of producer ids: sequential blocks, large ids, ids sharing
    their low bits (long chains, tree bins, trees kept whole through resizes), ids of one
    hash (a tree ordered by the ids themselves)."""
    kind = rnd.randrange(6)
    n = rnd.choice([3, 12, 13, 25, 40, 100, 300])
    if kind == 0:
        start = rnd.randrange(1 << 20)
        keys = list(range(start, start + n))
    elif kind == 1:
        keys = [rnd.randrange(1 << 48) for _ in range(n)]
    elif kind == 2:
        keys = [rnd.randrange(1 << 12) << rnd.choice([4, 5, 6, 8]) for _ in range(n)]
    elif kind == 3:
        keys = [rnd.randrange(1 << 33) for _ in range(n)]
    elif kind == 4:   # a tree in bucket 0 among many other keys, hashes of both signs
        keys = ([rnd.randrange(1 << 20) for _ in range(n)]
                + [(rnd.randrange(1 << 9) << 22) | (rnd.randrange(2) << 31)
                   for _ in range(rnd.randrange(10, 60))])
    else:             # one hash: Long.hashCode of (a << 32 | a ^ h) is h
        h = rnd.randrange(1 << 31)
        keys = [(a << 32) | (a ^ h) for a in rnd.sample(range(1, 1 << 20), rnd.randrange(9, 40))]
    rnd.shuffle(keys)
    ops = []
    removals = rnd.choice([0, 0.1, 0.4, 0.8])
    for k in keys:
        ops.append(str(k))
        if rnd.random() < removals:
            ops.append("-%d" % rnd.choice(keys))
    return ops


def _scenarios():
    rnd = random.Random(13)
    return [ops for ops, _ in TREE_CASES] + [_scenario(rnd) for _ in range(400)]


def _lines(orders):
    return "".join("".join("%d " % k for k in order) + "\n" for order in orders)


# SHA-256 of what OpenJDK 17's HashMap printed for _scenarios() (HASH_ORDER_JAVA's output):
# without a JDK, the model's orders are held to it.
JAVA_ORDERS_SHA256 = "81c62e21335d0722ccd7e7ce9cf2531e91d22c3624a22e79a9409a10233e21e2"


def test_order_equals_the_recorded_java_orders():
    got = _lines(_model(ops).order() for ops in _scenarios())
    assert hashlib.sha256(got.encode()).hexdigest() == JAVA_ORDERS_SHA256


def test_order_equals_a_running_java_hashmap(tmp_path):
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java")
    scenarios = _scenarios()
    src = tmp_path / "HashOrder.java"
    src.write_text(HASH_ORDER_JAVA)
    stdin = " ".join("new " + " ".join(ops) + " =" for ops in scenarios)
    out = subprocess.run([java, str(src)], input=stdin, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert hashlib.sha256(out.encode()).hexdigest() == JAVA_ORDERS_SHA256
    lines = out.splitlines()
    assert len(lines) == len(scenarios)
    for ops, line in zip(scenarios, lines):
        assert _model(ops).order() == [int(k) for k in line.split()], ops
