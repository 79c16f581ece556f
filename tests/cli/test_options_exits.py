"""The same options and exits across commands.

- `dump --format text` is `--format kafka` (every other command names its text `text`).
- A mistyped command gets the nearest command named, as a mistyped option does; exit 2.
- `roll --dry-run` says what would be rolled and changes no file; `roll --format json` is one
  summary object of the schema.
- `verify-index` writes nothing on stderr when it finds no problem: the notes (the active
  segment's missing index, as a broker leaves it) go to stdout, which the README's cron recipe
  discards, so that cron mails only problems.
"""

import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest

from dumpcheck import REPO, files_in, kafkalog

from kafkalog_cli.schema import load

LOGDIR = os.path.join(REPO, "fixtures", "logdir")
VALIDATOR = jsonschema.Draft202012Validator(load())


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(LOGDIR, d)
    return str(d)


# -- dump --format text -----------------------------------------------------------------------

def test_dump_format_text_is_the_kafka_text():
    part = os.path.join(LOGDIR, "orders-0")
    text = kafkalog("dump", "--format", "text", "--print-data-log", part)
    kafka = kafkalog("dump", "--format", "kafka", "--print-data-log", part)
    assert text.code == 0, text
    assert (text.out, text.err) == (kafka.out, kafka.err)
    assert "--format text" not in text.err
    assert "baseOffset: 0 lastOffset: 9" in text.out


# -- a mistyped command ------------------------------------------------------------------------

def _run(*args):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *args], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("typed, meant", [("describ", "describe"), ("verify-idex", "verify-index"),
                                          ("rool", "roll")])
def test_a_mistyped_command_names_the_nearest(typed, meant):
    code, out, err = _run(typed, LOGDIR)
    assert code == 2, err
    assert out == ""
    assert "Error: No such command '%s'. Did you mean '%s'?" % (typed, meant) in err.splitlines()
    assert "Traceback" not in err


def test_a_command_like_no_other_is_named_alone():
    code, _, err = _run("zzzz")
    assert code == 2
    assert err.splitlines()[-1] == "Error: No such command 'zzzz'."


# -- roll --dry-run and --format json ---------------------------------------------------------

def test_roll_dry_run_changes_nothing(logdir):
    part = os.path.join(logdir, "orders-0")
    before = files_in(part)
    res = kafkalog("roll", "--dry-run", part)
    assert res.code == 0, res
    assert res.out == ("%s: 00000000000000000042.log would be sealed; new active segment "
                       "00000000000000000070.log would be created\n" % part), res
    assert res.err == ""
    assert files_in(part) == before
    assert sorted(os.listdir(part)) == sorted(before)
    res = kafkalog("roll", "--dry-run", "--if-bytes", "100000000", part)
    assert res.code == 0, res
    assert res.out == ("%s: would not be rolled: the active segment holds 925 bytes, fewer than "
                       "100000000\n" % part), res
    assert files_in(part) == before


def _summary(res):
    lines = res.out.splitlines()
    assert len(lines) == 1, res
    obj = json.loads(lines[0])
    errors = [e.message for e in VALIDATOR.iter_errors(obj)]
    assert not errors, (obj, errors)
    return obj


def test_roll_format_json(logdir):
    part = os.path.join(logdir, "orders-0")
    before = files_in(part)
    common = {"type": "summary", "command": "roll", "topic": "orders", "partition": 0,
              "directory": part}
    res = kafkalog("roll", "--dry-run", "--format", "json", part)
    assert res.code == 0, res
    assert _summary(res) == dict(common, rolled=True, sealed="00000000000000000042.log",
                                 active="00000000000000000070.log", activeBaseOffset=70,
                                 reason=None, dryRun=True)
    assert files_in(part) == before
    res = kafkalog("roll", "--format", "json", part)
    assert res.code == 0, res
    assert _summary(res) == dict(common, rolled=True, sealed="00000000000000000042.log",
                                 active="00000000000000000070.log", activeBaseOffset=70,
                                 reason=None, dryRun=False)
    assert os.path.getsize(os.path.join(part, "00000000000000000070.log")) == 0
    res = kafkalog("roll", "--format", "json", part)
    assert res.code == 0, res
    assert _summary(res) == dict(common, rolled=False, sealed=None,
                                 active="00000000000000000070.log", activeBaseOffset=70,
                                 reason="the active segment is empty", dryRun=False)


# -- verify-index: quiet on stderr when all is well --------------------------------------------

def test_verify_index_notes_stay_off_stderr(logdir):
    """The active segment's missing .index (a broker's ordinary state) is a note: exit 0 and
    nothing on stderr; the note on stdout. A sealed segment's is a problem, on stderr."""
    part = os.path.join(logdir, "orders-0")
    active_index = os.path.join(part, "00000000000000000042.index")
    os.unlink(active_index)
    res = kafkalog("verify-index", logdir)
    assert res.code == 0, res
    assert res.err == "", res
    assert res.out.startswith(active_index + ": note: the active segment "), res
    # as the README's cron recipe runs it: stdout discarded, nothing left to mail
    code, out, err = _run("verify-index", logdir)
    assert (code, err) == (0, "")
    sealed_index = os.path.join(part, "00000000000000000000.index")
    os.unlink(sealed_index)
    res = kafkalog("verify-index", logdir)
    assert res.code == 1, res
    assert res.err.splitlines() == [res.err.splitlines()[0]]
    assert res.err.startswith(sealed_index + ": missing_index: "), res
    assert active_index + ": note: " in res.out
