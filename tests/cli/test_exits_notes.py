"""Exits and notes as a careful Unix tool gives them: every case a one-line
note or error on stderr and the documented exit status.

- `dump --from-offset N` past the log end: one note, exit 0 (an empty answer is not an error);
  a reversed range: one line, exit 2.
- `--from-timestamp`/`--to-timestamp` take ISO 8601 as well as epoch ms (no zone: UTC); a bad
  value is one line, exit 2.
- `verify-index`: a sealed segment's missing `.index` is a problem (exit 1, on stderr), the
  active segment's a note (exit 0, on stdout: stderr stays empty for cron).
- `dump` of a batch whose CRC fails: one line on stderr naming the file, position and offsets,
  stdout as kafka-dump-log.sh prints it, exit 1.
- `retain` without a policy: one line, exit 2; `retain --dry-run` exits 1 when it would delete
  (as `recover --dry-run` exits 1 when it would repair).
"""

import calendar
import datetime
import os
import re
import shutil

import pytest

import kafkagen as kg
from dumpcheck import REPO, assert_clean_exit2, dump, kafkalog

LOGDIR = os.path.join(REPO, "fixtures", "logdir")
# orders-0 of the fixtures: offsets 0-69, the record at offset n written at T0 + n seconds
T0 = 1704067200000  # 2024-01-01T00:00:00Z, computed here by hand: 19723 days * 86400000
RECORD = re.compile(r"^\| offset: (\d+) ")


@pytest.fixture
def logdir(tmp_path):
    d = str(tmp_path / "logdir")
    shutil.copytree(LOGDIR, d)
    return d


def record_offsets(res):
    return [int(m.group(1)) for line in res.lines for m in [RECORD.match(line)] if m]


# -- dump: past the log end, reversed ranges ------------------------------------------------------

def test_from_offset_past_the_log_end_is_a_note_and_exit_0(logdir):
    d = os.path.join(logdir, "orders-0")
    res = dump("--deep-iteration", "--from-offset", 99999, d)
    assert res.code == 0, res
    assert record_offsets(res) == []
    assert res.err_lines == ["kafkalog: %s: no record at or after offset 99999: the log ends at "
                             "offset 70" % d], res
    # exactly at the log end offset (the next offset to be written): nothing there either
    res = dump("--from-offset", 70, d)
    assert res.code == 0, res
    assert res.err_lines == ["kafkalog: %s: no record at or after offset 70: the log ends at "
                             "offset 70" % d], res
    # the last record: no note
    res = dump("--deep-iteration", "--from-offset", 69, d)
    assert (res.code, res.err, record_offsets(res)) == (0, "", [69]), res


def test_from_offset_past_the_end_of_a_log_directory_one_note_per_partition(logdir):
    res = dump("--from-offset", 99999, logdir)
    assert res.code == 0, res
    ends = {"events-0": 110, "legacy-0": 45, "metrics-0": 600, "orders-0": 70, "orders-1": 16}
    assert sorted(res.err_lines) == sorted(
        "kafkalog: %s: no record at or after offset 99999: the log ends at offset %d"
        % (os.path.join(logdir, p), end) for p, end in ends.items()), res


def test_from_offset_past_the_end_of_a_segment_file(logdir):
    seg = os.path.join(logdir, "orders-0", kg.segment_name(0))
    res = dump("--from-offset", 50, seg)
    assert res.code == 0, res
    assert res.err_lines == ["kafkalog: %s: no record at or after offset 50: the segment ends at "
                             "offset 42" % seg], res


@pytest.mark.parametrize("low,high", [("10", "5"), ("2024-01-02", "2024-01-01T23:59:59Z")])
def test_a_reversed_range_is_one_line_exit_2(logdir, low, high):
    option = "offset" if low.isdigit() else "timestamp"
    res = dump("--from-" + option, low, "--to-" + option, high, os.path.join(logdir, "orders-0"))
    assert_clean_exit2(res)
    assert "--from-%s %s" % (option, low) in res.err and "no record can match" in res.err, res


# -- dump: ISO 8601 timestamps --------------------------------------------------------------------

def utc_ms(*fields):
    return calendar.timegm(datetime.datetime(*fields).utctimetuple()) * 1000


