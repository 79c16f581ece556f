#!/usr/bin/env python3
"""Long-run fuzzing of kafkalog's readers: the format layer, the auxiliary file readers, and the
CLI in-process on mutated partition directories; and of its writers (append, roll, retain,
recover + quarantine restore) in-process on recovered partitions with symlinks, FIFOs and stale
files planted at their temporary and lock names.

    .venv/bin/python fuzz/run.py                          # every target, 100,000 inputs each
    .venv/bin/python fuzz/run.py --targets format --runs 1000000
    .venv/bin/python fuzz/run.py --engine loop            # without atheris
    .venv/bin/python fuzz/run.py --replay fuzz/crashes/format-*.bin

Engines: ``atheris`` (coverage-guided libFuzzer, with kafkalog_cli instrumented and a custom
mutator that mixes libFuzzer's byte mutations with the structure-aware ones of
tests/fuzzlib.py: length fields at their extremes, mutations under the compression, CRCs fixed
up) when ``pip install -e '.[fuzz]'`` has installed it; else ``loop``, a plain random loop of the
fuzzlib mutations over the same seeds.

Each target runs in its own process, one after another (one core). Per target the summary gives
the inputs executed and the crashes found, unique by exception type and the innermost
kafkalog_cli frame; each crash's first input is saved under fuzz/crashes/ (``--replay`` runs
saved inputs again and prints the traceback). A crash is any exception but the documented
ones (CorruptRecordError, LimitExceededError, FileFormatError, OSError), an invariant of
tests/fuzzlib.py that does not hold, an exit status of the CLI other than 0, 1 and 2, a
read-only command that changes a byte, a recover that loses a byte or whose second run has
something to do.
"""

import argparse
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, REPO)

CRASH_DIR = os.path.join(HERE, "crashes")
TARGETS = ("format", "aux", "cli", "writers")
MAX_LEN = 1024 * 1024
CLI_COMMANDS = (
    ("dump", "--deep-iteration", "--print-data-log"),
    ("dump", "--format", "messages", "--print-data-log", "--timestamps", "iso"),
    ("dump", "--format", "json", "--deep-iteration", "--print-data-log", "--value-decoder", "json"),
    ("dump", "--skip-invalid", "--deep-iteration", "--kafka-format", "4.3",
     "--key-decoder", "long"),
    ("dump", "--from-offset", "5", "--to-offset", "60"),
    ("dump", "--from-timestamp", "1700000000010", "--to-timestamp", "1900000000000",
     "--format", "json", "--timestamps", "iso"),
    ("dump", "--max-bytes", "3000", "--value-decoder", "int", "--skip-record-metadata"),
    ("dump", "--verify-index-only"),
    ("dump", "--index-sanity-check", "--format", "json"),
    ("verify-index", "--format", "json"),
    ("verify-index", "--sanity-only"),
    ("recover", "--dry-run", "--format", "json"),
    ("recover",),
    ("recover",),
    ("c-vs-python", "dump"),
    ("c-vs-python", "dump", "--deep-iteration", "--print-data-log", "--format", "messages"),
    ("c-vs-python", "dump", "--cluster-metadata-decoder"),
    # templates: {B} a byte count, {O} {O2} offsets, {T} a timestamp, {M} a message size,
    # {I} an index interval, all drawn from the input's parameter bytes
    ("dump", "--max-bytes", "{B}", "--deep-iteration"),
    ("dump", "--from-offset", "{O}", "--to-offset", "{O2}", "--deep-iteration", "--format", "json"),
    ("dump", "--from-timestamp", "{T}", "--format", "messages"),
    ("dump", "--to-timestamp", "{T}", "--deep-iteration"),
    ("dump", "--max-message-size", "{M}", "--deep-iteration", "--format", "json"),
    ("dump", "--base-offset", "{O}", "--deep-iteration", "{LOG}"),
    ("dump", "--files", "{LOGS}", "--skip-invalid"),
    ("verify-index", "--max-message-size", "{M}"),
    ("recover", "--index-interval-bytes", "{I}"),
    ("recover", "--max-message-size", "{M}"),
)


class Crash(Exception):
    """An invariant that does not hold (not an exception of the code under test)."""


# -- targets ---------------------------------------------------------------------------------------
#
# A target is a class with ``seeds()`` (initial inputs, bytes) and ``run(data)`` (one input: raise
# to report a crash). Inputs are plain bytes, so that libFuzzer can mutate them.

