"""Files and directories of a Kafka log, and the operations on them."""

from __future__ import annotations
