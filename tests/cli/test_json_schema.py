"""Every command's ``--format json`` against kafkalog_cli/schema/output.schema.json (the README's
"JSON output" vocabulary), validated with jsonschema, on the shipped fixtures and on partitions
written here by kafkagen (an independent encoder); and dump's records fed back to ``append``
give the same bytes (the vocabulary is lossless)."""

import base64
import copy
import json
import os
import shutil

import jsonschema
import pytest

import kafkagen as kg
from appendcheck import kafkalog_in
from dumpcheck import REPO

from kafkalog_cli.schema import load

FIXTURES = os.path.join(REPO, "fixtures", "logdir")
VALIDATOR = jsonschema.Draft202012Validator(load())


def objects(res):
    return [json.loads(line) for line in res.out.splitlines()]


def check(res, command, codes=(0,)):
    """``res``'s stdout: JSON Lines, each object valid, the last the run's summary."""
    assert res.code in codes, res
    objs = objects(res)
    assert objs, res
    for o in objs:
        errors = list(VALIDATOR.iter_errors(o))
        assert not errors, (o, [e.message for e in errors])
    assert objs[-1]["type"] == "summary", objs[-1]
    if command is not None:
        assert objs[-1]["command"] == command, objs[-1]
    return objs


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(FIXTURES, d)
    return d


BINARY = b"\xde\xad\xbe\xef\x00\xff"


@pytest.fixture
def generated(tmp_path):
    """A partition with binary and text keys, headers (one null), a tombstone, a transaction
    and its marker, compressed batches."""
    d = tmp_path / "gen-3"
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k", b"text \xc3\xa9", kg.T0, (("h", b"v"), ("bin", BINARY), ("n", None))),
              kg.Rec(BINARY, BINARY, kg.T0 + 1), kg.Rec(None, None, kg.T0 + 2)])
    w.add_v2([kg.Rec(b"z%d" % i, b"{\"n\": %d}" % i, kg.T0 + 3) for i in range(5)], codec="gzip")
    data = w.data()
    data += kg.v2_batch([kg.Rec(b"t", b"in txn", kg.T0 + 4)], 8, producer_id=7,
                        producer_epoch=0, base_sequence=0, transactional=True)
    data += kg.control_batch(1, 9, 7, 0, 3, timestamp=kg.T0 + 5)
    kg.write_segment(d, 0, data)
    return d


def test_dump_of_every_fixture_partition_and_file(logdir):
    partitions = sorted(p for p in os.listdir(logdir) if os.path.isdir(logdir / p))
    for p in partitions:
        objs = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", logdir / p),
                     "dump")
        recs = [o for o in objs if o["type"] == "record"]
        topic, number = p.rsplit("-", 1)
        assert recs and all((o["topic"], o["partition"]) == (topic, int(number)) for o in recs)
    files = [logdir / n for n in sorted(os.listdir(logdir)) if n.endswith("checkpoint")]
    for p in partitions:
        files += [logdir / p / n for n in sorted(os.listdir(logdir / p))]
    objs = check(kafkalog_in("dump", "--format", "json", *files), "dump")
    kinds = {o["type"] for o in objs}
    assert {"indexEntry", "timeindexEntry", "offsetCheckpointEntry", "batch"} <= kinds, kinds


def test_dump_with_decoders(generated, logdir):
    for args in (["--key-decoder", "hex", "--value-decoder", "json"],
                 ["--key-decoder", "base64", "--value-decoder", "int"],
                 ["--print-data-log"], ["--skip-record-metadata", "--deep-iteration"]):
        objs = check(kafkalog_in("dump", "--format", "json", *args, generated), "dump")
        assert any(o["type"] == "record" for o in objs)
    check(kafkalog_in("dump", "--format", "json", "--deep-iteration", "--offsets-decoder",
                      logdir / "orders-0"), "dump")


def test_dump_of_a_damaged_segment(generated):
    seg = generated / kg.segment_name(0)
    with open(seg, "ab") as f:
        f.write(b"\x00" * 40)
    objs = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", seg), "dump",
                 codes=(1,))
    assert objs[-2]["type"] == "invalidBytes" and objs[-1]["invalidBytes"] == 40


def test_bytes_are_text_or_base64(generated):
    objs = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", generated), "dump")
    recs = [o for o in objs if o["type"] == "record"]
    b64 = {"base64": base64.b64encode(BINARY).decode()}
    assert (recs[0]["key"], recs[0]["value"]) == ("k", "text é")
    assert recs[0]["headers"] == [["h", "v"], ["bin", b64], ["n", None]]
    assert (recs[1]["key"], recs[1]["value"]) == (b64, b64)
    assert (recs[2]["key"], recs[2]["value"]) == (None, None)
    assert (recs[0]["topic"], recs[0]["partition"]) == ("gen", 3)