class FormatTarget:
    """Segment bytes through the format layer: scan, batch headers, records of every format and
    codec, control records. First byte: bit 0 the pure-Python decoder, bit 1 resync, bit 2 the
    C decoder's records compared with the pure-Python decoder's (same records or same error
    class), bit 3 the default bounds (5 MiB records, 80 MiB batches) instead of small ones
    (16 KiB, 64 KiB), with seeds of large batches (about 5 MiB inflated) for it, bit 4
    kafka-python's reading compared (entries, offsets, CRC verdicts, v2 records; the CRCs
    are fixed up first so that the records are reached)."""

    name = "format"

    def __init__(self):
        import fuzzlib
        self.F = fuzzlib
        self.allowed = fuzzlib.allowed_exceptions()

    def seeds(self):
        out = []
        for name, data in sorted(self.F.log_seeds(bomb_size=256 << 10).items()):
            for flags in (0, 3, 4, 16):
                out.append(bytes([flags]) + data)
        for name, data in sorted(self.F.large_seeds().items()):
            for flags in (8, 12):
                out.append(bytes([flags]) + data)
        return out

    def run(self, data):
        if not data:
            return
        flags, body = data[0], data[1:]
        limits = (5 << 20, 80 << 20) if flags & 8 else (16 << 10, 64 << 10)
        try:
            if flags & 1:
                self.F.with_pure_python(self.F.read_log_bytes, body, limits[0], limits[1],
                                        bool(flags & 2))
            else:
                self.F.read_log_bytes(body, limits[0], limits[1], bool(flags & 2))
            if flags & 4:
                self.F.compare_implementations(body, *limits)
            if flags & 16:
                self.F.compare_with_kafka_python(self.F.fix_crcs(body), *limits)
        except AssertionError as e:
            raise Crash("invariant: %s" % (e,)) from e
        except self.allowed:
            pass


class AuxTarget:
    """Auxiliary files: first byte the kind (and whether to check it against a log), the rest
    the file's bytes, read by its reader and checked against a real segment."""

    name = "aux"

    def __init__(self, workdir):
        import fuzzlib
        self.F = fuzzlib
        self.dir = workdir
        self.log_path = os.path.join(workdir, "00000000000000000000.log")
        with open(self.log_path, "wb") as f:
            f.write(fuzzlib.busy_log())

    def seeds(self):
        out = []
        for (kind, _), data in sorted(self.F.aux_seeds().items()):
            k = self.F.AUX_KINDS.index(kind)
            out.append(bytes([k]) + data)
            out.append(bytes([k | 0x80]) + data)
        return out

    def run(self, data):
        if not data:
            return
        kind = self.F.AUX_KINDS[(data[0] & 0x7F) % len(self.F.AUX_KINDS)]
        path = os.path.join(self.dir, self.F.aux_file_name(kind))
        with open(path, "wb") as f:
            f.write(data[1:])
        probe = int.from_bytes(data[1:9].ljust(8, b"\0"), "big", signed=True)
        self.F.read_aux_file(kind, path, self.log_path if data[0] & 0x80 else None, probe)


