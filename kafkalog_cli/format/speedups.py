"""The format layer's optional C module (``_speedups.c``, built when a compiler is there), or
None without it; ``KAFKALOG_PURE_PYTHON=1`` leaves it out, so that tests can check both. Each
module that has a C mirror takes its functions from here."""

import os
from types import ModuleType
from typing import Optional

speedups: Optional[ModuleType] = None
if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from . import _speedups as speedups  # type: ignore[attr-defined,no-redef,unused-ignore]  # C, no stub
    except ImportError:  # pragma: no cover - depends on the build
        speedups = None
