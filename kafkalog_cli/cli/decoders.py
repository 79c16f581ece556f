"""Key/value decoders (--key-decoder, --value-decoder) and timestamp rendering.

Each decoder has two faces: ``text(bytes) -> str`` for the line formats and
``json(bytes) -> JSON value`` for JSON Lines. Null stays None in both.
"""

import base64
import binascii
import datetime
import json

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


def _json_value(b):
    try:
        return json.loads(b)
    except ValueError:
        return _string(b)


def _json_text(b):
    try:
        return json.dumps(json.loads(b), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
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
