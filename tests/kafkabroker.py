"""A real Apache Kafka broker for the tests: KRaft, combined broker and controller, on 127.0.0.1.

``Broker(workdir, **config)`` writes a ``server.properties``, formats the log directory with
Kafka's ``StorageTool`` (``--standalone``: this node is the one voter) and starts ``kafka.Kafka``
in a process group of its own on free ports. ``start()`` waits until it serves (a metadata
request answered through the client listener); ``stop()`` sends SIGTERM and waits for the
clean shutdown (the broker then writes its checkpoints and producer snapshots); ``kill()`` sends
SIGKILL to the process group, as a crash. ``close()`` stops whatever is still running of its own
process group, and nothing else; the ``broker`` fixtures call it whatever happens.

The same log directory can be started again (``start()`` after ``stop()``/``kill()``): that is
the broker's own recovery (``LogLoader``) the recover tests compare with.
``Broker.on_copy(src_logdir, workdir)`` copies a log directory a ``Broker`` formatted (its KRaft
metadata, ``__cluster_metadata-0`` and ``meta.properties``, come along: the same cluster and
node) into ``workdir/logdir`` and returns a broker that starts on it without formatting.
"""

import atexit
import base64
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
import weakref
from pathlib import Path

import kafkajvm

# Broker settings every test broker has: one node, small and fast. A test adds or overrides any.
BASE_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.index.interval.bytes": "512",
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "60000",
    "log.cleaner.backoff.ms": "500",
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.max.snapshot.interval.ms": "5000",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
}

# The broker JVM: small heap (-Xmx512m), G1 as kafka-server-start.sh uses.
# -XX:TieredStopAtLevel=1 (C1 only): a test broker lives seconds to a minute, and on a 2-core
# machine C2's compilations compete with start-up (measured: start to serving 12 s -> 8 s).
BROKER_JVM_OPTIONS = ("-Xmx512m", "-Xms128m", "-XX:+UseG1GC", "-XX:-UsePerfData",
                      "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Djava.awt.headless=true")

LOG4J2 = """\
Configuration:
  name: kafkalog-tests
  Appenders:
    Console:
      name: STDOUT
      target: SYSTEM_OUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    """A random id as Kafka's Uuid.randomUuid makes one: 16 bytes in URL-safe base64 without
    padding, drawn again while it starts with '-' (which a command line reads as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def copy_logdir(src, dst):
    """Copy a log directory as it is (symlinks as symlinks), keeping files sparse: a broker's
    active segment has a pre-allocated 10 MiB .index and .timeindex of zeros (sparse where
    the file system allows), which a plain copy would write out in full."""
    if shutil.which("cp"):
        subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
    else:
        shutil.copytree(src, dst, symlinks=True)


def offset_checkpoint(path) -> dict:
    """{(topic, partition): offset} of an offset checkpoint file as the broker writes it
    (OffsetCheckpointFile: version 0, the entry count, then "topic partition offset" lines);
    a file not there, or empty (the broker's before its first write): {}."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, (path, lines)
    out = {}
    for line in lines[2:]:
        topic, p, offset = line.rsplit(" ", 2)
        out[(topic, int(p))] = int(offset)
    return out


def segment_files(directory) -> dict:
    """{name: bytes} of a partition directory's .log, .index, .timeindex and .txnindex files."""
    directory = Path(directory)
    kinds = (".log", ".index", ".timeindex", ".txnindex")
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory))
            if n.endswith(kinds)}


class BrokerError(Exception):
    pass


# Every Broker made in this process; whatever still runs when the process exits is killed (a
# backstop behind the fixtures' own teardown: no broker outlives the test run).
_BROKERS: "weakref.WeakSet[Broker]" = weakref.WeakSet()


@atexit.register
def _close_all():
    for broker in list(_BROKERS):
        broker.close()


