"""Every recipe of the README's "Recipes" section, run as it stands with bash on a copy of the
shipped fixtures, and its output checked."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from dumpcheck import REPO


def recipes():
    """{title: shell block} of the README's Recipes section."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for part in section.split("\n### ")[1:]:
        title = part.splitlines()[0].strip()
        blocks = re.findall(r"```sh\n(.*?)```", part, re.S)
        assert len(blocks) == 1, title
        out[title] = blocks[0]
    return out


RECIPES = recipes()

# what each recipe's output must hold
EXPECT = {
    "Find a message by offset": lambda out: (
        out.startswith("offset: 5 ") and len(out.splitlines()) == 1 and "key: order-5 " in out),
    "Find the messages of a key": lambda out: (
        out.splitlines() and all(" key: order-7 " in line for line in out.splitlines())),
    "Find the messages of a time range": lambda out: (
        [line.split()[1] for line in out.splitlines()] == ["30", "31", "32"]),
    "Check every index from cron": lambda out: out == "indexes match their logs\n",
    "Recover after a crash, and undo it": lambda out: (
        "would be" in out or "would" in out) and "cut 00000000000000000042.log" in out,
    "Archive a topic to Parquet": lambda out: True,
    "Expire old segments": lambda out: True,
}


def test_every_recipe_has_an_expectation():
    assert set(RECIPES) == set(EXPECT)


def run(tmp_path, title):
    shutil.copytree(os.path.join(REPO, "fixtures", "logdir"), tmp_path / "logs")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", RECIPES[title]], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (title, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    assert EXPECT[title](p.stdout), (title, p.stdout)
    return p


@pytest.mark.parametrize("title", [t for t in EXPECT if t != "Archive a topic to Parquet"])
def test_recipe(tmp_path, title):
    run(tmp_path, title)
    if title == "Recover after a crash, and undo it":
        # the restore put the torn segment back as it was
        with open(os.path.join(REPO, "fixtures", "logdir", "orders-0",
                               "00000000000000000042.log"), "rb") as f:
            original = f.read()
        with open(tmp_path / "logs" / "orders-0" / "00000000000000000042.log", "rb") as f:
            assert f.read() == original[:-10]
    if title == "Expire old segments":
        left = sorted(n for n in os.listdir(tmp_path / "logs" / "orders-0") if n.endswith(".log"))
        assert left == ["00000000000000000042.log"], left   # the active segment stays


@pytest.mark.slow
def test_recipe_archive_to_parquet(tmp_path):
    """The Parquet files hold every record of the partition (read with pyarrow, counted against
    kafka-python's reading of the segments)."""
    import pyarrow.parquet as pq

    import kafkagen as kg
    run(tmp_path, "Archive a topic to Parquet")
    out = tmp_path / "archive" / "orders"
    files = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f.endswith(".parquet")]
    assert files, os.listdir(out)
    rows = sum(pq.read_table(f).num_rows for f in files)
    want = 0
    part = os.path.join(REPO, "fixtures", "logdir", "orders-0")
    for n in sorted(os.listdir(part)):
        if n.endswith(".log"):
            with open(os.path.join(part, n), "rb") as f:
                want += sum(len(kb.records) for kb in kg.kafka_python_read(f.read())
                            if not kb.batch.is_control_batch)
    assert rows == want > 0, (rows, want)
