"""The JSON vocabulary every command's ``--format json`` shares (README, "JSON output"; the
schema: kafkalog_cli/schema/output.schema.json).

Keys are camelCase as Kafka's own JSON (kafka-dump-log's field names: ``baseOffset``,
``lastOffset``, ``isValid``...), never with spaces; every record-level object carries ``topic``
and ``partition`` (from the partition directory's name, null when it is not ``<topic>-<n>``);
bytes (keys, values, header values) are UTF-8 text when they are valid UTF-8, otherwise
``{"base64": "..."}``: exactly what ``kafkalog append --input-format jsonl`` reads back
(log/append_input.py ``_bytes``), so nothing is lost either way. A run ends with one
``{"type": "summary", "command": ...}`` object.
"""

from __future__ import annotations

import binascii
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .log.names import topic_partition

_SNAKE = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """``index_offset`` -> ``indexOffset``; a camelCase name is left as it is."""
    return _SNAKE.sub(lambda m: m.group(1).upper(), name)


def camel_keys(obj: Any) -> Any:
    """``obj`` with every dict key in it camelCase (values are left alone, strings too)."""
    if isinstance(obj, dict):
        return {camel(k) if isinstance(k, str) else k: camel_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [camel_keys(v) for v in obj]
    return obj


def bytes_json(data: Optional[bytes]) -> Any:
    """Bytes as JSON, losslessly: None as null, valid UTF-8 as its text, anything else as
    ``{"base64": "..."}``."""
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        # base64.b64encode's own call (the base64 module costs start-up)
        return {"base64": binascii.b2a_base64(data, newline=False).decode("ascii")}


def headers_json(headers: Iterable[Tuple[str, Optional[bytes]]]) -> List[List[Any]]:
    """Record headers as ``[[key, value], ...]`` (values as bytes_json), the form append reads."""
    return [[k, bytes_json(v)] for k, v in headers]


_PARTITIONS: Dict[str, Tuple[Optional[str], Optional[int]]] = {}


def partition_of(path: str) -> Tuple[Optional[str], Optional[int]]:
    """(topic, partition) of a file in a partition directory (or of the directory itself when
    ``path`` is one): from the directory's name ``<topic>-<n>``, (None, None) otherwise."""
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    found = _PARTITIONS.get(directory)
    if found is None:
        found = _PARTITIONS[directory] = topic_partition(directory)
    return found


def summary(command: str, **fields: Any) -> Dict[str, Any]:
    """The object that ends a run's JSON."""
    out: Dict[str, Any] = {"type": "summary", "command": command}
    out.update(camel_keys(fields))
    return out
