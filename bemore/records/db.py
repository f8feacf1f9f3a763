"""The coach's records database: where it lives, how it is opened, its versioned schema.

One SQLite file (no server, no set-up step: the first command that adds records creates it), at

1. ``--db PATH`` when a command is given one, else
2. the ``BEMORE_DB`` environment variable, else
3. ``$XDG_DATA_HOME/bemore/records.sqlite`` (``~/.local/share/bemore/records.sqlite`` when
   ``XDG_DATA_HOME`` is unset).

Every connection runs in WAL mode (readers never block the writer), with foreign keys on and a
busy timeout, so that two commands writing at once (a batch and a drive) wait for each other
instead of failing. Writes go through :func:`transaction` (``BEGIN IMMEDIATE``: the write lock
is taken at the start, so two writers never deadlock on a lock upgrade). The schema is a list of
forward migrations (:data:`MIGRATIONS`); opening a file applies the missing ones in order, each
in its own transaction with the new ``PRAGMA user_version``. A file that is not a SQLite
database, or a SQLite database of another application, or of a newer bemore, is one
:class:`~bemore.errors.DataError` line.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from bemore.errors import DataError

#: ``PRAGMA application_id`` of a bemore records file ("bmre"), set by the first migration.
APPLICATION_ID = 0x626D7265

#: Seconds a writer waits for another writer's lock before giving up (one DataError line).
BUSY_TIMEOUT_S = 30.0

ENVIRONMENT_VARIABLE = "BEMORE_DB"

#: The schema, one forward migration per version: MIGRATIONS[k] takes version k to k + 1.
#: Never edit a released step; append a new one.
MIGRATIONS: tuple[str, ...] = (
    # 1: athletes with dated body-mass measurements, runs of the commands with the files each
    # read and wrote (content hashes), identified models and synthesized gestures.
    f"""
    PRAGMA application_id = {APPLICATION_ID};
    CREATE TABLE athlete (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        sex TEXT NOT NULL CHECK (sex IN ('F', 'M')),
        stature_m REAL NOT NULL CHECK (stature_m > 0),
        torque_limit_nm REAL NOT NULL CHECK (torque_limit_nm > 0),
        flexion_min_deg REAL NOT NULL,
        flexion_max_deg REAL NOT NULL,
        created_utc TEXT NOT NULL
    );
    CREATE TABLE body_mass (
        id INTEGER PRIMARY KEY,
        athlete_id INTEGER NOT NULL REFERENCES athlete(id) ON DELETE CASCADE,
        measured_on TEXT NOT NULL,
        kg REAL NOT NULL CHECK (kg > 0),
        recorded_utc TEXT NOT NULL
    );
    CREATE INDEX body_mass_by_athlete ON body_mass(athlete_id, measured_on);
    CREATE TABLE athlete_change (
        id INTEGER PRIMARY KEY,
        athlete_id INTEGER NOT NULL REFERENCES athlete(id) ON DELETE CASCADE,
        field TEXT NOT NULL,
        old_value TEXT,
        new_value TEXT,
        changed_utc TEXT NOT NULL
    );
    CREATE TABLE run (
        id INTEGER PRIMARY KEY,
        athlete_id INTEGER REFERENCES athlete(id) ON DELETE SET NULL,
        command TEXT NOT NULL,
        started_utc TEXT NOT NULL,
        finished_utc TEXT NOT NULL,
        version TEXT NOT NULL,
        settings_json TEXT NOT NULL,
        outcome TEXT NOT NULL
    );
    CREATE INDEX run_by_athlete ON run(athlete_id, started_utc);
    CREATE TABLE file (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
        direction TEXT NOT NULL CHECK (direction IN ('read', 'wrote')),
        role TEXT NOT NULL,
        path TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size_bytes INTEGER NOT NULL
    );
    CREATE INDEX file_by_hash ON file(sha256);
    CREATE TABLE model (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
        athlete_id INTEGER REFERENCES athlete(id) ON DELETE SET NULL,
        sha256 TEXT NOT NULL,
        trial_sha256 TEXT,
        trial_utc TEXT NOT NULL,
        verdict TEXT NOT NULL,
        rms_distance_mm REAL,
        parameters_json TEXT NOT NULL
    );
    CREATE TABLE gesture (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
        athlete_id INTEGER REFERENCES athlete(id) ON DELETE SET NULL,
        sha256 TEXT NOT NULL,
        model_sha256 TEXT,
        feasible INTEGER NOT NULL,
        final_time_s REAL,
        flexion_end_time_s REAL,
        max_flexion_deg REAL,
        objective TEXT,
        objective_value REAL,
        peak_torque_nm REAL
    );
    """,
    # 2: bench sessions, indexed from their JSON Lines logs (the log stays the record; the row
    # holds its hash and the figures a coach compares over a season).
    """
    CREATE TABLE session (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
        athlete_id INTEGER REFERENCES athlete(id) ON DELETE SET NULL,
        sha256 TEXT NOT NULL UNIQUE,
        path TEXT NOT NULL,
        start_utc TEXT NOT NULL,
        gesture TEXT NOT NULL,
        mode TEXT NOT NULL,
        load_pct REAL,
        speed REAL,
        reps INTEGER,
        duration_s REAL,
        tracking_rms_deg REAL,
        tracking_max_deg REAL,
        peak_commanded_torque_nm REAL,
        faults TEXT NOT NULL,
        end_reason TEXT NOT NULL
    );
    CREATE INDEX session_by_athlete ON session(athlete_id, start_utc);
    """,
    # 3: a session that never armed (nothing streamed, no telemetry) has no figures: the zeros
    # version 2 recorded for it (0 s, 0.000 deg, 0 N·m) were not measurements. NULL, as
    # bemore.records.recorder.session_row now records them (shown as —).
    """
    UPDATE session SET duration_s = NULL, tracking_rms_deg = NULL, tracking_max_deg = NULL,
        peak_commanded_torque_nm = NULL
    WHERE duration_s = 0 AND tracking_rms_deg = 0 AND tracking_max_deg = 0
        AND peak_commanded_torque_nm = 0;
    """,
)

LATEST_VERSION = len(MIGRATIONS)


def default_path() -> Path:
    """The records file when no ``--db`` is given: ``$BEMORE_DB``, else
    ``$XDG_DATA_HOME/bemore/records.sqlite`` (``~/.local/share`` without XDG_DATA_HOME)."""
    override = os.environ.get(ENVIRONMENT_VARIABLE)
    if override:
        return Path(override).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "bemore" / "records.sqlite"


def resolve_path(path: str | Path | None) -> Path:
    """``path`` if given (``--db``), else :func:`default_path`."""
    return Path(path).expanduser() if path else default_path()


def connect(path: str | Path | None = None, upto: int = LATEST_VERSION) -> sqlite3.Connection:
    """Open (creating it if needed) the records file and migrate it to version ``upto``.

    Returns a connection in autocommit mode (write with :func:`transaction`), rows as
    :class:`sqlite3.Row`. Raises DataError (one line) when the file cannot be used.
    """
    db_path = resolve_path(path)
    if db_path.is_dir():
        raise DataError(f"{db_path}: is a folder, not a records database (--db / "
                        f"{ENVIRONMENT_VARIABLE})")
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{db_path}: cannot create its folder ({error.strerror})") from None
    try:
        connection = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise DataError(f"{db_path}: cannot open the records database ({error})") from None
    connection.row_factory = sqlite3.Row
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        connection.execute("PRAGMA foreign_keys = ON")
        # every commit reaches the disk (a power cut loses nothing committed)
        connection.execute("PRAGMA synchronous = FULL")
        if mode.lower() != "wal":
            raise DataError(f"{db_path}: the database cannot use write-ahead logging ({mode})")
        _check_identity(connection, db_path)
        migrate(connection, upto)
    except sqlite3.DatabaseError as error:
        connection.close()
        raise DataError(f"{db_path}: not a usable records database ({error})") from None
    except BaseException:
        connection.close()
        raise
    return connection


def _check_identity(connection: sqlite3.Connection, db_path: Path) -> None:
    """Refuse a SQLite file of another application, or of a newer bemore schema."""
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    tables = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    if application_id != APPLICATION_ID and (tables or version):
        raise DataError(f"{db_path}: a SQLite database of another application, not bemore "
                        "records (choose another --db)")
    if version > LATEST_VERSION:
        raise DataError(f"{db_path}: records schema version {version} is newer than this "
                        f"bemore knows ({LATEST_VERSION}): update bemore")


def schema_version(connection: sqlite3.Connection) -> int:
    """The schema version of an open records database (``PRAGMA user_version``)."""
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def migrate(connection: sqlite3.Connection, upto: int = LATEST_VERSION) -> int:
    """Apply the missing forward migrations up to version ``upto``; returns the version.

    Each step runs in one transaction with its ``user_version``: a step is applied entirely or
    not at all, and two processes opening a new file at once apply it once.
    """
    while True:
        with transaction(connection):
            version = schema_version(connection)
            if version >= upto:
                return version
            for statement in _statements(MIGRATIONS[version]):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {version + 1}")


def _statements(script: str) -> list[str]:
    """The statements of a migration script (no literal in the schema holds a ';')."""
    return [part.strip() for part in script.split(";") if part.strip()]


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception): one atomic write."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def backup(connection: sqlite3.Connection, target: str | Path) -> Path:
    """Copy the open database to ``target`` with SQLite's online backup API (consistent while
    other processes write); returns the target path. Refuses to overwrite an existing file;
    its folder is made as every command's output folder (:func:`bemore.paths.output_folder`:
    missing parents made, one it cannot make or write in refused in one line); a copy that
    fails is removed, also in one line."""
    from bemore.paths import output_folder

    target_path = Path(target).expanduser()
    if os.path.lexists(target_path):
        raise DataError(f"{target_path}: exists; a backup never overwrites a file")
    output_folder(target_path.parent)
    try:
        destination = sqlite3.connect(target_path)
        try:
            connection.backup(destination)
        finally:
            destination.close()
    except sqlite3.Error as error:
        with contextlib.suppress(OSError):
            target_path.unlink()
        raise DataError(f"{target_path}: cannot write the backup ({error})") from None
    return target_path
