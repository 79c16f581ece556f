"""Key/value decoders (--key-decoder, --value-decoder) and timestamp rendering.

Each decoder has two faces: ``text(bytes) -> str`` for the line formats and
``json(bytes) -> JSON value`` for JSON Lines. Null stays None in both.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import os

DECODER_NAMES = ("string", "hex", "base64", "int", "long", "json")


def _string(b):
    # Java's new String(bytes, UTF_8) replaces each maximal malformed subsequence with U+FFFD,
    # as Python's "replace" handler does.
    return b.decode("utf-8", "replace")


def _fixed_int(size, name):
    def decode(b):
        if len(b) != size:
            return None
        return int.from_bytes(b, "big", signed=True)

    def text(b):
        v = decode(b)
        if v is None:
            return "<not a %d-byte %s: %s>" % (size, name, binascii.hexlify(b).decode())
        return str(v)

    def as_json(b):
        v = decode(b)
        return text(b) if v is None else v

    return text, as_json


class RawNumber:
    """A JSON number whose value no float holds (``1e999``), kept as the text it was written
    with: embedding it as a float would give ``Infinity``, which is not JSON."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


def _reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def _parse_float(text):
    value = float(text)
    return value if math.isfinite(value) else RawNumber(text)


def _strict_loads(b):
    """Parse ``b`` as strict JSON (RFC 8259): NaN, Infinity and -Infinity are refused, as JSON
    has no such literals; numbers too large for a float are kept as written (RawNumber)."""
    return json.loads(b, parse_constant=_reject_constant, parse_float=_parse_float)


class StrictEncoder:
    """``encode(obj) -> str``: strict JSON only (no NaN or Infinity: ValueError), with each
    RawNumber written as its own text."""

    def __init__(self, **options):
        self._token = "\x00kafkalog-raw-%s-" % os.urandom(8).hex()
        self._raws = []
        self._encode = json.JSONEncoder(allow_nan=False, default=self._default, **options).encode

    def _default(self, obj):
        if isinstance(obj, RawNumber):
            self._raws.append(obj.text)
            return "%s%d" % (self._token, len(self._raws) - 1)
        raise TypeError("%s is not JSON serializable" % type(obj).__name__)

    def encode(self, obj):
        try:
            text = self._encode(obj)
        finally:
            raws, self._raws = self._raws, []
        for i, raw in enumerate(raws):
            text = text.replace(json.dumps("%s%d" % (self._token, i)), raw, 1)
        return text


_compact = StrictEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _json_value(b):
    """The payload parsed as strict JSON, to embed in JSON output; text that is not strict JSON
    (or nests too deep to parse) is embedded as a string, as the string decoder gives it."""
    try:
        return _strict_loads(b)
    except (ValueError, RecursionError):
        return _string(b)


def _json_text(b):
    try:
        return _compact(_strict_loads(b))
    except (ValueError, RecursionError):
        return _string(b)


def _b64(b):
    return base64.b64encode(b).decode("ascii")


def _hex(b):
    return b.hex()


_int_text, _int_json = _fixed_int(4, "int")
_long_text, _long_json = _fixed_int(8, "long")

TEXT = {"string": _string, "hex": _hex, "base64": _b64, "int": _int_text, "long": _long_text,
        "json": _json_text}
JSON = {"string": _string, "hex": _hex, "base64": _b64, "int": _int_json, "long": _long_json,
        "json": _json_value}

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def iso_time(ms):
    """Epoch milliseconds as an ISO-8601 UTC time, or None for -1 and out-of-range values."""
    if ms < 0:
        return None
    try:
        t = _EPOCH + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
