"""Bytes as text the way Java's ``new String(bytes, UTF_8)`` decodes them (Kafka's
``Utils.utf8``, which DumpLogSegments and the message readers use for keys, payloads, header
keys and string fields).

Valid UTF-8 decodes the same everywhere; malformed input becomes U+FFFD, and where the
replacement characters fall follows JDK 17's ``String.decodeUTF8_UTF16``. Python's "replace"
handler agrees with it on every malformed sequence but one: a lead byte 0xED followed by
0xA0-0xBF (the start of a UTF-16 surrogate, which UTF-8 may not encode). Python replaces the
0xED and each byte after it apart; Java replaces the 0xED, the 0xA0-0xBF and a third byte when
it is a continuation byte with one U+FFFD (``malformed3``, ``isSurrogate``).

``ERRORS`` names the codec error handler; the C modules pass it to ``PyUnicode_DecodeUTF8``.
Importing the package registers it.
"""

from __future__ import annotations

import codecs
from typing import Tuple, Union

ERRORS = "kafkalog-java-utf8"


def _java_replace(exc: UnicodeError) -> Tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, at = exc.object, exc.start
    if data[at] == 0xED and at + 1 < len(data) and 0xA0 <= data[at + 1] <= 0xBF:
        if at + 2 < len(data) and data[at + 2] & 0xC0 == 0x80:
            return "\ufffd", at + 3
        return "\ufffd", at + 2
    return "\ufffd", exc.end


codecs.register_error(ERRORS, _java_replace)


def java_text(data: Union[bytes, bytearray, memoryview]) -> str:
    """``data`` decoded as Java's ``new String(data, UTF_8)`` decodes it."""
    return str(data, "utf-8", ERRORS)
