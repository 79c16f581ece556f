"""The test broker itself (tests/kafkabroker.py): it serves on 127.0.0.1, stops cleanly on
SIGTERM (the broker's clean-shutdown marker written), dies on SIGKILL, starts again on the same
log directory, and leaves no process of its own behind."""

import os
from pathlib import Path

import pytest

from dumpcheck import REPO

pytestmark = pytest.mark.kafka


def _processes_naming(text):
    """Pids of the processes whose command line mentions ``text``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            out.append(int(entry.name))
    return out


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_broker_serves_stops_and_leaves_nothing(kafka_broker, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker = kafka_broker(tmp_path / "b")
    broker.start()
    assert broker.port and broker.controller_port
    assert broker.bootstrap.startswith("127.0.0.1:")
    pgid = broker.proc.pid
    assert os.getpgid(pgid) == pgid  # a process group of its own

    broker.create_topic("probe", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(3):
        producer.send("probe", key=b"k%d" % i, value=b"v%d" % i).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([TopicPartition("probe", 0)])
    got = [(m.offset, m.key, m.value) for m in consumer]
    consumer.close()
    assert got == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]

    # A clean stop: SIGTERM, the JVM exits, the clean-shutdown marker is in the log directory.
    broker.stop()
    assert not _group_alive(pgid)
    assert (broker.logdir / ".kafka_cleanshutdown").exists() or any(
        broker.logdir.glob("*/.kafka_cleanshutdown"))
    assert (broker.partition_dir("probe", 0) / "00000000000000000000.log").stat().st_size > 0

    # Again on the same log directory, then a crash: SIGKILL to the whole group.
    broker.start()
    pgid = broker.proc.pid
    broker.kill()
    assert not _group_alive(pgid)
    assert not (broker.logdir / ".kafka_cleanshutdown").exists()

    # close() on a running broker stops it too, and nothing that names its directory is left.
    broker.start()
    pgid = broker.proc.pid
    broker.close()
    assert not _group_alive(pgid)
    assert _processes_naming(str(broker.workdir)) == []


def _use_our_fixtures(directory):
    """A conftest.py in ``directory`` that gives a pytest run there this suite's
    ``kafka_broker`` and ``kafka_classpath`` fixtures."""
    tests = Path(REPO, "tests")
    (directory / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(tests)!r})\n"
        "spec = importlib.util.spec_from_file_location(\n"
        f"    'kafkalog_tests_conftest', {str(tests / 'conftest.py')!r})\n"
        "ours = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(ours)\n"
        "kafka_broker, kafka_classpath = ours.kafka_broker, ours.kafka_classpath\n")


def test_a_failing_test_still_stops_its_broker(tmp_path, kafka_classpath):
    """The ``kafka_broker`` fixture closes every broker it made whatever happens: a pytest run
    of a test that starts a broker and then fails leaves no process of that broker."""
    workdir = tmp_path / "failing-broker"
    _use_our_fixtures(tmp_path)
    (tmp_path / "test_fails.py").write_text(
        "from pathlib import Path\n"
        "def test_fails(kafka_broker):\n"
        f"    b = kafka_broker(Path({str(workdir)!r}))\n"
        "    b.start()\n"
        "    Path(b.workdir, 'pgid').write_text(str(b.proc.pid))\n"
        "    assert False, 'this test fails with its broker running'\n")
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_fails.py")], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == 1, proc.stdout.decode()[-3000:]
    assert b"this test fails with its broker running" in proc.stdout
    pgid = int((workdir / "pgid").read_text())
    assert not _group_alive(pgid)
    assert _processes_naming(str(workdir)) == []


def test_sigterm_to_the_test_run_stops_its_brokers(tmp_path, kafka_classpath):
    """A test run stopped by SIGTERM (by hand, or a CI timeout) skips atexit; the brokers it
    started are stopped all the same."""
    import signal
    import subprocess
    import sys
    import time
    workdir = tmp_path / "terminated-broker"
    _use_our_fixtures(tmp_path)
    (tmp_path / "test_waits.py").write_text(
        "import time\n"
        "from pathlib import Path\n"
        "def test_waits(kafka_broker):\n"
        f"    b = kafka_broker(Path({str(workdir)!r}))\n"
        "    b.start()\n"
        "    Path(b.workdir, 'pgid').write_text(str(b.proc.pid))\n"
        "    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path / "test_waits.py")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(3000):
            if (workdir / "pgid").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert (workdir / "pgid").exists(), proc.communicate()[0].decode()[-3000:]
        pgid = int((workdir / "pgid").read_text())
        assert _group_alive(pgid)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert not _group_alive(pgid)
    assert _processes_naming(str(workdir)) == []


def test_cluster_ids_never_read_as_an_option():
    """One random id in 64 starts with '-' in URL-safe base64; StorageTool's argument parser
    then reads it as an option ("--cluster-id/-t: expected one argument"). Kafka's
    Uuid.randomUuid draws again; so does the fixture."""
    from kafkabroker import _cluster_id
    ids = [_cluster_id() for _ in range(5000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
