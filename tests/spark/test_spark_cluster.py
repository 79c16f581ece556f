"""`kafkalog export` on a real Spark standalone cluster (a master and two workers on loopback,
tests/sparkcluster.py): the rows equal kafka-python's reading of the same segments, both
workers' executors run tasks (from the application's event log), invalid data is reported, the
README's packed environment runs the executors; and the one-line failures, the quiet stderr and
the progress bar of a local Spark."""

import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import kafkagen as kg
import sparkcluster
from dumpcheck import REPO
from sparkrows import arrow_rows, kafka_python_dir_rows, logs_under, order, part_files

pytestmark = pytest.mark.slow

FIXTURES = os.path.join(REPO, "fixtures", "logdir")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = sparkcluster.Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c
    finally:
        c.stop()


def test_export_on_a_standalone_cluster(cluster, tmp_path):
    out, events = tmp_path / "out", tmp_path / "events"
    events.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "kafkalog_cli", "export", FIXTURES, "--output", str(out),
         "--output-format", "parquet", "--master", cluster.url,
         "--spark-conf", "spark.ui.enabled=false",
         "--spark-conf", "spark.eventLog.enabled=true",
         "--spark-conf", "spark.eventLog.compress=false",
         "--spark-conf", "spark.eventLog.dir=file://%s" % events,
         # every executor registered before the first task, so that both can take tasks
         "--spark-conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
         "--spark-conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = []
    for f in part_files(out, ".parquet"):
        got += arrow_rows(pq.read_table(f))
    assert order(got) == order(kafka_python_dir_rows(FIXTURES))
    tasks = sparkcluster.tasks_per_executor(str(events))
    assert len([e for e, n in tasks.items() if n > 0]) >= 2, tasks
    state = cluster.state()
    assert state["aliveworkers"] == 2 and len(state["completedapps"]) >= 1, state


CORES_SCRIPT = """
import sys
from kafkalog_cli.spark import jobs, start
# Spark's bound for the wait (30 s by default) raised: two workers starting on a loaded 2-core
# machine may take longer than that to register their executors
spark = start.session(sys.argv[1], conf=[("spark.ui.enabled", "false"),
                                         ("spark.scheduler.maxRegisteredResourcesWaitingTime",
                                          "240s")])
print("started", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1, flush=True)
cores = jobs.cores(spark)
print(cores, spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1, flush=True)
spark.stop()
"""