@pytest.mark.parametrize("text,ms", [
    ("2024-01-01", T0),
    ("2024-01-01T00:00:42Z", T0 + 42000),
    ("2024-01-01T00:00:42z", T0 + 42000),
    ("2024-01-01 00:00:42", T0 + 42000),            # no zone: UTC
    ("2024-01-01T00:00:42", T0 + 42000),
    ("2024-01-01T01:00:42+01:00", T0 + 42000),
    ("2024-01-01T01:00:42+0100", T0 + 42000),
    ("2023-12-31T23:00:42-01", T0 + 42000),
    ("2024-01-01T00:00:41.5Z", T0 + 41500),
    ("2024-01-01T00:00:41,999999Z", T0 + 41999),
    ("2024-01-01T00:01Z", T0 + 60000),
])
def test_iso_timestamps_select_as_their_epoch_ms(logdir, text, ms):
    assert ms == utc_ms(2024, 1, 1) + (ms - T0)  # T0 as the calendar computes it
    d = os.path.join(logdir, "orders-0")
    for option in ("--from-timestamp", "--to-timestamp"):
        by_iso = dump("--deep-iteration", option, text, d)
        by_ms = dump("--deep-iteration", option, ms, d)
        assert by_iso.code == 0, by_iso
        assert (by_iso.out, by_iso.err) == (by_ms.out, by_ms.err)
        assert record_offsets(by_iso)


def test_iso_range_in_a_log_directory(logdir):
    res = dump("--deep-iteration", "--from-timestamp", "2024-01-01T00:00:42Z",
               "--to-timestamp", "2024-01-01T00:00:45Z", os.path.join(logdir, "orders-0"))
    assert res.code == 0, res
    assert record_offsets(res) == [42, 43, 44, 45]


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01", "2024-02-30", "2024-01-01T25:00Z",
                                  "2024-01-01T10:00+24:00", "1.5", "", "2024-1-1"])
@pytest.mark.parametrize("option", ["--from-timestamp", "--to-timestamp"])
def test_a_bad_timestamp_is_one_line_exit_2(logdir, option, text):
    res = dump(option, text, os.path.join(logdir, "orders-0"))
    assert_clean_exit2(res)
    assert res.err.startswith("kafkalog: %s %r: " % (option, text)), res


def test_help_says_which_zone_a_time_without_one_is_in():
    res = dump("--help")
    assert res.code == 0
    text = " ".join(res.out.split())
    assert "ISO 8601" in text and "without a zone is UTC" in text


# -- verify-index: a missing offset index ---------------------------------------------------------

def test_a_sealed_segments_missing_index_is_a_problem(logdir):
    d = os.path.join(logdir, "orders-0")
    index = os.path.join(d, kg.segment_name(0)[:-len(".log")] + ".index")
    os.unlink(index)
    res = kafkalog("verify-index", d)
    assert res.code == 1, res
    assert res.out == ""
    assert res.err_lines[0].startswith("%s: missing_index: " % index), res
    assert len(res.err_lines) == 1, res
    res = kafkalog("verify-index", "--sanity-only", d)   # the broker's sanity check fails too
    assert res.code == 1 and "missing_index" in res.err, res


def test_the_active_segments_missing_index_is_a_note(logdir):
    d = os.path.join(logdir, "orders-0")
    index = os.path.join(d, kg.segment_name(42)[:-len(".log")] + ".index")
    os.unlink(index)
    res = kafkalog("verify-index", "--format", "json", d)
    assert res.code == 0, res
    assert ('{"type": "note", "file": "%s", "kind": "missing_active_index"' % index
            in res.out), res
    res = kafkalog("verify-index", d)
    assert res.code == 0, res
    assert res.err == "", res
    assert res.out.startswith(index + ": note: ") and res.out.count("\n") == 1, res


@pytest.mark.parametrize("base", [0, 42])
def test_a_missing_time_index_is_a_note(logdir, base):
    """The broker creates a missing .timeindex empty (LogSegment.sanityCheck) and goes on; it
    was not mentioned at all."""
    d = os.path.join(logdir, "orders-0")
    tindex = os.path.join(d, kg.segment_name(base)[:-len(".log")] + ".timeindex")
    os.unlink(tindex)
    res = kafkalog("verify-index", d)
    assert res.code == 0, res
    assert res.err == "", res
    assert res.out.count("\n") == 1 and res.out.startswith(tindex + ": note: "), res
    assert "creates it empty" in res.out, res
    res = kafkalog("verify-index", "--format", "json", d)
    assert ('{"type": "note", "file": "%s", "kind": "missing_time_index"' % tindex
            in res.out), res


