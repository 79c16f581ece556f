"""CRC-32C of the C module (kafkalog_cli/format/_crc32c.c) against two independent ones: the
`crc32c` package (the pure-Python path's, and kafka-python's C one) and kafka-python's own
pure-Python kafka.record._crc32c. Both of the module's paths are checked on this machine: the
CPU instructions one (crc32c, when ``hardware``) and the slicing-by-8 table (crc32c_table), on
every length up to 300, random lengths up to 100 KiB and the edges of the instruction path's
three-block steps (the GIL is released from 64 KiB),
buffers that start at every alignment, continued CRCs and the published check values.

The C module is kafkalog_cli's own, or, when KAFKALOG_C_MODULE_DIR names a directory, the
``_crc32c*.so`` built there (.ci/sanitize builds it with AddressSanitizer and
UndefinedBehaviorSanitizer and runs this file against it). Without it the tests are skipped.
"""

import array
import mmap
import os
import platform
import random
import subprocess
import sys

import pytest
from crc32c import crc32c as package_crc32c
from kafka.record._crc32c import crc as kafka_python_crc32c

import cmodules

c = cmodules.load("_crc32c", "kafkalog_cli.format")
pytestmark = pytest.mark.skipif(
    c is None, reason="_crc32c is not built (no compiler at install time, or none in "
                      "KAFKALOG_C_MODULE_DIR): nothing to compare")
PATHS = ["crc32c", "crc32c_table"]


def _cpu_has_crc_instructions():
    machine = platform.machine().lower()
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return None  # not Linux: not known here
    if machine in ("x86_64", "amd64"):
        return "sse4_2" in flags
    return None  # AArch64: used only where the compiler targets a CPU with them


def test_the_instructions_are_used_where_the_cpu_has_them():
    has = _cpu_has_crc_instructions()
    if has is None:
        pytest.skip("CPU flags not known on %s" % platform.machine())
    assert c.hardware is has


@pytest.mark.parametrize("path", PATHS)
def test_published_check_values(path):
    fn = getattr(c, path)
    # The CRC catalogue's check value for CRC-32/ISCSI, and RFC 3720 (iSCSI) B.4's examples.
    assert fn(b"123456789") == 0xE3069283
    assert fn(b"") == 0
    assert fn(bytes(32)) == 0x8A9136AA
    assert fn(b"\xff" * 32) == 0x62A8AB43
    assert fn(bytes(range(32))) == 0x46DD794E
    assert fn(bytes(range(31, -1, -1))) == 0x113FDB5C


@pytest.mark.parametrize("path", PATHS)
def test_every_short_length_at_every_alignment(path):
    fn = getattr(c, path)
    rng = random.Random(1)
    data = rng.randbytes(300 + 16)
    view = memoryview(data)
    for length in range(301):
        for start in range(16):
            chunk = view[start:start + length]
            assert fn(chunk) == package_crc32c(chunk), (length, start)
    for length in range(0, 301, 7):  # kafka-python's pure Python: a byte at a time
        chunk = data[3:3 + length]
        assert fn(chunk) == kafka_python_crc32c(chunk), length


@pytest.mark.parametrize("path", PATHS)
def test_random_lengths_up_to_100k(path):
    fn = getattr(c, path)
    rng = random.Random(2)
    data = rng.randbytes(100_000 + 16)
    # and the edges of the C code's three-block steps (3 x 256 and 3 x 8192 bytes) and of the
    # GIL's release (64 KiB)
    edges = [767, 768, 769, 1535, 1536, 24575, 24576, 24577, 24576 + 768, 49152, 49153]
    lengths = ([rng.randrange(100_001) for _ in range(60)] + edges
               + [65535, 65536, 65537, 100_000])
    for i, length in enumerate(lengths):
        start = rng.randrange(16)
        chunk = memoryview(data)[start:start + length]
        expected = package_crc32c(chunk)
        assert fn(chunk) == expected, (length, start)
        if i % 8 == 0:
            assert kafka_python_crc32c(bytes(chunk)) == expected


@pytest.mark.parametrize("path", PATHS)
def test_a_crc_continues_from_value(path):
    fn = getattr(c, path)
    rng = random.Random(3)
    for _ in range(200):
        data = rng.randbytes(rng.randrange(2000))
        cut = rng.randrange(len(data) + 1)
        assert fn(data[cut:], fn(data[:cut])) == fn(data) == package_crc32c(data)
        value = rng.choice([0, 1, 0xFFFFFFFF, rng.randrange(1 << 32)])
        assert fn(data, value) == package_crc32c(data, value)
        assert fn(data, value=value) == fn(data, value)
    # Out of range: the low 32 bits, unchecked, as the package reads them.
    for value in (1 << 32, -1, (1 << 64) + 5, -(1 << 70)):
        assert fn(b"ab", value) == package_crc32c(b"ab", value)


@pytest.mark.parametrize("path", PATHS)
def test_any_contiguous_buffer(path, tmp_path):
    fn = getattr(c, path)
    data = random.Random(4).randbytes(1000)
    expected = package_crc32c(data)
    assert fn(bytearray(data)) == expected
    assert fn(memoryview(data)) == expected
    assert fn(array.array("B", data)) == expected
    (tmp_path / "f").write_bytes(data)
    with open(tmp_path / "f", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert fn(m) == expected
    with pytest.raises(TypeError):
        fn("text")
    with pytest.raises(TypeError):
        fn(None)
    with pytest.raises(BufferError):
        fn(memoryview(bytearray(data))[::2])


def test_the_wrapper_picks_the_c_module_or_the_package():
    """format.crc: the C module unless KAFKALOG_PURE_PYTHON=1, when it is the package's; and
    with the C module the package is not even imported (its import is most of a start-up)."""
    if cmodules.MODULE_DIR:
        pytest.skip("kafkalog_cli's own build is not the one under test")
    code = ("import sys, kafkalog_cli.format.crc as m; "
            "print(m.crc32c.__module__, 'crc32c' in sys.modules, m.crc32c(b'123456789'))")
    env = dict(os.environ)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["kafkalog_cli.format._crc32c", "False", str(0xE3069283)]
    env["KAFKALOG_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[1:] == ["True", str(0xE3069283)]
    assert out[0].startswith("crc32c")
