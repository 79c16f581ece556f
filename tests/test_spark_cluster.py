"""`kafkalog export` on a real Spark standalone cluster (a master and two workers on loopback,
tests/sparkcluster.py): the rows equal kafka-python's reading of the same segments, and both
workers' executors run tasks (from the application's event log)."""

import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import sparkcluster
from dumpcheck import REPO
from test_spark import FIXTURES, arrow_rows, kafka_python_dir_rows, order, part_files

pytestmark = pytest.mark.slow


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
