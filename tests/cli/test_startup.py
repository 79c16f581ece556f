"""Start-up: a command imports what it and its data need, no more (the aim: `kafkalog dump` of an
empty segment within 2.5x of `python -c pass`; benchmarks/bench_startup.py times it).

Each test runs kafkalog's real entry point (cli.main.main) in a fresh interpreter and lists the
modules loaded when it ends (a module bound by kafkalog_cli._lazy.lazy_module and never read is
not loaded). A dump of logs in kafka-dump-log's text loads neither the `crc32c` package (the C
CRC-32C is used) nor rich, nor json, nor a codec its batches do not use, nor verify and the
index, checkpoint and leader-epoch code only verify needs.
"""

import os
import subprocess
import sys

import click
import pytest

import kafkagen
from kafkagen import Rec

CODEC_MODULES = {"lz4", "zstandard", "cramjam", "isal"}
# What a dump of logs never needs: each of these costs start-up (crc32c's package alone more
# than the rest of a dump of an empty segment).
NEVER_FOR_LOGS = {"crc32c", "rich", "fastavro", "kafkalog_cli.log.verify",
                  "kafkalog_cli.log.index_check", "kafkalog_cli.log.verify_epochs",
                  "kafkalog_cli.log.checkpoints", "kafkalog_cli.log.leader_epochs",
                  "kafkalog_cli.log.indexbuild", "ctypes", "json", "base64"} | CODEC_MODULES

_RUN = """
import sys
import importlib.util
sys.argv = ["kafkalog"] + sys.argv[1:]
from kafkalog_cli.cli.main import main
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
lazy = getattr(importlib.util, "_LazyModule", ())
loaded = sorted(name for name, m in sys.modules.items()
                if m is not None and not isinstance(m, lazy))
sys.stderr.write("\\nLOADED %s %s\\n" % (code, " ".join(loaded)))
"""


def loaded_by(*args, pure=False):
    """The top-level names and kafkalog_cli modules loaded by `kafkalog ARGS`, and its exit."""
    env = dict(os.environ)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    if pure:
        env["KAFKALOG_PURE_PYTHON"] = "1"
    p = subprocess.run([sys.executable, "-c", _RUN] + list(args), env=env,
                       capture_output=True, text=True, timeout=120)
    line = p.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert line.startswith("LOADED "), p.stderr
    _, code, *names = line.split(" ")
    top = {n.split(".")[0] for n in names}
    return top | {n for n in names if n.startswith("kafkalog_cli.")}, int(code), p.stdout


def _c_crc_built():
    try:
        from kafkalog_cli.format import _crc32c  # noqa: F401
    except ImportError:
        return False
    return True


needs_c = pytest.mark.skipif(not _c_crc_built(), reason="_crc32c is not built")


@needs_c
def test_a_dump_of_an_empty_segment_loads_only_what_it_needs(tmp_path):
    path = kafkagen.write_segment(str(tmp_path / "t-0"), 0)
    loaded, code, out = loaded_by("dump", path)
    assert code == 0 and "Log starting offset: 0" in out
    assert not loaded & NEVER_FOR_LOGS, sorted(loaded & NEVER_FOR_LOGS)
    assert "kafkalog_cli.format._crc32c" in loaded


@needs_c
@pytest.mark.parametrize("codec, module", [("lz4", "lz4"), ("zstd", "zstandard"),
                                           ("gzip", "isal"), ("snappy", "cramjam")])
def test_a_codec_is_loaded_by_the_batches_that_use_it(tmp_path, codec, module):
    batch = kafkagen.v2_batch([Rec(b"k", b"value %d " % i * 20) for i in range(20)], codec=codec)
    path = kafkagen.write_segment(str(tmp_path / "t-0"), 0, batch)
    loaded, code, out = loaded_by("dump", "--deep-iteration", "--print-data-log", path)
    assert code == 0 and "payload: value 19" in out
    assert module in loaded
    assert not loaded & (NEVER_FOR_LOGS - {module}), sorted(loaded & NEVER_FOR_LOGS)


@needs_c
def test_an_index_dump_loads_its_check_and_the_problems_are_still_reported(tmp_path):
    """The lazily loaded modules are loaded when they are needed: an index's check."""
    batch = kafkagen.v2_batch([Rec(b"k", b"v")])
    log = kafkagen.write_segment(str(tmp_path / "t-0"), 0, batch)
    index = log[:-len(".log")] + ".index"
    with open(index, "wb") as f:
        f.write((5).to_bytes(4, "big") + (3).to_bytes(4, "big"))  # offset 5 at position 3
    loaded, code, out = loaded_by("dump", index)
    assert "kafkalog_cli.log.index_check" in loaded
    assert code == 1


def test_the_pure_python_path_uses_the_crc32c_package(tmp_path):
    batch = kafkagen.v2_batch([Rec(b"k", b"v")])
    path = kafkagen.write_segment(str(tmp_path / "t-0"), 0, batch)
    loaded, code, out = loaded_by("dump", path, pure=True)
    assert code == 0 and "crc: " in out and "isvalid: true" in out
    assert "crc32c" in loaded and "kafkalog_cli.format._crc32c" not in loaded


def _command_modules(loaded):
    from kafkalog_cli.cli.main import COMMANDS
    modules = {"kafkalog_cli.cli." + target.split(":")[0] for target in COMMANDS.values()}
    return sorted(loaded & modules)


def _short_helps():
    """{name: short help} of every command, from the commands themselves (imported here)."""
    from kafkalog_cli.cli.main import COMMANDS, cli
    ctx = click.Context(cli)
    commands = {name: cli.get_command(ctx, name) for name in COMMANDS}
    assert not [c for c in commands.values() if c.hidden or c.deprecated]
    return {name: c.get_short_help_str() for name, c in commands.items()}


def test_the_listed_short_helps_are_the_commands_own():
    from kafkalog_cli.cli.main import SHORT_HELP
    assert SHORT_HELP == _short_helps()


def test_help_lists_every_command_with_its_short_help_without_importing_them():
    loaded, code, out = loaded_by("--help")
    assert code == 0
    assert not _command_modules(loaded), _command_modules(loaded)
    lines = out.split("Commands:\n")[1].splitlines()
    helps = _short_helps()
    width = max(map(len, helps)) + 2
    assert lines == ["  %s%s" % (name.ljust(width), text) for name, text in helps.items()]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completing_a_command_name_imports_no_command(shell):
    env = dict(os.environ, _KAFKALOG_COMPLETE=shell + "_complete", COMP_WORDS="kafkalog ",
               COMP_CWORD="1")
    code = _RUN.replace('sys.argv = ["kafkalog"] + sys.argv[1:]', 'sys.argv = ["kafkalog"]')
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    line = p.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert line.startswith("LOADED 0 "), p.stderr
    assert not _command_modules(set(line.split(" ")[2:]))
    helps = _short_helps()
    if shell == "bash":  # type,value per line
        assert p.stdout.split() == ["plain,%s" % name for name in helps]
    else:  # type, value, help: three lines each
        assert p.stdout.splitlines() == [x for name, text in helps.items()
                                         for x in ("plain", name, text)]