# -- dump: a batch whose CRC fails ----------------------------------------------------------------

def test_a_bad_crc_is_said_on_stderr(tmp_path):
    good = kg.v2_batch([kg.Rec(b"k", b"v%d" % i, kg.T0 + i) for i in range(3)], 0)
    bad = kg.v2_batch([kg.Rec(b"k", b"w%d" % i, kg.T0 + i) for i in range(3)], 3)
    data = bytearray(good + bad)
    data[len(good) + len(bad) - 2] ^= 1   # a byte of the last record's value
    path = kg.write_segment(str(tmp_path / "t-0"), 0, bytes(data))
    res = dump(path)
    assert res.code == 1, res
    # stdout as kafka-dump-log.sh prints it
    assert res.lines[-1].startswith("baseOffset: 3 lastOffset: 5 count: 3 ")
    assert res.lines[-1].endswith(" isvalid: false"), res
    assert res.err_lines == ["kafkalog: %s: the batch at position %d (offsets 3-5) is corrupt: "
                             "its CRC does not match its bytes" % (path, len(good))], res
    for fmt in ("json", "messages"):
        res = dump("--format", fmt, path)
        assert res.code == 1, res
        assert "position %d (offsets 3-5) is corrupt" % len(good) in res.err, res


# -- retain: a policy must be named; the dry run's exit status ------------------------------------

def test_retain_without_a_policy_is_a_usage_error(logdir):
    before = sorted(os.listdir(os.path.join(logdir, "orders-0")))
    for args in ([], ["--dry-run"], ["--roll-active"], ["--now", "0"], ["--format", "json"]):
        res = kafkalog("retain", *args, logdir)
        assert_clean_exit2(res)
        assert "no policy given" in res.err, res
    assert sorted(os.listdir(os.path.join(logdir, "orders-0"))) == before
    assert not os.path.exists(os.path.join(logdir, ".lock"))
    # explicit "no limit", or only finishing earlier deletions: accepted
    for args in (["--retention-ms", "-1"], ["--retention-bytes", "-1"],
                 ["--file-delete-delay-ms", "60000"]):
        res = kafkalog("retain", *args, logdir)
        assert res.code == 0, (args, res)
        assert ": deleted (" not in res.out, res


def test_retain_dry_run_exits_1_when_it_would_delete(logdir):
    d = os.path.join(logdir, "orders-0")
    before = sorted(os.listdir(d))
    res = kafkalog("retain", "--dry-run", "--log-start-offset", "42", d)
    assert res.code == 1, res
    assert "%s: would be deleted (log start offset 42)" % os.path.join(d, kg.segment_name(0)) \
        in res.out, res
    assert sorted(os.listdir(d)) == before
    # nothing would go: 0
    res = kafkalog("retain", "--dry-run", "--log-start-offset", "41", d)
    assert res.code == 0, res
    assert "would be deleted" not in res.out
    # the real run that deletes: 0 (expiry is not damage)
    res = kafkalog("retain", "--log-start-offset", "42", d)
    assert res.code == 0, res
    assert kg.segment_name(0) not in os.listdir(d)


def test_retain_and_recover_dry_runs_share_one_rule(logdir):
    """Exit 1 from a dry run means: the real run would change something."""
    d = os.path.join(logdir, "orders-0")
    with open(os.path.join(d, kg.segment_name(42)), "ab") as f:
        f.write(b"\0" * 7)   # a torn tail recover would cut
    assert kafkalog("recover", "--dry-run", d).code == 1
    assert kafkalog("retain", "--dry-run", "--retention-ms", "1", "--now", str(T0 + 10 ** 9),
                    d).code == 1


# -- the top-level help ---------------------------------------------------------------------------

def test_top_level_help_truncates_no_command_description():
    """Every command's line in `kafkalog --help` is whole (click cuts a long first sentence of
    a docstring to "..." unless the command has a short help that fits)."""
    from kafkalog_cli.cli.main import COMMANDS
    res = kafkalog("--help")
    assert res.code == 0, res
    lines = res.out[res.out.index("Commands:"):].splitlines()[1:]
    listed = [line.split()[0] for line in lines if line.strip()]
    assert listed == list(COMMANDS)
    for line in lines:
        assert "..." not in line, line
        assert len(line) <= 80, line


# -- licence and metadata -------------------------------------------------------------------------