def test_dump_records_round_trip_through_append(generated, tmp_path):
    """dump's record objects, as they are, are append's jsonl input: the records written are
    the records read (keys, values, headers byte for byte)."""
    objs = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", generated), "dump")
    recs = [o for o in objs if o["type"] == "record" and "controlType" not in o]
    fields = ("key", "value", "headers", "timestamp")
    lines = "".join(json.dumps({f: o[f] for f in fields}) + "\n" for o in recs)
    target = tmp_path / "copy-0"
    res = kafkalog_in("append", "--input-format", "jsonl", "--format", "json", target,
                      input=lines)
    objs_append = check(res, "append")
    assert objs_append[-1]["records"] == len(recs)
    again = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", target), "dump")
    got = [o for o in again if o["type"] == "record"]
    assert [{f: o[f] for f in fields} for o in got] == [{f: o[f] for f in fields} for o in recs]
    assert {(o["topic"], o["partition"]) for o in got} == {("copy", 0)}


def test_verify_index_describe_transactions(logdir, generated):
    check(kafkalog_in("verify-index", "--format", "json", logdir), "verify-index")
    check(kafkalog_in("verify-index", "--format", "json", generated), "verify-index")
    objs = check(kafkalog_in("transactions", "--format", "json", logdir), "transactions")
    assert {"transaction", "partition"} <= {o["type"] for o in objs}
    check(kafkalog_in("transactions", "--format", "json", generated), "transactions")
    # describe's summary has no "command" yet (describe.py is not converted here)
    check(kafkalog_in("describe", "--format", "json", logdir), None)


def test_verify_index_problems(generated):
    """A problem object: camelCase fields (indexOffset...)."""
    index = generated / (kg.segment_name(0)[:-4] + ".index")
    with open(index, "wb") as f:
        f.write(b"\x00\x00\x00\x05\x00\x00\x00\x07")  # offset 5 at position 7: no batch there
    objs = check(kafkalog_in("verify-index", "--format", "json", generated), "verify-index",
                 codes=(1,))
    assert any(o["type"] == "problem" for o in objs)


def test_append_json(tmp_path):
    lines = "".join(json.dumps({"key": "k%d" % i, "value": {"n": i}}) + "\n" for i in range(3))
    objs = check(kafkalog_in("append", "--input-format", "jsonl", "--format", "json",
                             tmp_path / "t-0", input=lines), "append")
    assert (objs[-1]["firstOffset"], objs[-1]["lastOffset"], objs[-1]["records"]) == (0, 2, 3)
    assert (objs[-1]["topic"], objs[-1]["partition"]) == ("t", 0)


def test_recover_retain_quarantine(logdir):
    """recover of a log directory whose active segments were cut mid-batch (files moved to the
    quarantine, indexes and snapshots written, recovery points set), quarantine list, restore
    (dry and real) and purge (dry and real) of those runs, each ending with its summary,
    retain dry runs and a real one."""
    for p in ("orders-0", "events-0"):
        seg = max(n for n in os.listdir(logdir / p) if n.endswith(".log"))
        with open(logdir / p / seg, "r+b") as f:
            f.truncate(os.path.getsize(logdir / p / seg) - 30)
    check(kafkalog_in("recover", "--dry-run", "--format", "json", logdir), "recover",
          codes=(1,))
    objs = check(kafkalog_in("recover", "--format", "json", logdir), "recover", codes=(0, 1))
    assert {"moved", "quarantine", "recoveryPoint", "segment", "partition"} <= {
        o["type"] for o in objs}
    objs = check(kafkalog_in("quarantine", "list", "--format", "json", logdir),
                 "quarantine list")
    runs = objs[:-1]
    assert [o["type"] for o in runs] == ["quarantineRun"] * 2
    assert (objs[-1]["runs"], objs[-1]["partitions"], objs[-1]["files"], objs[-1]["bytes"]) == (
        2, 2, sum(r["files"] for r in runs), sum(r["bytes"] for r in runs))
    for dry in (["--dry-run"], []):
        objs = check(kafkalog_in("quarantine", "restore", *dry, "--format", "json",
                                 runs[0]["directory"], runs[0]["run"]), "quarantine restore")
        steps = [o for o in objs if o["type"] == "restoreStep"]
        assert steps and objs[-1]["steps"] == len(steps) and objs[-1]["dryRun"] == bool(dry)
        assert (objs[-1]["topic"], objs[-1]["run"]) == (runs[0]["topic"], runs[0]["run"])
    for dry in (["--dry-run"], []):
        objs = check(kafkalog_in("quarantine", "purge", *dry, "--older-than", "0", "--format",
                                 "json", logdir), "quarantine purge")
        purged = [o for o in objs if o["type"] == "purgedRun"]
        assert len(purged) >= 2 and objs[-1]["runs"] == len(purged)
        assert objs[-1]["bytes"] == sum(o["bytes"] for o in purged)
    # none left: the list is its summary alone
    objs = check(kafkalog_in("quarantine", "list", "--format", "json", logdir),
                 "quarantine list")
    assert len(objs) == 1 and objs[0]["runs"] == 0
    for args in (["--retention-ms", "1"], ["--retention-bytes", "1", "--roll-active"]):
        check(kafkalog_in("retain", "--dry-run", "--format", "json", *args, logdir), "retain",
              codes=(0, 1))
    objs = check(kafkalog_in("retain", "--retention-ms", "1", "--format", "json", logdir),
                 "retain")
    assert {"segment", "partition"} <= {o["type"] for o in objs}