class CliTarget:
    """The CLI in-process (``cli.main`` in standalone mode, SystemExit caught) on a partition
    (a fixture, or a kafka-python one of any format and codec) with one file replaced. Input:
    partition, file, command and directory-change choices (4 bytes), the command's numeric
    parameter (4 bytes), then the file's new bytes. The directory change (one input in four): a
    hostile or half-crashed directory's contents (fuzzlib.TREE_OPS: odd names, a symlink to
    /dev/zero, a FIFO, a copy under a lifecycle suffix, a splice of two files...)."""

    name = "cli"

    def __init__(self, workdir):
        import fuzzlib
        from kafkalog_cli.cli.main import cli
        self.F = fuzzlib
        self.cli = cli
        self.work = workdir
        self.parts = {}
        for p in ("events-0", "legacy-0", "metrics-0", "orders-0", "orders-1"):
            src = os.path.join(fuzzlib.FIXTURES, p)
            self.parts[p] = {n: open(os.path.join(src, n), "rb").read()
                             for n in sorted(os.listdir(src))}
        # and kafka-python partitions of every format and codec, KRaft control batches, nesting
        for v in fuzzlib.GENERATED_VARIANTS:
            src = fuzzlib.generated_partition(os.path.join(workdir, "gen", v + "-0"), v)
            self.parts[v + "-0"] = {n: open(os.path.join(src, n), "rb").read()
                                    for n in sorted(os.listdir(src))}
        shutil.rmtree(os.path.join(workdir, "gen"), ignore_errors=True)
        self.names = sorted(self.parts)
        self.devnull = open(os.devnull, "w")

    def seeds(self):
        out = []
        for i, p in enumerate(self.names):
            for j, (n, data) in enumerate(sorted(self.parts[p].items())):
                for c in range(len(CLI_COMMANDS)):
                    p = (i * 7919 + j * 104729 + c * 1299709).to_bytes(4, "big")
                    out.append(bytes([i, j, c, 0]) + p + data)
                    out.append(bytes([i, j, c, 0xC0 + (i + j + c) % 64]) + p + data)
        return out

    def _invoke(self, args, capture=False):
        outside = getattr(self, "_outside", None)
        before = self.F.snapshot_tree(outside) if outside and os.path.isdir(outside) else None
        result = self._invoke_plain(args, capture)
        if before is not None and self.F.snapshot_tree(outside) != before:
            raise Crash("%s changed a file outside the partition (through a symlink)" % args[0])
        return result

    def _invoke_plain(self, args, capture=False):
        raw = io.BytesIO() if capture else io.BufferedWriter(io.FileIO(os.devnull, "w"))
        out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, self.devnull
        try:
            self.cli.main(list(args), prog_name="kafkalog", standalone_mode=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        finally:
            sys.stdout, sys.stderr = saved
            try:
                out.flush()
            except Exception:
                pass
        text = raw.getvalue().decode("utf-8", "replace") if capture else None
        # closed here: click caches a wrapper of each stdout it met (a reference that would
        # keep every /dev/null open until the process runs out of descriptors)
        try:
            out.close()
        except Exception:
            pass
        return (code, text) if capture else code

    @staticmethod
    def _cut_reason(d):
        """The reason recover recorded for its first cut, without the numbers."""
        import re
        qroot = os.path.join(d, "kafkalog-quarantine")
        for run in sorted(os.listdir(qroot)) if os.path.isdir(qroot) else []:
            try:
                with open(os.path.join(qroot, run, "manifest.json")) as f:
                    for e in json.load(f).get("entries", []):
                        if e.get("what") == "cut":
                            return re.sub(r"-?[0-9]+", "N", str(e.get("why", "?")))[:80]
            except (OSError, ValueError):
                continue
        return "?"

    def _compare_builds(self, args):
        """The same command with the C fast paths and with the pure-Python code they mirror
        (switched off in this process, as tests/conftest.py does): identical output."""
        import kafkalog_cli.cli.render_kafka as render
        import kafkalog_cli.format.records as records
        import kafkalog_cli.format.metadata_record as metadata_record
        saved = render._kafkatext, records._speedups, metadata_record._schemawalk
        if saved == (None, None, None):
            return
        c = self._invoke(args, capture=True)
        render._kafkatext, records._speedups, metadata_record._schemawalk = None, None, None
        try:
            py = self._invoke(args, capture=True)
        finally:
            render._kafkatext, records._speedups, metadata_record._schemawalk = saved
        if c != py:
            cl, pl = c[1].splitlines(), py[1].splitlines()
            common = min(len(cl), len(pl))
            first = next((i for i in range(common) if cl[i] != pl[i]), common)
            raise Crash("C and pure-Python dumps differ: exit %r vs %r, first at line %d: %r vs %r"
                        % (c[0], py[0], first + 1, cl[first:first + 1], pl[first:first + 1]))

    @staticmethod
    def _params(p):
        return {"{B}": str(p % 70000), "{O}": str(p % 700), "{O2}": str((p >> 10) % 700),
                "{T}": str(1700000000000 + (p % 200000) - 100000 if p & 1 else -(p % 1000)),
                "{M}": str(1 + (p % 300000)), "{I}": str(p % 9000)}

    def _expand(self, cmd, d, p):
        """The command's arguments with its placeholders filled; the partition directory is
        the last argument unless the command names files."""
        values = self._params(p)
        logs = sorted(os.path.join(d, n) for n in os.listdir(d)
                      if n.endswith(".log")) if os.path.isdir(d) else []
        out = []
        named = False
        for a in cmd:
            if a == "{LOG}":
                out.append(logs[p % len(logs)] if logs else d)
                named = True
            elif a == "{LOGS}":
                out.append(",".join(logs) or d)
                named = True
            else:
                out.append(values.get(a, a))
        return out if named else out + [d]

    def _chosen(self, data, commands):
        """What an input's first 8 bytes choose: the partition, the file of it the input
        replaces, the command (one of ``commands``) and the command's numeric parameter."""
        part = self.names[data[0] % len(self.names)]
        names = sorted(self.parts[part])
        return (part, names[data[1] % len(names)], commands[data[2] % len(commands)],
                int.from_bytes(data[4:8], "big"))

    def describe(self, data):
        """What an input stands for, in words (for --replay)."""
        if len(data) < 8:
            return "too short: no input"
        part, target, cmd, p = self._chosen(data, CLI_COMMANDS)
        orig, new = self.parts[part][target], data[8:]
        changed = sum(1 for a, b in zip(orig, new) if a != b) + abs(len(orig) - len(new))
        tree = ""
        if data[3] >= 0xC0:
            ops = self.F.TREE_OPS[1:]
            tree = "; directory change %r on file #%d" % (ops[data[3] % len(ops)], data[1] + 1)
        return ("partition %s, %s replaced (%d -> %d bytes, ~%d bytes differ), command %s%s"
                % (part, target, len(orig), len(new), changed,
                   " ".join(self._expand(cmd, "<partition>", p)) if "{LOG" not in " ".join(cmd)
                   else " ".join(cmd), tree))

    def run(self, data):
        if len(data) < 8:
            return
        part, target, cmd, p = self._chosen(data, CLI_COMMANDS)
        files = self.parts[part]
        root = tempfile.mkdtemp(dir=self.work)
        self._outside = os.path.join(root, self.F.OUTSIDE)
        try:
            d = os.path.join(root, part)
            os.mkdir(d)
            for n, content in files.items():
                with open(os.path.join(d, n), "wb") as f:
                    f.write(data[8:] if n == target else content)
            if data[3] >= 0xC0:
                ops = self.F.TREE_OPS[1:]  # the directory changes (not "file")
                op = ops[data[3] % len(ops)]
                self.F.mutate_tree(d, [(op, data[1] + 1, data[2], data[3], [])])
            if cmd[0] == "c-vs-python":
                self._compare_builds(self._expand(cmd[1:], d, p))
                return
            args = self._expand(cmd, d, p)
            if cmd[0] != "recover" or "--dry-run" in cmd:
                before = self.F.snapshot_tree(d)
                code, out = self._invoke(args, capture=True)
                if code not in (0, 1, 2):
                    raise Crash("%s: exit status %r" % (" ".join(cmd), code))
                if "json" in cmd:
                    bad = self.F.json_lines_problems(out)
                    if bad:
                        raise Crash("%s: output is not JSON Lines: %s" % (" ".join(cmd), bad[0]))
                if self.F.snapshot_tree(d) != before:
                    raise Crash("%s changed the partition" % " ".join(cmd))
                return
            before = self.F.partition_contents(d)
            limit = []
            if "--max-message-size" in cmd:
                limit = ["--max-message-size", args[args.index("--max-message-size") + 1]]
            segments = self.F.kafka_segments(d)
            dumped = (self._invoke(["dump", "--deep-iteration"] + limit + segments)
                      if segments else None)
            code = self._invoke(args)
            if code not in (0, 1, 2):
                raise Crash("recover: exit status %r" % code)
            lost = self.F.check_nothing_lost(before, d)
            if lost:
                raise Crash("recover lost bytes: %s" % lost[0])
            cuts = self.F.check_cuts(before, d)
            if cuts:
                raise Crash("recover cut a valid batch (%s): %s" % (self._cut_reason(d), cuts[0]))
            if dumped == 0 and self.F.cut_entries(d):
                raise Crash("recover cuts what dump calls valid: %s" % self.F.cut_entries(d)[0])
            snap = self.F.snapshot_tree(d)
            code2 = self._invoke(args)
            # a run that met an error (exit 2: a file it leaves alone, a refusal) may meet it
            # again; the second run changes nothing either way
            allowed = (0, 2) if code == 2 else (0,)
            changed = self.F.snapshot_tree(d) != snap
            if code2 not in allowed or changed:
                raise Crash("second recover: exit %r, %s" % (
                    code2, "changed the partition" if changed else "nothing changed"))
            if code in (0, 1):
                logs = self.F.kafka_segments(d)
                if logs and self._invoke(["dump", "--deep-iteration"] + limit + logs) == 1:
                    raise Crash("dump finds invalid data in what recover kept")
                vcode, vout = self._invoke(["verify-index", "--format", "json"] + limit + [d],
                                           capture=True)
                if vcode == 1:
                    kinds = sorted({json.loads(line).get("kind", "?") for line in vout.splitlines()
                                    if '"problem"' in line})
                    # what recover keeps as the broker keeps it, and verify-index rightly calls a
                    # problem: epochs that go backwards in the batches themselves, and a leader
                    # epoch checkpoint the broker loads as it is (recover left its bytes alone)
                    kept = set()
                    if self.F.epochs_go_backwards(d):
                        kept.add("leader_epoch_backwards")
                    name = b"leader-epoch-checkpoint"
                    if name in before and self.F.partition_contents(d).get(name) == before[name]:
                        kept.add("leader_epoch_mismatch")
                    kinds = [k for k in kinds if k not in kept] if kinds else ["problems"]
                if vcode == 1 and kinds:
                    raise Crash("verify-index finds %s in what recover rebuilt: %s"
                                % ("+".join(kinds), vout[-300:]))
        finally:
            shutil.rmtree(root, ignore_errors=True)


WRITER_COMMANDS = (
    "append-lines", "append-lines-codec", "append-jsonl", "append-jsonl-txn", "roll",
    "roll-if-bytes", "retain-bytes", "retain-start-offset", "retain-logdir", "recover-restore",
)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WRITERS_TIMEOUT = 50  # seconds per input (a writer blocked on a FIFO is a crash)


def _timeout(signum, frame):
    raise Crash("timeout: the input took more than %d s (blocked?)" % WRITERS_TIMEOUT)


class WritersTarget(CliTarget):
    """The writing commands in-process on a partition made whole by one ``recover`` (a fixture
    or a kafka-python one, in a log directory of its own beside an "outside" tree), then
    damaged: one file replaced by the input's bytes and/or a plant (fuzzlib.PLANT_OPS: a
    symlink at a temporary name leading outside, a dangling symlink at a lock's name, a FIFO
    or a stale file at a temporary name) and/or one of the hostile directory changes. Then one
    writer: ``append`` (lines cut from the input's bytes, or JSON lines of an idempotent or
    transactional producer, small --segment-bytes so that it rolls), ``roll``, ``retain``
    (--retention-bytes or --log-start-offset, files removed at once), or ``recover`` followed
    by ``quarantine restore`` of each of its runs, newest first. Then ``recover`` twice.

    Input: partition, file, command, damage (bit 0: replace the file; bits 1-7: the plant or
    directory change, 0 none), 4 bytes of numeric parameters, then the file's bytes (also the
    append's input). Crashes: an exit status other than 0/1/2, an exception, a byte changed
    outside the log directory, a new or changed ``*.kafkalog-tmp`` after a command, a second
    recover that has something to do, a recover + restore that does not give the .log files
    back byte for byte."""

    name = "writers"
    # the plants (fuzzlib.PLANT_OPS) three times as often as each directory change
    DAMAGE = ("none",) + ("tmp-symlink-out", "lock-symlink", "tmp-fifo", "tmp-stale") * 3 + (
        "rename-junk", "lifecycle", "remove", "empty", "tmpfile", "shortname", "loglog",
        "devzero", "fifo")

    def __init__(self, workdir):
        super().__init__(workdir)
        # the fixtures and generated partitions made whole first: one recover each, in a log
        # directory of its own (the fixtures' with their checkpoints)
        self.logdir_files = {}
        prep = os.path.join(workdir, "prep")
        for name in self.names:
            logs = os.path.join(prep, name, "logs")
            part = os.path.join(logs, name)
            os.makedirs(part)
            if name in ("events-0", "legacy-0", "metrics-0", "orders-0", "orders-1"):
                for n in os.listdir(self.F.FIXTURES):
                    src = os.path.join(self.F.FIXTURES, n)
                    if os.path.isfile(src):
                        shutil.copyfile(src, os.path.join(logs, n))
            for n, content in self.parts[name].items():
                with open(os.path.join(part, n), "wb") as f:
                    f.write(content)
            self._invoke_plain(["recover", part])
            self.parts[name] = self._regular(part)
            self.logdir_files[name] = self._regular(logs)
        shutil.rmtree(prep, ignore_errors=True)
        self._stdin = b""

    @staticmethod
    def _regular(d):
        return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
                if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
                and not (n.startswith(".") and n.endswith(".lock"))}

    def seeds(self):
        out = []
        for i, p in enumerate(self.names):
            names = sorted(self.parts[p])
            for c in range(len(WRITER_COMMANDS)):
                j = (i + c) % len(names)
                for dmg in (0, 1 + 2 * (1 + (i + c) % 4), 2 * (1 + (c % (len(self.DAMAGE) - 1)))):
                    prm = (i * 7919 + j * 104729 + c * 1299709 + dmg * 15485863) & 0xFFFFFFFF
                    out.append(bytes([i, j, c, dmg]) + prm.to_bytes(4, "big")
                               + self.parts[p][names[j]])
        return out

    # -- running one command ------------------------------------------------------------------

    def _tmp_files(self):
        snap = self.F.snapshot_tree(self._logs)
        return {k: v for k, v in snap.items() if k.endswith(b".kafkalog-tmp")}

    def _invoke_writer(self, args, stdin=b""):
        """One command; every invariant that holds for any command checked around it."""
        outside = self.F.snapshot_tree(self._outside)
        tmps = self._tmp_files()
        saved_in = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        try:
            code, out = self._invoke_plain(args, capture=True)
        finally:
            sys.stdin = saved_in
        what = " ".join(a if not a.startswith(self._root) else "<%s>" % os.path.basename(a)
                        for a in args[:4])
        if code not in (0, 1, 2):
            raise Crash("%s: exit status %r" % (what, code))
        if self.F.snapshot_tree(self._outside) != outside:
            raise Crash("%s changed a file outside the log directory" % what)
        left = sorted(k for k, v in self._tmp_files().items() if tmps.get(k) != v)
        if left:
            raise Crash("%s left a temporary file: %s" % (what, left[0].decode("utf-8", "replace")))
        return code, out

    def _append_input(self, kind, body, p):
        if kind in ("append-lines", "append-lines-codec"):
            lines = body.split(b"\n")[:1 + (p >> 4) % 300]
            return b"\n".join(lines) + (b"\n" if p & 1 else b""), ["--input-format", "lines"]
        n = 1 + (p >> 4) % 60
        pid, epoch = 1000 + (p >> 10) % 3, (p >> 12) % 2
        seq0 = (p >> 13) % 4 if p & (1 << 15) else 0
        out = []
        for i in range(n):
            rec = {"value": body[i * 24:(i + 1) * 24].hex(), "producerId": pid,
                   "producerEpoch": epoch, "sequence": seq0 + i}
            if i == (p >> 16) % (n + 8):  # a duplicate, a gap or a new epoch now and then
                rec["sequence"] = (seq0 + i + (-1, 2, 0)[(p >> 20) % 3]) % (1 << 31)
                if (p >> 20) % 3 == 2:
                    rec["producerEpoch"] = epoch + 1
            if kind == "append-jsonl-txn":
                rec["transactional"] = True
                if i and i % (3 + (p >> 22) % 5) == 0:
                    out.append(json.dumps({"control": ("commit", "abort")[(p >> 25) & 1],
                                           "producerId": pid, "producerEpoch": epoch}))
            if p & (1 << 27):
                rec["key"] = "k%d" % (i % 5)
            out.append(json.dumps(rec))
        if kind == "append-jsonl-txn" and p & (1 << 26):
            out.append(json.dumps({"control": "commit", "producerId": pid, "producerEpoch": epoch}))
        return ("\n".join(out) + "\n").encode(), ["--input-format", "jsonl"]

    def _writer_args(self, kind, part, body, p):
        end = self.F.log_end_offset(part) if os.path.isdir(part) else 0
        if kind.startswith("append"):
            stdin, fmt = self._append_input(kind, body, p)
            args = ["append"] + fmt + ["--segment-bytes", str(200 + (p >> 5) % 3000)]
            if p & 2:
                args += ["--batch-records", str(1 + (p >> 8) % 20)]
            if kind == "append-lines-codec":
                args += ["--codec", CODECS[(p >> 28) % len(CODECS)]]
            if p & 4:
                args += ["--index-interval-bytes", str((p >> 6) % 600)]
            return args + [part], stdin
        if kind == "roll":
            return ["roll", part], b""
        if kind == "roll-if-bytes":
            return ["roll", "--if-bytes", str(p % 5000), part], b""
        hw = ["--high-watermark", str(end - (p >> 3) % 3)] if p & 4 and end >= 2 else []
        if kind == "retain-bytes":
            return ["retain", "--retention-bytes", str(p % 6000 - 1), "--file-delete-delay-ms",
                    "0"] + hw + [part], b""
        if kind == "retain-start-offset":
            return ["retain", "--log-start-offset", str(p % (end + 20)), "--file-delete-delay-ms",
                    "0"] + hw + [part], b""
        if kind == "retain-logdir":
            return ["retain", "--retention-bytes", str(p % 3000), "--roll-active",
                    "--file-delete-delay-ms", "0"] + hw + [os.path.dirname(part)], b""
        raise ValueError(kind)

    def _log_files(self, part):
        return {n: self.F._blob(os.path.join(part, n)) for n in os.listdir(part)
                if n.endswith(".log")}

    def _recover_and_restore(self, part):
        """recover, then every run it made restored, newest first: the .log files as before."""
        before = self._log_files(part)
        qroot = os.path.join(part, "kafkalog-quarantine")
        runs0 = set(os.listdir(qroot)) if os.path.isdir(qroot) else set()
        code, _ = self._invoke_writer(["recover", part])
        runs = sorted(set(os.listdir(qroot)) - runs0) if os.path.isdir(qroot) else []
        codes = []
        for run in reversed(runs):
            codes.append(self._invoke_writer(["quarantine", "restore", part, run])[0])
        after = self._log_files(part)
        if after != before:
            diff = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
            raise Crash("recover + quarantine restore did not give the .log files back "
                        "(recover exit %d, restores %s): %s" % (code, codes, ", ".join(diff[:3])))

    def _check_converges(self, part):
        code, out = self._invoke_writer(["recover", part])
        snap = self.F.snapshot_tree(self._logs)
        broker = self.F.broker_epochs_after_load(part)
        code2, out2 = self._invoke_writer(["recover", part])
        changed = self.F.snapshot_tree(self._logs) != snap
        if changed and code == code2 == 1 and self._epochs_as_the_broker(part, snap, broker):
            return
        # a run that met an error (exit 2: a file it leaves alone, a refusal) may meet it
        # again; the second run changes nothing either way
        if changed or code2 not in ((0, 2) if code == 2 else (0,)):
            raise Crash("second recover: exit %r after %r, %s: %s" % (
                code2, code, "changed the log directory" if changed else "nothing changed",
                out2.strip().splitlines()[-1:] if out2 else ""))

    def _epochs_as_the_broker(self, part, first, broker):
        """The broker's own loads do not always settle in one (README, recover: one run is
        enough, but...): a load assigns the recovered batches' epochs above the latest before
        it truncates the cache at the log end and start, so an entry past the log end hides
        the batches' epochs from one load, and at the log start offset equal to the log end
        offset the cache alternates between no entry and one. True when the second run changed
        leader-epoch-checkpoint only, into what the broker's load of the first run's result
        leaves (``broker``: fuzzlib's emulation of Kafka's rules)."""
        def files(snap):
            return {k: v for k, v in snap.items() if b"kafkalog-quarantine" not in k}
        second = self.F.snapshot_tree(self._logs)
        diff = {k for k in set(files(first)) | set(files(second))
                if files(first).get(k) != files(second).get(k)}
        epochs = os.path.join(os.fsencode(part), b"leader-epoch-checkpoint")
        return (broker is not None and {os.path.basename(k) for k in diff}
                == {b"leader-epoch-checkpoint"}
                and self.F._blob(epochs) == broker.encode())

    def describe(self, data):
        if len(data) < 8:
            return "too short: no input"
        part, target, kind, p = self._chosen(data, WRITER_COMMANDS)
        damage = self.DAMAGE[(data[3] >> 1) % len(self.DAMAGE)]
        return ("partition %s (recovered), %s%s, damage %s, command %s, parameter %d"
                % (part, target, " replaced (%d bytes)" % (len(data) - 8) if data[3] & 1
                   else " kept", "" if damage == "none" else damage, kind, p))

    def run(self, data):
        if len(data) < 8:
            return
        part_name, target, kind, p = self._chosen(data, WRITER_COMMANDS)
        files = self.parts[part_name]
        damage = self.DAMAGE[(data[3] >> 1) % len(self.DAMAGE)]
        body = data[8:]
        root = tempfile.mkdtemp(dir=self.work)
        self._root = root
        signal.signal(signal.SIGALRM, _timeout)
        signal.alarm(WRITERS_TIMEOUT)
        self._logs = os.path.join(root, "logs")
        self._outside = os.path.join(root, self.F.OUTSIDE)
        os.mkdir(self._outside)
        with open(os.path.join(self._outside, "precious"), "wb") as f:
            f.write(b"do not touch\n")
        try:
            part = os.path.join(self._logs, part_name)
            os.makedirs(part)
            for n, content in self.logdir_files[part_name].items():
                with open(os.path.join(self._logs, n), "wb") as f:
                    f.write(content)
            for n, content in files.items():
                with open(os.path.join(part, n), "wb") as f:
                    f.write(body if n == target and data[3] & 1 else content)
            if damage in self.F.PLANT_OPS:
                self.F.plant(part, damage, data[1] + (p & 0xFF), p >> 8, self._outside)
            elif damage != "none":
                self.F.mutate_tree(part, [(damage, data[1] + 1, data[2], p, [])])
            if kind == "recover-restore":
                self._recover_and_restore(part)
            else:
                args, stdin = self._writer_args(kind, part, body, p)
                self._invoke_writer(args, stdin)
            self._check_converges(part)
        finally:
            signal.alarm(0)
            shutil.rmtree(root, ignore_errors=True)


