"""The coach's records: athletes, trials, models, gestures and bench sessions over a season.

An embedded SQLite database (docs/records.md): :mod:`bemore.records.db` opens and migrates it,
:mod:`bemore.records.store` is the repository API, :mod:`bemore.records.register` records the
runs of the commands and imports existing outputs, :mod:`bemore.records.history` reads a season
back, :mod:`bemore.records.cli` holds the commands. Every command still works from files alone;
the records are used when a command is given ``--athlete NAME``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bemore.errors import ConfigError, DataError


def open_athlete(name: str, db_path: str | Path | None, profile: object | None = None
                 ) -> tuple[sqlite3.Connection, object]:
    """(connection, :class:`~bemore.records.store.AthleteRecord`) for ``--athlete NAME``:
    opened before a command runs, so that a bad database or an unknown athlete is one line
    before any work. ``profile`` is the command's ``--profile``: both at once is refused."""
    from bemore.records.store import get_athlete

    if profile is not None:
        raise ConfigError("--athlete and --profile both give her profile: use one of them")
    connection = open_existing(db_path, name)
    return connection, get_athlete(connection, name)


def open_existing(db_path: str | Path | None, name: str | None = None) -> sqlite3.Connection:
    """The records database at ``db_path`` (``--db``; default: the usual place), opened for a
    command that only reads it or needs an athlete in it: a database that does not exist is
    refused in one line and none is created (a mistyped --db makes no empty database), naming
    the athlete ``name`` the command was asked about when there is one ('unknown athlete
    'Zoe': no records database at PATH yet (add her with bemore athlete add)')."""
    from bemore.records.db import connect, resolve_path

    path = resolve_path(db_path)
    if not path.exists():
        if name is None:
            raise DataError(f"no records database at {path} yet (add an athlete with bemore "
                            "athlete add)")
        raise DataError(f"unknown athlete {name.strip()!r}: no records database at {path} yet "
                        "(add her with bemore athlete add)")
    return connect(path)
