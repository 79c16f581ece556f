"""JSON text as Kafka's tools print a decoded message: Jackson's ``JsonNode.toString`` of what a
generated JSON converter (JsonConverterGenerator) builds. Compact, fields in the value's order,
float64 fields as Java's ``Double.toString`` (``1.048576E7``, not ``10485760.0``).

``json_text(value) -> str``
    The text of a value ``format/schema.py`` decoded, or of a dict holding such values one
    level down.
``java_double(x) -> str``
    Java's ``Double.toString`` alone, as Jackson writes a DoubleNode.
``compact_json(value) -> str``, ``java_json(value) -> str``, ``ESCAPE(text) -> str``
    The writers the compiled text readers of ``format/schema.py`` call: compact JSON, the same
    with doubles as Java writes them, and a string's quoted JSON text.
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["json_text", "java_double", "compact_json", "java_json", "ESCAPE", "WithDoubles"]


class WithDoubles(dict):
    """The value of a message whose layout holds float64 fields: json_text writes its doubles
    as Java does."""


ESCAPE: Callable[[str], str] = json.encoder.encode_basestring
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
compact_json: Callable[[Any], str] = _ENCODER.encode
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # the C encoder JSONEncoder.encode builds on every call, built once (no circular check:
    # decoded values are trees)
    _c_encode = _c_make_encoder(None, _ENCODER.default, json.encoder.encode_basestring, None,
                                ":", ",", False, False, True)

    def compact_json(value: Any) -> str:
        return "".join(_c_encode(value, 0))


def json_text(value: Any) -> str:
    """Compact JSON, as Jackson's JsonNode.toString writes a converter's output (doubles as
    Java's Double.toString: ``1.048576E7``, not ``10485760.0``), for a decoded value or an
    object holding decoded values."""
    kind = type(value)
    if kind is WithDoubles:
        return java_json(value)
    if kind is dict:
        for v in value.values():
            if type(v) is WithDoubles:
                return java_json(value)
    return compact_json(value)


def java_json(value: Any) -> str:
    """Compact JSON with every float as ``java_double`` writes it."""
    if isinstance(value, dict):
        return "{%s}" % ",".join("%s:%s" % (compact_json(k), java_json(v))
                                 for k, v in value.items())
    if isinstance(value, list):
        return "[%s]" % ",".join(java_json(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return compact_json(value)


def java_double(x: float) -> str:
    """Java's Double.toString, as Jackson writes a DoubleNode; NaN and the infinities as
    strings (Jackson's WRITE_NAN_AS_STRINGS, on by default)."""
    if x != x:
        return '"NaN"'
    if x in (float("inf"), float("-inf")):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign = "-" if x < 0 else ""
    # the shortest digits that read back as x (repr's), and the decimal exponent
    mantissa, _, exp_text = ("%r" % abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    exponent = int(exp_text or 0) + len(whole) - 1  # of the first digit
    if whole == "0":
        lead = len(frac) - len(frac.lstrip("0"))
        exponent = int(exp_text or 0) - lead - 1
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(x) < 1e7:
        if exponent >= 0:
            ints = digits[:exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1:] or "0"
        else:
            ints = "0"
            fraction = "0" * (-exponent - 1) + digits
        return "%s%s.%s" % (sign, ints, fraction)
    return "%s%s.%sE%d" % (sign, digits[0], digits[1:] or "0", exponent)

