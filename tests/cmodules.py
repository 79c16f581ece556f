"""The C modules under test: kafkalog_cli's own build, or, when KAFKALOG_C_MODULE_DIR names a
directory, the ones built there (.ci/sanitize builds them with AddressSanitizer and
UndefinedBehaviorSanitizer and runs the differential tests against them)."""

import glob
import importlib
import importlib.util
import os

MODULE_DIR = os.environ.get("KAFKALOG_C_MODULE_DIR")


def load(name, package):
    """The C module ``name`` (``_speedups``, ``_kafkatext``, ...): from MODULE_DIR when set, else
    ``package.name``; None when it is not built."""
    if MODULE_DIR:
        paths = glob.glob(os.path.join(MODULE_DIR, name + ".*.so")) + glob.glob(
            os.path.join(MODULE_DIR, name + ".so"))
        if not paths:
            return None
        spec = importlib.util.spec_from_file_location(name, paths[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module("%s.%s" % (package, name))
    except ImportError:
        return None
