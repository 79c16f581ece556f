"""decode_metadata_record_text (the dump's path, JSON text written while decoding) against
json_text of decode_metadata_record's value (which tests/format/test_schema.py holds to the
independent encoder), for every KRaft metadata record type at every version, tagged fields
absent, present and mixed, and on truncated and corrupted bytes (the same errors)."""

import random

import pytest

import schemaenc
from kafkalog_cli.format import jackson, metadata_record
from kafkalog_cli.format.errors import CorruptRecordError

SPECS = schemaenc.all_specs()
METADATA = [name for name in sorted(SPECS) if SPECS[name]["_folder"] == "metadata"]
LOWEST_HIGHEST = [(name, v) for name in METADATA
                  for v in sorted(set(schemaenc.versions(SPECS[name]["validVersions"])))]
CASES = [(name, v) for name in METADATA
         for v in range(schemaenc.versions(SPECS[name]["validVersions"])[0],
                        schemaenc.versions(SPECS[name]["validVersions"])[1] + 1)]


def outcome(data, text):
    try:
        if text:
            return metadata_record.decode_metadata_record_text(data)
        type_name, version, value = metadata_record.decode_metadata_record(data)
        return type_name, version, jackson.json_text(value)
    except CorruptRecordError as e:
        return "error", str(e), str(e.__cause__)


@pytest.mark.parametrize("name,version", CASES)
def test_text_is_json_text_of_value(name, version):
    spec = SPECS[name]
    for tags in ("absent", "present", "mixed"):
        for seed in range(4):
            values = schemaenc.random_values(spec, version, random.Random(seed), tags)
            data = schemaenc.metadata_frame(spec, version, values)
            expected = outcome(data, False)
            assert expected[0] != "error"
            # twice: the first call compiles and caches, the second takes the fast path
            assert outcome(data, True) == expected
            assert outcome(memoryview(data), True) == expected


@pytest.mark.parametrize("name,version", LOWEST_HIGHEST)
def test_text_errors_as_value_path(name, version):
    spec = SPECS[name]
    data = schemaenc.metadata_frame(spec, version, schemaenc.random_values(
        spec, version, random.Random(7), "mixed"))
    metadata_record.decode_metadata_record_text(data)  # the fast path is in place
    rng = random.Random(3)
    broken = [data[:k] for k in range(len(data))] + [data + b"\0"]
    for _ in range(30):
        b = bytearray(data)
        b[rng.randrange(len(b))] = rng.randrange(256)
        broken.append(bytes(b))
    for d in broken:
        assert outcome(d, True) == outcome(d, False)
