"""A Spark standalone cluster on loopback for the tests: a master and two workers (1 core, 1 GiB
each) started with pyspark's own ``spark-class``, and exactly those processes stopped afterwards
(each is started in its own session and its process group is killed)."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pyspark

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
SPARK_CLASS = os.path.join(SPARK_HOME, "bin", "spark-class")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root, workers=2, cores=1, memory="1g"):
        self.root = str(root)
        self.port, self.web_port = free_port(), free_port()
        self.url = "spark://127.0.0.1:%d" % self.port
        self.web = "http://127.0.0.1:%d" % self.web_port
        self.env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_WORKER_DIR=os.path.join(self.root, "work"),
                        SPARK_LOG_DIR=os.path.join(self.root, "logs"),
                        SPARK_NO_DAEMONIZE="1")
        self.procs = []
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.web_port))
        self.wait(lambda state: state.get("status") == "ALIVE", "the master")
        self.workers = 0
        self.add_workers(workers, cores, memory)

    def add_workers(self, n, cores=1, memory="1g", wait=True):
        for _ in range(n):
            self._start("worker%d" % self.workers, "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                        "--webui-port", str(free_port()), self.url)
            self.workers += 1
        if wait:
            self.wait(lambda state: state.get("aliveworkers") == self.workers,
                      "%d workers" % self.workers)

    def _start(self, name, cls, *args):
        log = open(os.path.join(self.root, name + ".log"), "wb")
        self.procs.append((subprocess.Popen([SPARK_CLASS, cls, *args], env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True),
                           log))

    def state(self):
        try:
            with urllib.request.urlopen(self.web + "/json/", timeout=5) as r:
                return json.load(r)
        except (OSError, ValueError):
            return {}

    def wait(self, ready, what, timeout=180):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for p, _ in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("a Spark process ended (exit %s) while waiting for %s; "
                                       "logs in %s" % (p.returncode, what, self.root))
            if ready(self.state()):
                return
            time.sleep(0.5)
        raise RuntimeError("%s not up after %ds; logs in %s" % (what, timeout, self.root))

    def stop(self):
        for p, log in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p, log in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=20)
            log.close()


def tasks_per_executor(event_log_dir):
    """{executor id: tasks ended} from the uncompressed event logs under ``event_log_dir``
    (spark.eventLog.compress=false)."""
    counts = {}
    for d, _, files in os.walk(event_log_dir):
        for n in files:
            if not n.startswith(("events_", "app-", "local-")) or n.endswith(".inprogress"):
                continue
            with open(os.path.join(d, n), encoding="utf-8") as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("Event") == "SparkListenerTaskEnd":
                        ex = e["Task Info"]["Executor ID"]
                        counts[ex] = counts.get(ex, 0) + 1
    return counts
