"""The times the options take (dump's --from-timestamp/--to-timestamp, --now): epoch
milliseconds or ISO 8601, one parser for every command."""

from __future__ import annotations

import datetime
import re
from typing import Optional

import click

from ..errors import UsageError
from .errors import fail
from .numbers import LONG_MAX, LONG_MIN

# ISO 8601 as people write it: a date, or a date and a time (T or a space between), seconds and
# their fraction optional, then Z or an offset (+01:00, +0100, +01); without one, UTC.
_ISO_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})"
                       r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
                       r"([Zz]|[+-]\d{2}(?::?\d{2})?)?)?")


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from ``text``: an integer (epoch ms, as Kafka's timestamps are) or an
    ISO 8601 date or time (a time without a zone is UTC; a fraction finer than a millisecond is
    dropped). ValueError for anything else."""
    text = text.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    m = _ISO_TIME.fullmatch(text)
    if m is None:
        raise ValueError("not epoch milliseconds nor an ISO 8601 date or time "
                         "(2024-01-01, 2024-01-01T10:00:00Z, 2024-01-01T10:00:00.250+02:00)")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    tz = datetime.timezone.utc
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            raise ValueError("the zone offset %s is out of range" % zone)
        tz = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
    micros = int(((fraction or "") + "000000")[:6])
    try:
        when = datetime.datetime(int(year), int(month), int(day), int(hour or 0),
                                 int(minute or 0), int(second or 0), micros, tzinfo=tz)
    except ValueError as e:
        raise ValueError("not a valid date or time (%s)" % e) from None
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (when - epoch) // datetime.timedelta(milliseconds=1)


def now_option(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[int]:
    """--now: epoch ms or ISO 8601 (as parse_timestamp reads them); a bad value is one line,
    exit 2."""
    if value is None:
        return None
    try:
        ms = parse_timestamp(value)
    except ValueError as e:
        fail(UsageError("--now %r: %s" % (value, e)))
    if not LONG_MIN <= ms <= LONG_MAX:  # as numbers.java_long bounds a number
        raise click.BadParameter("%s is not in the range %d<=x<=%d." % (value, LONG_MIN,
                                                                         LONG_MAX))
    return ms
