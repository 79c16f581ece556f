"""The numeric option types of the commands, bounded as Kafka's own settings and fields are: a
size, a count or an interval in bytes is a Java int, an offset, a timestamp, a duration or a
producer id a Java long, a producer epoch a short. A value out of range is a usage error naming
the option (exit 2), never an overflow deeper in."""

from __future__ import annotations

from typing import Optional

import click

SHORT_MAX = 2 ** 15 - 1
INT_MAX = 2 ** 31 - 1
LONG_MIN, LONG_MAX = -2 ** 63, 2 ** 63 - 1


def java_short(min: int) -> click.IntRange:
    return click.IntRange(min, SHORT_MAX)


def java_int(min: Optional[int]) -> click.IntRange:
    return click.IntRange(min if min is not None else -INT_MAX - 1, INT_MAX)


def java_long(min: Optional[int]) -> click.IntRange:
    return click.IntRange(min if min is not None else LONG_MIN, LONG_MAX)