def test_license_file_and_pyproject_metadata():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(REPO, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, "
                                    "January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert project["authors"] and project["keywords"] and project["urls"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639


# -- README: the kafka-dump-log.sh table, shell completion ----------------------------------------

# DumpLogSegments.DumpLogSegmentsOptions (apache/kafka tools/.../DumpLogSegments.java), and the
# --help and --version of CommandDefaultOptions
DUMP_LOG_SEGMENTS_OPTIONS = {
    "--files", "--print-data-log", "--deep-iteration", "--verify-index-only",
    "--index-sanity-check", "--value-decoder-class", "--key-decoder-class", "--max-message-size",
    "--max-bytes", "--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder",
    "--remote-log-metadata-decoder", "--share-group-state-decoder", "--skip-record-metadata",
    "--help", "--version"}


def readme_dump_log_table():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### `kafka-dump-log.sh` options and kafkalog's"):]
    section = section[:section.index("\n#")]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    out = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 2, row
        out[cells[0].strip("`").split()[0]] = cells[1]
    return out


def help_options(*command):
    res = kafkalog(*command, "--help")
    assert res.code == 0, res
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", res.out))


def test_the_kafka_dump_log_table_covers_every_option_and_holds():
    from kafkalog_cli.cli.main import COMMANDS
    table = readme_dump_log_table()
    assert set(table) == DUMP_LOG_SEGMENTS_OPTIONS
    for option, ours in table.items():
        spans = re.findall(r"`([^`]*)`", ours)
        commands = [s for s in spans if s.startswith("kafkalog ")]
        assert commands, (option, ours)
        for span in commands:
            words = span.split()
            if words[1].startswith("-"):   # a top-level option
                assert words[1] in help_options(), span
                continue
            assert words[1] in COMMANDS, span
            known = help_options(words[1])
            for word in words[2:]:
                if word.startswith("--"):
                    assert word in known, (span, word)
        # the same option name in kafkalog dump, where the row says so
        if "`kafkalog dump %s" % option in ours:
            assert option in help_options("dump"), option


def test_kafka_decoder_classes_are_accepted(logdir):
    d = os.path.join(logdir, "orders-1")
    by_class = dump("--value-decoder-class", "org.apache.kafka.tools.api.LongDecoder",
                    "--key-decoder-class", "kafka.serializer.StringDecoder", d)
    by_name = dump("--value-decoder", "long", "--key-decoder", "string", d)
    assert by_class.code == by_name.code == 0, by_class
    assert by_class.out == by_name.out and "payload: " in by_class.out
    res = dump("--value-decoder-class", "com.example.MyDecoder", d)
    assert res.code == 2 and "MyDecoder" in res.err, res


def run_completion(env, timeout=60):
    import subprocess
    import sys
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c",
                           "from kafkalog_cli.cli.main import main; main()"],
                          env=full, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts_as_the_readme_gives_them(shell):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert "_KAFKALOG_COMPLETE=%s_source kafkalog" % shell in f.read()
    p = run_completion({"_KAFKALOG_COMPLETE": shell + "_source"})
    assert p.returncode == 0, p
    assert "_KAFKALOG_COMPLETE=%s_complete" % shell in p.stdout, p.stdout


def test_bash_completion_completes_commands_and_options():
    p = run_completion({"_KAFKALOG_COMPLETE": "bash_complete", "COMP_WORDS": "kafkalog ver",
                        "COMP_CWORD": "1"})
    assert (p.returncode, p.stdout.split()) == (0, ["plain,verify-index"]), p
    p = run_completion({"_KAFKALOG_COMPLETE": "bash_complete",
                        "COMP_WORDS": "kafkalog dump --from-t", "COMP_CWORD": "2"})
    assert (p.returncode, p.stdout.split()) == (0, ["plain,--from-timestamp"]), p


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_in_a_real_bash(tmp_path):
    """The script the README sources, loaded in bash, completes `kafkalog du` to dump."""
    import subprocess
    import sys
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "kafkalog"
    exe.write_text("#!%s\nfrom kafkalog_cli.cli.main import main\nmain()\n" % sys.executable)
    exe.chmod(0o755)
    script = ('eval "$(_KAFKALOG_COMPLETE=bash_source kafkalog)"\n'
              'COMP_WORDS=(kafkalog du); COMP_CWORD=1\n'
              '_kafkalog_completion kafkalog\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p
    assert p.stdout.split() == ["dump"], p
