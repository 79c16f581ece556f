"""Which partitions a mutating command's PATH arguments stand for, grouped by log directory
(each log directory's .lock is taken once for all its partitions)."""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Tuple

import click

from ..errors import UsageError
from ..log.logdir import partitions_of
from .errors import error_text


def partitions_by_log_dir(paths: Iterable[str]) -> Tuple[Dict[str, List[str]], bool]:
    """({log dir: [partition dir, ...]}, whether every path could be read); errors are told
    on stderr as they are met."""
    groups: Dict[str, List[str]] = {}
    ok = True
    for path in paths:
        errors: List[Tuple[str, OSError]] = []
        try:
            for partition in partitions_of(path, errors):
                groups.setdefault(os.path.dirname(partition), []).append(partition)
        except UsageError as e:
            raise click.UsageError(str(e)) from None
        except OSError as e:
            errors.append((path, e))
        for where, error in errors:
            click.echo("kafkalog: " + error_text(error, where), err=True)
            ok = False
    return {d: list(dict.fromkeys(ps)) for d, ps in groups.items()}, ok