# -- the worker: one target, one engine ------------------------------------------------------------

def _location(exc):
    """The innermost frame in kafkalog_cli (else the innermost frame) as file:line."""
    tb = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in tb if "kafkalog_cli" in f.filename]
    f = (ours or tb or [None])[-1]
    if f is None:
        return "?"
    return "%s:%d" % (os.path.relpath(f.filename, REPO) if f.filename.startswith(REPO) else
                      os.path.basename(f.filename), f.lineno)


class Worker:
    def __init__(self, target, stats_path, runs):
        self.target = target
        self.stats_path = stats_path
        self.runs = runs
        self.inputs = 0
        self.crashes = {}
        self.t0 = time.monotonic()
        os.makedirs(CRASH_DIR, exist_ok=True)

    def one(self, data):
        self.inputs += 1
        try:
            self.target.run(data)
        except Exception as e:  # everything is reported, nothing stops the run
            self._record(e, data)
        if self.inputs % 2000 == 0 or self.inputs == self.runs:
            self.write_stats()

    def _record(self, e, data):
        if isinstance(e, Crash):
            key = "Crash: %s" % str(e).split(": ")[0][:160]
            where = _location(e.__cause__) if e.__cause__ else "invariant"
        else:
            key = type(e).__name__
            where = _location(e)
        key = "%s @ %s" % (key, where)
        entry = self.crashes.get(key)
        if entry is None:
            digest = hashlib.sha1(data).hexdigest()[:12]
            path = os.path.join(CRASH_DIR, "%s-%s.bin" % (self.target.name, digest))
            with open(path, "wb") as f:
                f.write(data)
            entry = self.crashes[key] = {"count": 0, "input": os.path.relpath(path, REPO),
                                         "message": ("%s: %s" % (type(e).__name__, e))[:500],
                                         "at_input": self.inputs}
            self.write_stats()
        entry["count"] += 1

    def write_stats(self):
        stats = {"target": self.target.name, "inputs": self.inputs,
                 "seconds": round(time.monotonic() - self.t0, 1), "crashes": self.crashes}
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f, indent=1)
        os.replace(tmp, self.stats_path)


