"""The dump tests run twice: with kafkalog_cli's optional C fast paths (when built) and with the
pure-Python code they mirror, so both are checked against kafka-python in one pytest run.
A test module opts in with ``pytestmark = pytest.mark.usefixtures("implementation")``.
(``KAFKALOG_PURE_PYTHON=1 pytest`` additionally keeps the C modules from being imported at all.)

Tests that ask Apache Kafka itself (a broker, DumpLogSegments) carry the ``kafka`` mark
(``pytest -m "not kafka"`` leaves them out); their fixtures are below: ``kafka_traffic`` (real
traffic through a real broker, built once per run) and ``kafka_broker`` (a fresh broker for one
test, stopped whatever happens).

Slow tests carry the ``slow`` mark (the SIGKILL crash loops, fuzzing, millions of records) and
``pytest -m "not slow"`` is the quick suite; a test that starts a Spark session (one that uses
the ``spark`` fixture, directly or through another fixture) is marked slow here, so the quick
suite keeps the Spark commands' tests that need no JVM.
"""

import pytest

import kafkalog_cli.cli.render_kafka as _render
import kafkalog_cli.format.records as _records


def _native_available():
    return (getattr(_render, "_kafkatext", None) is not None
            or getattr(_records, "_speedups", None) is not None)


@pytest.fixture(params=["c", "py"] if _native_available() else ["py"])
def implementation(request, monkeypatch):
    """'c': whatever kafkalog_cli imported; 'py': its C modules switched off (in this process,
    and by KAFKALOG_PURE_PYTHON=1 for the subprocesses a test starts)."""
    if request.param == "py":
        if hasattr(_render, "_kafkatext"):
            monkeypatch.setattr(_render, "_kafkatext", None)
        if hasattr(_records, "_speedups"):
            monkeypatch.setattr(_records, "_speedups", None)
        monkeypatch.setenv("KAFKALOG_PURE_PYTHON", "1")
    return request.param


# -- Apache Kafka itself (tests/kafkajvm.py, kafkabroker.py, kafkatraffic.py) -------------------

# The longest test files, run first: with the suite spread over the cores (pytest-xdist, a
# file per worker at a time), a long file started last would run alone at the end.
LONGEST_FIRST = ("test_kafka_recover.py", "test_crash_state.py", "test_spark_cluster.py",
                 "test_kafka_dump.py", "test_loglog_rules.py", "test_recover_crash.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Mark every test that needs a Spark session slow, and every test that uses a Kafka
    fixture ``kafka`` (before ``-m`` deselects); the longest files first."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "spark" in names:
            item.add_marker(pytest.mark.slow)
        if any(n.startswith("kafka_") for n in names):
            item.add_marker(pytest.mark.kafka)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _kafka_or_fail():
    """Kafka's classpath, resolved once; a one-line failure naming what is missing."""
    import kafkajvm
    try:
        kafkajvm.java()
        return kafkajvm.classpath()
    except kafkajvm.KafkaUnavailable as e:
        pytest.fail(f"the Kafka tests cannot run: {e}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_classpath():
    return _kafka_or_fail()


@pytest.fixture(scope="session")
def kafka_traffic(tmp_path_factory, kafka_classpath):
    """Log directories a real broker wrote (kafkatraffic.build): ``.crashed`` and ``.clean``.
    Read-only for the tests: copy before changing anything."""
    import kafkatraffic
    return kafkatraffic.build(tmp_path_factory.mktemp("kafka-traffic"))


@pytest.fixture
def kafka_broker(tmp_path, kafka_classpath):
    """A factory of fresh brokers (``kafka_broker(**config)``, not started); every broker it
    made is stopped at the end of the test, whatever happens."""
    import kafkabroker
    made = []

    def make(workdir=None, **config):
        b = kafkabroker.Broker(workdir or tmp_path / f"broker-{len(made)}", **config)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
