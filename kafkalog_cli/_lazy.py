"""Modules loaded when first used: start-up time counts for a tool run from cron and shell loops.

``verify = lazy_module("kafkalog_cli.log.verify")`` binds a module object whose code runs the
first time one of its attributes is read (importlib.util.LazyLoader); a command that never reads
one never pays for the import. Names read at import time (a base class, a default argument)
load the module at once, so this is for modules used inside functions only.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module ``name`` (absolute), loaded when one of its attributes is first read."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError("No module named %r" % name, name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system does: the package's attribute is its submodule
        setattr(sys.modules[parent], child, module)
    return module