def _make_target(name, workdir):
    if name == "format":
        return FormatTarget()
    if name == "aux":
        return AuxTarget(workdir)
    if name == "cli":
        return CliTarget(workdir)
    if name == "writers":
        return WritersTarget(workdir)
    raise SystemExit("unknown target %r" % name)


def run_worker(args):
    import fuzzlib as F
    workdir = tempfile.mkdtemp(prefix="kafkalog-fuzz-",
                               dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    header = {"format": 1, "aux": 1, "cli": 8, "writers": 8}[args.worker]
    try:
        if args.engine == "atheris":
            import atheris
            with atheris.instrument_imports(include=["kafkalog_cli"]):
                import kafkalog_cli.cli.dump  # noqa: F401
                import kafkalog_cli.cli.recover  # noqa: F401
                import kafkalog_cli.log.append  # noqa: F401
                import kafkalog_cli.log.segment_writer  # noqa: F401
                import kafkalog_cli.log.produce  # noqa: F401
                import kafkalog_cli.log.quarantine  # noqa: F401
                import kafkalog_cli.log.quarantine_runs  # noqa: F401
                import kafkalog_cli.log.retain  # noqa: F401
                import kafkalog_cli.cli.verify_index  # noqa: F401
                import kafkalog_cli.format.control  # noqa: F401
                import kafkalog_cli.format.records  # noqa: F401
                import kafkalog_cli.format.scan  # noqa: F401
                import kafkalog_cli.log.checkpoints  # noqa: F401
                import kafkalog_cli.log.recover  # noqa: F401
                import kafkalog_cli.log.recover_run  # noqa: F401
                import kafkalog_cli.log.snapshot  # noqa: F401
                import kafkalog_cli.log.verify  # noqa: F401
        target = _make_target(args.worker, workdir)
        worker = Worker(target, args.stats, args.runs)
        seeds = target.seeds()
        others = [s[header:] for s in seeds]
        if args.engine == "atheris":
            corpus = os.path.join(workdir, "corpus")
            os.makedirs(corpus)
            for i, s in enumerate(seeds):
                with open(os.path.join(corpus, "seed-%04d" % i), "wb") as f:
                    f.write(s)

            def mutator(data, max_size, seed):
                rng = random.Random(seed)
                if rng.random() < 0.5 or len(data) <= header:
                    return atheris.Mutate(data, max_size)
                ops = F.random_ops(rng, 3)
                body = F.apply_ops(data[header:], ops, rng.choice(others))
                return (data[:header] + body)[:max_size]

            def one(data):
                worker.one(data)
                if worker.inputs >= args.runs:
                    worker.write_stats()
                    os._exit(0)

            atheris.Setup([sys.argv[0], "-max_len=%d" % MAX_LEN, "-rss_limit_mb=3072",
                           "-timeout=60", "-runs=%d" % (args.runs + len(seeds) + 10),
                           "-seed=%d" % args.seed,
                           "-artifact_prefix=%s/%s-" % (CRASH_DIR, args.worker),
                           "-print_final_stats=0", corpus],
                          one, custom_mutator=mutator)
            atheris.Fuzz()
        else:
            rng = random.Random(args.seed)
            for s in seeds:
                worker.one(s)
            while worker.inputs < args.runs:
                s = rng.choice(seeds)
                if args.worker == "format" and s[0] & 8 and rng.random() < 0.98:
                    s = rng.choice(seeds)  # the large seeds cost 100 times more: fewer of them
                body = F.apply_ops(s[header:], F.random_ops(rng, 4), rng.choice(others))
                worker.one(s[:header] + body)
            worker.write_stats()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- the parent: every target in turn, then the summary --------------------------------------------

def run_all(args):
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "loop"
    results = []
    for name in args.targets.split(","):
        runs = args.runs if not args.runs_per else int(dict(
            x.split("=") for x in args.runs_per.split(","))[name])
        stats = os.path.join(tempfile.gettempdir(),
                             "kafkalog-fuzz-%s-%d.json" % (name, os.getpid()))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--runs", str(runs),
               "--engine", engine, "--stats", stats, "--seed", str(args.seed)]
        print("== %s: %d inputs (%s)" % (name, runs, engine), flush=True)
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=dict(os.environ, PYTHONHASHSEED="0"))
        took = time.monotonic() - t0
        try:
            with open(stats) as f:
                result = json.load(f)
            os.unlink(stats)
        except (OSError, ValueError):
            result = {"target": name, "inputs": 0, "crashes": {}}
        result["exit"] = p.returncode
        result["wall_seconds"] = round(took, 1)
        results.append(result)
        _print_result(result)
    total = sum(r["inputs"] for r in results)
    unique = sum(len(r["crashes"]) for r in results)
    print("== total: %d inputs, %d unique crashes" % (total, unique))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if unique or any(r["exit"] not in (0,) for r in results) else 0