# -- the schema itself refuses what the vocabulary does not have ---------------------------------

def _valid_objects(generated):
    objs = check(kafkalog_in("dump", "--format", "json", "--deep-iteration", generated), "dump")
    batch = next(o for o in objs if o["type"] == "batch")
    record = next(o for o in objs if o["type"] == "record")
    return batch, record, objs[-1]


@pytest.mark.parametrize("change", [
    ("batch", "rename", "isValid", "isvalid"),
    ("batch", "rename", "lastOffset", "last_offset"),
    ("batch", "drop", "topic", None),
    ("batch", "add", "base offset", 0),
    ("record", "rename", "value", "payload"),
    ("record", "set", "key", {"base64": "not base64!"}),
    ("record", "set", "key", {"b64": "AAAA"}),
    ("record", "set", "headers", [{"key": "h", "value": "v"}]),
    ("record", "set", "partition", "3"),
    ("summary", "add", "invalid_bytes", 0),
    ("summary", "drop", "command", None),
    ("summary", "set", "command", "quarantine"),
])
def test_schema_refuses_a_wrong_key(generated, change):
    batch, record, summary = _valid_objects(generated)
    which, how, key, arg = change
    obj = copy.deepcopy({"batch": batch, "record": record, "summary": summary}[which])
    assert VALIDATOR.is_valid(obj)
    if how == "rename":
        obj[arg] = obj.pop(key)
    elif how == "drop":
        del obj[key]
    else:
        obj[key] = arg
    assert not VALIDATOR.is_valid(obj), obj


def test_schema_refuses_an_unknown_type():
    assert not VALIDATOR.is_valid({"type": "records_not_decoded", "file": "x"})
    assert not VALIDATOR.is_valid({"file": "x"})


@pytest.mark.parametrize("command", [["recover", "--dry-run"],
                                     ["retain", "--dry-run", "--retention-ms", "1"]])
def test_recover_and_retain_notes(logdir, command):
    with open(logdir / "recovery-point-offset-checkpoint", "w") as f:
        f.write("garbage\n")  # not read: each command says so in a note
    res = kafkalog_in(*command, "--format", "json", logdir)
    assert any(o["type"] == "note" for o in objects(res)), res
    check(res, command[0], codes=(0, 1))


def test_quarantine_summaries_refused_without_their_counts():
    """The quarantine commands' summaries carry what each says (the schema requires it)."""
    good = [
        {"type": "summary", "command": "quarantine list", "partitions": 1, "runs": 1,
         "restored": 0, "files": 2, "bytes": 10, "problems": 0},
        {"type": "summary", "command": "quarantine restore", "topic": "t", "partition": 0,
         "directory": "/d/t-0", "run": "r", "steps": 3, "displacedRun": None, "dryRun": False},
        {"type": "summary", "command": "quarantine purge", "runs": 1, "bytes": 10,
         "dryRun": True},
    ]
    for obj in good:
        assert VALIDATOR.is_valid(obj), obj
        for key in obj:
            if key not in ("type", "command"):
                broken = {k: v for k, v in obj.items() if k != key}
                assert not VALIDATOR.is_valid(broken), broken
    assert not VALIDATOR.is_valid({"type": "restoreSummary", "topic": "t", "partition": 0,
                                   "directory": "/d/t-0", "run": "r", "steps": 3,
                                   "dryRun": False})
