"""output.schema.json: the JSON Schema of every command's ``--format json`` objects (README,
"JSON output"); ``load()`` reads it."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

PATH = os.path.join(os.path.dirname(__file__), "output.schema.json")


def load() -> Dict[str, Any]:
    with open(PATH, encoding="utf-8") as f:
        out: Dict[str, Any] = json.load(f)
    return out