def _print_result(r):
    print("%-7s inputs: %d in %.0fs (%.0f/s), unique crashes: %d%s" % (
        r["target"], r["inputs"], r.get("wall_seconds", 0),
        r["inputs"] / max(r.get("wall_seconds", 1), 0.001), len(r["crashes"]),
        "" if r.get("exit") == 0 else ", worker exit status %s" % r.get("exit")), flush=True)
    for key, c in sorted(r["crashes"].items()):
        print("    %6d x %s\n           first at input %d, saved as %s\n           %s"
              % (c["count"], key, c["at_input"], c["input"], c["message"].splitlines()[0][:300]))


def replay(paths):
    workdir = tempfile.mkdtemp(prefix="kafkalog-fuzz-replay-")
    targets = {}
    status = 0
    try:
        for path in paths:
            name = os.path.basename(path).split("-", 1)[0]
            if name not in targets:
                targets[name] = _make_target(name, workdir)
            with open(path, "rb") as f:
                data = f.read()
            if hasattr(targets[name], "describe"):
                print("%s: %s" % (path, targets[name].describe(data)))
            try:
                targets[name].run(data)
                print("%s: no crash" % path)
            except Exception:
                status = 1
                print("%s:" % path)
                traceback.print_exc()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--runs", type=int, default=100000, help="inputs per target")
    ap.add_argument("--runs-per", default=None, metavar="format=N,aux=N,cli=N,writers=N")
    ap.add_argument("--engine", choices=("auto", "atheris", "loop"), default="auto")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the results to this file too")
    ap.add_argument("--replay", nargs="+", default=None, help="run saved inputs again")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stats", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay)
    if args.worker:
        return run_worker(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