def test_slices_wait_for_the_executors_to_register(tmp_path):
    """The slices are cut for the cores of the cluster's executors, not for those registered
    when the session has just started (none here: the workers join after it; Spark would then
    say 2, whatever the cluster): jobs.cores waits for the executors of two 2-core workers."""
    c = sparkcluster.Cluster(tmp_path, workers=0)
    try:
        p = subprocess.Popen([sys.executable, "-c", CORES_SCRIPT, c.url], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = p.stdout.readline().split()
            assert first == ["started", "0"], (first, p.stderr.read()[-3000:])
            c.add_workers(2, cores=2, wait=False)
            out, err = p.communicate(timeout=300)
        finally:
            p.kill()
        assert p.returncode == 0, err[-3000:]
        # each executor has 2 cores; how many are there when the count has held still depends
        # on the machine's load, but never none (without the wait: "2 0"). The cores are the
        # scheduler's (defaultParallelism), the count the block managers' (registered a
        # moment after their executor: "4 1" on a loaded machine), so the cores may be ahead.
        cores, registered = map(int, out.split())
        assert registered >= 1 and 2 * registered <= cores <= 4 and cores % 2 == 0, out
    finally:
        c.stop()


def test_export_reports_invalid_data_on_a_cluster(cluster, tmp_path):
    """1000 garbage bytes after a segment's last batch, exported on the cluster: the executors'
    findings come back to the driver: one line naming them, the counts, exit 1; nothing else
    on stderr."""
    root = tmp_path / "logdir"
    shutil.copytree(FIXTURES, root)
    path = root / "orders-1" / "00000000000000000000.log"
    size = path.stat().st_size
    path.write_bytes(kg.garbage_tail(path.read_bytes(), 1000, seed=7))
    out = tmp_path / "out"
    p = kafkalog_proc("export", root, "--output", out, "--master", cluster.url,
                      "--spark-conf", "spark.ui.enabled=false")
    assert p.returncode == 1, p.stderr[-3000:]
    lines = p.stderr.splitlines()
    assert len(lines) == 2, p.stderr
    assert lines[0].startswith("kafkalog: orders-1: 00000000000000000000.log: 1000 bytes at %d: "
                               % size), lines
    assert lines[1].startswith("kafkalog: export: 0 invalid batches and 1000 invalid bytes "
                               "not exported"), lines
    got = []
    for f in part_files(out, ".parquet"):
        got += arrow_rows(pq.read_table(f))
    assert order(got) == order(kafka_python_dir_rows(str(root)))


def packed_environment(tmp_path):
    """The README's packed environment: a new virtual environment with this checkout and
    pyarrow installed (the versions of the test environment's, from pip's cache when it has
    them), a .pth file noting each interpreter start (sys.prefix) in ``starts``, packed with
    venv-pack. Returns (archive, starts)."""
    env, src, starts = tmp_path / "kafkalog-env", tmp_path / "src", tmp_path / "starts"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(REPO, name), src / name)
    shutil.copytree(os.path.join(REPO, "kafkalog_cli"), src / "kafkalog_cli",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(line + "\n" for line in freeze.splitlines()
                                   if not line.lower().startswith("kafkalog")))
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=120)
    p = subprocess.run([str(env / "bin" / "pip"), "install", "--quiet",
                        "--disable-pip-version-check", "-c", str(constraints), str(src),
                        "pyarrow"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    site = subprocess.run([str(env / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "zz_kafkalog_test_starts.pth"), "w") as f:
        f.write("import sys; open(%r, 'a').write(sys.prefix + '\\n')\n" % str(starts))
    archive = tmp_path / "kafkalog-env.tar.gz"
    p = subprocess.run([sys.executable, "-m", "venv_pack", "-p", str(env), "-o", str(archive),
                        "-q"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    shutil.rmtree(env)
    return archive, starts


def test_a_packed_environment_runs_the_executors(cluster, tmp_path):
    """The README's recipe for a packed environment, end to end: a venv with kafkalog packed
    with venv-pack, shipped with spark.archives=env.tar.gz#env and run by the executors as
    spark.pyspark.python=./env/bin/python; the rows are kafka-python's."""
    archive, starts = packed_environment(tmp_path)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    p = kafkalog_proc("export", FIXTURES, "--output", out, "--master", cluster.url,
                      "--spark-conf", "spark.ui.enabled=false",
                      "--spark-conf", "spark.archives=%s#env" % archive,
                      "--spark-conf", "spark.pyspark.python=./env/bin/python", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stderr == ""
    got = []
    for f in part_files(out, ".parquet"):
        got += arrow_rows(pq.read_table(f))
    assert order(got) == order(kafka_python_dir_rows(FIXTURES))
    # the executors' Python workers ran from the archive unpacked in their working directories
    prefixes = set(starts.read_text().split())
    work = os.path.join(cluster.root, "work")
    assert prefixes and all(x.startswith(work) and x.endswith("/env") for x in prefixes), \
        prefixes


def kafkalog_proc(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "kafkalog_cli", *[str(a) for a in args]],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def test_executors_run_the_interpreter_the_user_names(cluster, tmp_path):
    """spark.pyspark.python given with --spark-conf wins (the driver's own interpreter is only
    the default): a wrapper that notes each start, then runs this Python, is what the
    executors start."""
    calls = tmp_path / "calls"
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\necho started >> "%s"\nexec "%s" "$@"\n' % (calls, sys.executable))
    wrapper.chmod(0o755)
    p = kafkalog_proc("scan", FIXTURES, "--master", cluster.url,
                      "--spark-conf", "spark.ui.enabled=false",
                      "--spark-conf", "spark.pyspark.python=%s" % wrapper)
    assert p.returncode == 0, p.stderr[-3000:]
    assert calls.exists() and calls.read_text().count("started") >= 1


def test_an_interpreter_that_cannot_run_is_one_line(tmp_path):
    p = kafkalog_proc("scan", FIXTURES, "--master", "local[1]",
                      "--spark-conf", "spark.ui.enabled=false",
                      "--spark-conf", "spark.pyspark.python=%s" % (tmp_path / "no-python"))
    assert p.returncode == 2, p
    lines = [x for x in p.stderr.splitlines() if x.startswith("kafkalog:")]
    assert len(lines) == 1 and "failed" in lines[0], p.stderr[-3000:]
    assert "Traceback" not in p.stderr


def test_a_python_worker_that_cannot_import_kafkalog_is_one_line(tmp_path):
    """Executors whose Python lacks kafkalog's packages (a bare venv): the task's Java and
    Python stack traces stay out of stderr; one line says which import failed, exit 2."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    python = "spark.pyspark.python=%s" % (tmp_path / "bare" / "bin" / "python")
    for args in (("scan", FIXTURES), ("export", FIXTURES, "--output", tmp_path / "out")):
        p = kafkalog_proc(*args, "--master", "local[1]", "--spark-conf", "spark.ui.enabled=false",
                          "--spark-conf", python)
        assert p.returncode == 2, p
        assert p.stderr.splitlines() == [p.stderr.strip()], p.stderr[-3000:]
        assert p.stderr.startswith("kafkalog: %s failed: a Python worker failed: "
                                   "ModuleNotFoundError: No module named " % args[0]), p.stderr


def test_an_output_that_exists_or_cannot_be_written_is_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = kafkalog_proc("export", FIXTURES, "--output", out, "--master", "local[1]")
    assert p.returncode == 2 and p.stderr.splitlines() == [
        "kafkalog: export failed: %s already exists (--mode overwrite or append)" % out], p
    p = kafkalog_proc("export", FIXTURES, "--output", "/proc/no-such-dir/out",
                      "--master", "local[1]")
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p
    assert p.stderr.startswith("kafkalog: export failed: ") and "/proc/no-such-dir" in p.stderr


@pytest.mark.parametrize("master,words", [
    ("spark://127.0.0.1:{free port}", "cannot reach the Spark master"),
    ("bogus", "not a Spark master URL"),
    ("spark://nohostport", "expected spark://HOST:PORT"),
])
def test_a_master_that_cannot_be_used_is_one_line_fast(master, words):
    """Checked before a JVM starts: one line, exit 2, in seconds (it took 88 s and printed
    three Java stack traces and a Python traceback)."""
    import time
    # the port chosen when the test runs (the same test ids in every pytest-xdist worker)
    master = master.replace("{free port}", str(sparkcluster.free_port()))
    t = time.monotonic()
    p = kafkalog_proc("scan", FIXTURES, "--master", master, timeout=120)
    assert time.monotonic() - t < 20
    assert p.returncode == 2, p
    assert p.stderr.splitlines() == [p.stderr.strip()] and words in p.stderr, p.stderr
    p = kafkalog_proc("export", FIXTURES, "--output", "/nonexistent-out", "--master", master,
                      timeout=120)
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.splitlines()) == 1, p


def test_spark_starts_quietly(tmp_path):
    """Nothing on stderr: no JVM start-up line (Java's "WARNING: Using incubator modules"), no
    log4j line, no Spark warning; --verbose shows them."""
    p = kafkalog_proc("scan", FIXTURES, "--master", "local[1]",
                      "--spark-conf", "spark.ui.enabled=false")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    p = kafkalog_proc("scan", FIXTURES, "--master", "local[1]", "--verbose",
                      "--spark-conf", "spark.ui.enabled=false")
    assert p.returncode == 0, p.stderr
    assert "WARNING: Using incubator modules" in p.stderr


def test_a_jvm_that_cannot_start_is_one_line():
    """The JVM's own words (held back from stderr while it starts) in the one line."""
    p = kafkalog_proc("scan", FIXTURES, "--master", "local[1]",
                      "--spark-conf", "spark.driver.memory=lots", timeout=120)
    assert p.returncode == 2, p
    assert len(p.stderr.splitlines()) == 1 and "Spark could not start" in p.stderr, p.stderr
    assert "heap size" in p.stderr and "incubator" not in p.stderr, p.stderr


def test_progress_bar_on_a_terminal():
    """On a terminal the bar says "starting Spark" until the first stage, then counts the
    stage's tasks up to its real count, and stays there (it showed "spark 0/None tasks", and
    "0/12" after the stage)."""
    import re
    from dumpcheck import on_a_terminal
    segments = len(logs_under(FIXTURES))
    code, out = on_a_terminal(["scan", FIXTURES, "--master", "local[1]",
                               "--spark-conf", "spark.ui.enabled=false"],
                              stderr_too=True, timeout=300)
    assert code == 0, out[-3000:]
    assert "None" not in out
    counts = [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) tasks", out)]
    assert counts and out.index("starting Spark") < out.index("tasks"), out[:3000]
    assert {total for _, total in counts} == {segments}, counts
    assert counts[-1] == (segments, segments)
    end = counts.index((segments, segments))
    assert set(counts[end:]) == {(segments, segments)}, counts
    done = [d for d, _ in counts]
    assert done == sorted(done), counts


def test_the_class_archive_is_written_once_then_mapped(tmp_path):
    """The first command writes the driver JVM's class-data archive to the cache directory at
    its exit (nothing said, no partial file left), the next ones start with it (the same
    output); options of the user's that touch class sharing leave it out."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    archives = tmp_path / "cache" / "kafkalog"
    args = ("scan", FIXTURES, "--format", "json", "--master", "local[1]")
    first = kafkalog_proc(*args, env=env)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    made = sorted(os.listdir(archives))
    assert len(made) == 1 and made[0].startswith("spark-classes-") and made[0].endswith(".jsa")
    stamp = os.stat(archives / made[0]).st_mtime_ns
    again = kafkalog_proc(*args, env=env)
    assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, "")
    assert sorted(os.listdir(archives)) == made
    assert os.stat(archives / made[0]).st_mtime_ns == stamp
    from kafkalog_cli.spark import classarchive
    home = classarchive.spark_home()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        assert "SharedArchiveFile=%s" % (archives / made[0]) in \
            classarchive.Archive(home, "", "").options
        assert classarchive.Archive(home, "-Xshare:off", "").options == ""
        mp.setenv("XDG_CACHE_HOME", str(tmp_path / "other"))
        assert "ArchiveClassesAtExit=" in classarchive.Archive(home, "-Xmx2g", "").options
    # an archive cut short (a full disk) crashes a JVM that maps it: the check that comes
    # before an archive takes its name says no, and leaves no crash report behind
    cut = tmp_path / "cut.jsa"
    cut.write_bytes((archives / made[0]).read_bytes()[:5 << 20])
    assert not classarchive._usable(classarchive._java(), str(tmp_path), [], str(cut))
    assert not [n for n in os.listdir(".") if n.startswith("hs_err")]


DAEMON_SCRIPT = """
import json, os, sys
from kafkalog_cli.spark import start
sc = start.context("local[2]")

def where(_):
    import pyspark
    with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
        daemon = f.read().split(b"\\0")
    return pyspark.__file__, [a.decode() for a in daemon], os.getpid()

print(json.dumps(sc.parallelize(range(4), 4).map(where).collect()))
sc.stop()
"""

PRELOAD_SCRIPT = """
import os, sys
from kafkalog_cli.spark import daemon
zip_path = os.path.join(os.path.dirname(__import__("importlib.util").util.find_spec(
    "pyspark").origin), "python", "lib", "pyspark.zip")
path = [zip_path, "/elsewhere/pyspark.zip"] + sys.path
daemon.installed_pyspark_first(path)
assert path[0] == "/elsewhere/pyspark.zip" and zip_path not in path, path[:3]
import pyspark.daemon, pyspark.worker
from kafkalog_cli.spark import jobs, source
print(len(os.listdir("/proc/self/task")), sorted(m for m in ("numpy", "pandas", "pyarrow")
                                                 if m in sys.modules))
"""


def test_local_workers_fork_from_kafkalogs_daemon(tmp_path):
    """A local context's Python workers are forked from kafkalog's daemon (pyspark's own,
    pyspark imported from the installed package rather than Spark's pyspark.zip); what the
    daemon imports before forking starts no thread (pyarrow, pandas and numpy do: they are
    not among it), and it takes out only the pyspark.zip of the installed package."""
    import json
    p = subprocess.run([sys.executable, "-c", DAEMON_SCRIPT], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    import pyspark
    assert {f for f, _, _ in got} == {pyspark.__file__}
    assert all(cmd[1:3] == ["-m", "kafkalog_cli.spark.daemon"] for _, cmd, _ in got), got
    p = subprocess.run([sys.executable, "-c", PRELOAD_SCRIPT], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "[]"], p.stdout


def test_a_worker_whose_socket_the_jvm_closed_ends_quietly():
    """Over a Unix socket a worker's last flush fails once the JVM has closed its socket (it
    stops), and pyspark re-raises that: the daemon's worker ends without a traceback (pyspark
    printed one, cut short, on the command's stderr at every few ends); other failures are
    pyspark's to handle, as they were."""
    from kafkalog_cli.spark.daemon import quiet_on_a_closed_socket

    def closed(sock, authenticated):
        raise BrokenPipeError(32, "Broken pipe")

    def failing(sock, authenticated):
        raise ValueError("a bug")

    assert quiet_on_a_closed_socket(closed)(None, True) == 1
    assert quiet_on_a_closed_socket(lambda sock, authenticated: 0)(None, True) == 0
    with pytest.raises(ValueError):
        quiet_on_a_closed_socket(failing)(None, True)
