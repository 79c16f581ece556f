"""The dump tests run twice: with kafkalog_cli's optional C fast paths (when built) and with the
pure-Python code they mirror, so both are checked against kafka-python in one pytest run.
A test module opts in with ``pytestmark = pytest.mark.usefixtures("implementation")``.
(``KAFKALOG_PURE_PYTHON=1 pytest`` additionally keeps the C modules from being imported at all.)

Slow tests carry the ``slow`` mark (the SIGKILL crash loops, fuzzing, millions of records) and
``pytest -m "not slow"`` is the quick suite; a test that starts a Spark session (one that uses
the ``spark`` fixture, directly or through another fixture) is marked slow here, so the quick
suite keeps the Spark commands' tests that need no JVM.
"""

import pytest

import kafkalog_cli.cli.render as _render
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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Mark every test that needs a Spark session slow (before ``-m`` deselects)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