def _close_all_on_sigterm():
    """SIGTERM to the test process (a run stopped by hand, a CI timeout) skips atexit: kill
    this process's brokers first, then let SIGTERM do what it did before. Installed once, from
    the main thread, over the default disposition only."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum, frame):
        _close_all()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


class Broker:
    def __init__(self, workdir, version=kafkajvm.KAFKA, **config):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logdir = self.workdir / "logdir"
        self.version = version
        self.config = dict(BASE_CONFIG)
        self.config.update({k.replace("_", "."): str(v) for k, v in config.items()})
        self.proc = None
        self.port = None
        self.controller_port = None
        self.starts = 0
        _BROKERS.add(self)

    # -- set-up ---------------------------------------------------------------------------------

    @classmethod
    def on_copy(cls, src_logdir, workdir, version=kafkajvm.KAFKA, **config):
        """A broker on a copy of ``src_logdir`` (made by a Broker with the same ``config``, and
        not in use) at ``workdir/logdir``: its ``start()`` loads the copy as it finds it (the
        configuration is written, nothing is formatted; ports are chosen afresh)."""
        broker = cls(workdir, version, **config)
        copy_logdir(src_logdir, broker.logdir)
        broker._write_config()
        return broker

    def _write_config(self):
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        cfg = dict(self.config)
        cfg.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.logdir),
        })
        # A topic config such as segment.bytes set on the broker is log.segment.bytes; the
        # caller names them as the broker does.
        text = "".join(f"{k}={v}\n" for k, v in sorted(cfg.items()))
        (self.workdir / "server.properties").write_text(text)
        (self.workdir / "log4j2.yaml").write_text(LOG4J2)

    def format(self):
        """Format a fresh KRaft log directory (StorageTool format --standalone)."""
        self._write_config()
        proc = kafkajvm.run_class(
            "kafka.tools.StorageTool",
            ["format", f"--cluster-id={_cluster_id()}", "-c", self.workdir / "server.properties",
             "--standalone"], self.version, timeout=300,
            jvm_options=kafkajvm.TOOL_JVM_OPTIONS)
        if proc.returncode != 0:
            raise BrokerError("StorageTool format failed: "
                              + (proc.stdout + proc.stderr).decode(errors="replace")[-2000:])
        return self

    # -- running --------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=120):
        """Start kafka.Kafka on the log directory and wait until it answers a metadata request."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerError("the broker is already running")
        if not (self.workdir / "server.properties").exists():
            self.format()
        else:
            self._write_config()
        self.starts += 1
        _close_all_on_sigterm()
        out = open(self.workdir / f"broker-{self.starts}.out", "wb")
        self.proc = subprocess.Popen(
            [kafkajvm.java(), *BROKER_JVM_OPTIONS,
             f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
             f"-Dkafka.logs.dir={self.workdir}",
             # the native libraries lz4-java and snappy-java unpack: in the broker's workdir
             f"-Djava.io.tmpdir={self.workdir}",
             "-cp", kafkajvm.classpath(self.version), "kafka.Kafka",
             str(self.workdir / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.workdir)
        out.close()
        self._wait_serving(timeout)
        return self

    def _api_versions_answered(self) -> bool:
        """One ApiVersionsRequest (v0) on the client listener, answered within a second: the
        broker processes requests (SocketServer.enableRequestProcessing). Cheap to repeat,
        where a kafka-python client that finds the port closed backs off for seconds."""
        request = struct.pack(">hhih", 18, 0, 1, 4) + b"wait"
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(struct.pack(">i", len(request)) + request)
                return len(s.recv(8)) >= 8
        except OSError:
            return False

    def _wait_serving(self, timeout):
        from kafka import KafkaAdminClient
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError(f"the broker exited with {self.proc.returncode}: "
                                  + self.log_tail())
            if not self._api_versions_answered():
                time.sleep(0.1)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                         request_timeout_ms=5000)
                try:
                    admin.describe_cluster()
                finally:
                    admin.close()
                return
            except Exception as e:  # not serving yet
                last = e
                time.sleep(0.3)
        raise BrokerError(f"the broker did not serve within {timeout}s ({last!r}): "
                          + self.log_tail())

    def log_tail(self, lines=30) -> str:
        path = self.workdir / f"broker-{self.starts}.out"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        path = self.workdir / f"broker-{self.starts}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, timeout=120):
        """A clean shutdown: SIGTERM, then wait for the JVM to exit."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerError(f"the broker did not stop within {timeout}s after SIGTERM")
        self._reap_group()
        self.proc = None

    def kill(self):
        """A crash: SIGKILL to the broker's process group."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None

    def _reap_group(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self):
        """Stop whatever runs of this broker's own process group (SIGKILL)."""
        if self.proc is not None:
            self.kill()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- clients --------------------------------------------------------------------------------

    def admin(self):
        from kafka import KafkaAdminClient
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)

    def create_topic(self, name, partitions=1, **configs):
        from kafka.admin import NewTopic
        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1, topic_configs={
                k.replace("_", "."): str(v) for k, v in configs.items()})])
        finally:
            admin.close()
        self.wait_leaders([name])

    def alter_topic_configs(self, configs):
        """AlterConfigs for topics: ``configs`` maps a topic to {name: value}, which become
        exactly the topic's dynamic configs."""
        from kafka.admin import ConfigResource, ConfigResourceType
        admin = self.admin()
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
                k: str(v) for k, v in values.items()}) for topic, values in configs.items()])
        finally:
            admin.close()

    def wait_leaders(self, topics, timeout=60):
        """Wait until every partition of ``topics`` has a leader (is online)."""
        deadline = time.monotonic() + timeout
        admin = self.admin()
        try:
            while True:
                try:
                    described = admin.describe_topics(list(topics))
                    ok = all(t.get("error_code", 0) == 0 and t["partitions"]
                             and all(p["leader_id"] >= 0 for p in t["partitions"])
                             for t in described)
                except Exception:
                    ok = False
                if ok:
                    return
                if time.monotonic() > deadline:
                    raise BrokerError(f"no leader for {topics} within {timeout}s")
                time.sleep(0.2)
        finally:
            admin.close()

    def partition_dir(self, topic, partition=0) -> Path:
        return self.logdir / f"{topic}-{partition}"
