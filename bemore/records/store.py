"""The records' repository API: athletes, their body-mass series, and what each run read and
wrote. Every statement takes its values as parameters (a name is data, never SQL).

A write is one transaction (:func:`bemore.records.db.transaction`): a run is recorded with all
its files, its model, gesture or session, or not at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bemore import __version__
from bemore.errors import DataError
from bemore.profile import DEFAULT_PROFILE, AthleteProfile
from bemore.records.db import transaction


def utc_now() -> str:
    """The current UTC time, ISO 8601 with milliseconds (sorts as text)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def file_sha256(path: str | Path) -> tuple[str, int]:
    """(hex SHA-256 of the file's bytes, size in bytes); DataError if it cannot be read."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    except OSError as error:
        raise DataError(f"{path}: cannot read it to record it ({error.strerror})") from None
    return digest.hexdigest(), size


@dataclass(frozen=True)
class AthleteRecord:
    """An athlete as the records hold her: identity, stature, limits and her latest body mass
    (kg, measured on ``body_mass_on``, an ISO date)."""

    id: int
    name: str
    sex: str
    stature_m: float
    torque_limit_nm: float
    flexion_range_deg: tuple[float, float]
    body_mass_kg: float
    body_mass_on: str
    created_utc: str

    def to_profile(self) -> AthleteProfile:
        """The :class:`~bemore.profile.AthleteProfile` the commands take (latest body mass)."""
        return AthleteProfile(
            name=self.name, sex=self.sex,  # type: ignore[arg-type]
            body_mass_kg=self.body_mass_kg, stature_m=self.stature_m,
            shoulder_torque_limit_Nm=self.torque_limit_nm,
            shoulder_flexion_range_deg=self.flexion_range_deg,
        )

    def profile_toml(self) -> str:
        """The profile as an athlete-profile TOML text (configs/athlete.example.toml keys), for
        a command that reads a profile file."""
        profile = self.to_profile()
        low, high = profile.shoulder_flexion_range_deg
        return (f"name = {json.dumps(profile.name, ensure_ascii=False)}\n"
                f"sex = \"{profile.sex}\"\n"
                f"body_mass_kg = {profile.body_mass_kg!r}\n"
                f"stature_m = {profile.stature_m!r}\n"
                f"shoulder_torque_limit_Nm = {profile.shoulder_torque_limit_Nm!r}\n"
                f"shoulder_flexion_range_deg = [{low!r}, {high!r}]\n")


def _check_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise DataError("an athlete's name cannot be empty")
    return cleaned


def _check_values(body_mass_kg: float | None = None, stature_m: float | None = None,
                  torque_limit_nm: float | None = None) -> None:
    """The profile's bounds (bemore/profile.py ProfileFile), one line per bad value."""
    if body_mass_kg is not None and not 10.0 < body_mass_kg <= 200.0:
        raise DataError(f"body mass {body_mass_kg:g} kg: must be in (10, 200] kg")
    if stature_m is not None and not 0.8 < stature_m <= 2.5:
        raise DataError(f"stature {stature_m:g} m: must be in (0.8, 2.5] m")
    if torque_limit_nm is not None and not 0.0 < torque_limit_nm <= 500.0:
        raise DataError(f"torque limit {torque_limit_nm:g} N·m: must be in (0, 500] N·m")


def add_athlete(connection: sqlite3.Connection, name: str, sex: str, body_mass_kg: float,
                stature_m: float, torque_limit_nm: float | None = None,
                flexion_range_deg: tuple[float, float] | None = None,
                measured_on: str | None = None) -> AthleteRecord:
    """Add an athlete with her first body mass (kg, measured on ``measured_on``, default
    today); limits default to the documented default athlete's. Duplicate name: DataError."""
    name = _check_name(name)
    if sex not in ("F", "M"):
        raise DataError(f"sex {sex!r}: must be F or M")
    _check_values(body_mass_kg, stature_m, torque_limit_nm)
    low, high = flexion_range_deg or DEFAULT_PROFILE.shoulder_flexion_range_deg
    if not -90.0 <= low < high <= 200.0:
        raise DataError(f"shoulder flexion range [{low:g}, {high:g}] deg: must be [most "
                        "extended, most flexed] with -90 <= first < second <= 200")
    now = utc_now()
    with transaction(connection):
        if _athlete_id(connection, name) is not None:
            raise DataError(f"athlete {name!r} already exists (bemore athlete show {name!r}; "
                            "edit with bemore athlete edit)")
        cursor = connection.execute(
            "INSERT INTO athlete (name, sex, stature_m, torque_limit_nm, flexion_min_deg, "
            "flexion_max_deg, created_utc) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, sex, float(stature_m),
             float(torque_limit_nm or DEFAULT_PROFILE.shoulder_torque_limit_Nm),
             float(low), float(high), now))
        connection.execute(
            "INSERT INTO body_mass (athlete_id, measured_on, kg, recorded_utc) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, measured_on or now[:10], float(body_mass_kg), now))
    return get_athlete(connection, name)


def _athlete_id(connection: sqlite3.Connection, name: str) -> int | None:
    row = connection.execute("SELECT id FROM athlete WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row["id"])


def get_athlete(connection: sqlite3.Connection, name: str) -> AthleteRecord:
    """The athlete called ``name``; an unknown name is one DataError line."""
    row = connection.execute(
        "SELECT a.*, m.kg, m.measured_on FROM athlete a JOIN body_mass m ON m.id = ("
        "SELECT id FROM body_mass WHERE athlete_id = a.id ORDER BY measured_on DESC, id DESC "
        "LIMIT 1) WHERE a.name = ?", (name.strip(),)).fetchone()
    if row is None:
        raise DataError(f"unknown athlete {name.strip()!r} (bemore athlete list; add her with "
                        "bemore athlete add)")
    return AthleteRecord(
        id=int(row["id"]), name=row["name"], sex=row["sex"], stature_m=float(row["stature_m"]),
        torque_limit_nm=float(row["torque_limit_nm"]),
        flexion_range_deg=(float(row["flexion_min_deg"]), float(row["flexion_max_deg"])),
        body_mass_kg=float(row["kg"]), body_mass_on=row["measured_on"],
        created_utc=row["created_utc"])


def list_athletes(connection: sqlite3.Connection) -> list[AthleteRecord]:
    """Every athlete, by name."""
    names = [row["name"] for row in connection.execute("SELECT name FROM athlete ORDER BY name")]
    return [get_athlete(connection, name) for name in names]


def body_mass_series(connection: sqlite3.Connection, name: str) -> list[tuple[str, float]]:
    """(ISO date, kg) of every body-mass measurement of the athlete, oldest first."""
    athlete = get_athlete(connection, name)
    return [(row["measured_on"], float(row["kg"])) for row in connection.execute(
        "SELECT measured_on, kg FROM body_mass WHERE athlete_id = ? ORDER BY measured_on, id",
        (athlete.id,))]


def edit_athlete(connection: sqlite3.Connection, name: str, *, body_mass_kg: float | None = None,
                 measured_on: str | None = None, stature_m: float | None = None,
                 torque_limit_nm: float | None = None,
                 flexion_range_deg: tuple[float, float] | None = None) -> AthleteRecord:
    """Record a new body-mass measurement (a dated series) and/or change her stature or limits;
    every change of a field is kept in ``athlete_change`` (old value, new value, when)."""
    _check_values(body_mass_kg, stature_m, torque_limit_nm)
    athlete = get_athlete(connection, name)
    now = utc_now()
    changes: list[tuple[str, str, Any, Any]] = []
    if stature_m is not None:
        changes.append(("stature_m", "stature_m", athlete.stature_m, float(stature_m)))
    if torque_limit_nm is not None:
        changes.append(("torque_limit_nm", "torque_limit_nm", athlete.torque_limit_nm,
                        float(torque_limit_nm)))
    if flexion_range_deg is not None:
        low, high = flexion_range_deg
        if not -90.0 <= low < high <= 200.0:
            raise DataError(f"shoulder flexion range [{low:g}, {high:g}] deg: must be [most "
                            "extended, most flexed] with -90 <= first < second <= 200")
        changes.append(("flexion_min_deg", "flexion_min_deg", athlete.flexion_range_deg[0],
                        float(low)))
        changes.append(("flexion_max_deg", "flexion_max_deg", athlete.flexion_range_deg[1],
                        float(high)))
    columns = {"stature_m", "torque_limit_nm", "flexion_min_deg", "flexion_max_deg"}
    with transaction(connection):
        for field_name, column, old, new in changes:
            assert column in columns  # column names come from this list, never from input
            connection.execute(f"UPDATE athlete SET {column} = ? WHERE id = ?", (new, athlete.id))
            connection.execute(
                "INSERT INTO athlete_change (athlete_id, field, old_value, new_value, "
                "changed_utc) VALUES (?, ?, ?, ?, ?)",
                (athlete.id, field_name, repr(old), repr(new), now))
        if body_mass_kg is not None:
            connection.execute(
                "INSERT INTO body_mass (athlete_id, measured_on, kg, recorded_utc) "
                "VALUES (?, ?, ?, ?)", (athlete.id, measured_on or now[:10], float(body_mass_kg),
                                        now))
    return get_athlete(connection, athlete.name)


def athlete_changes(connection: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """The edits of the athlete's stature and limits, oldest first."""
    athlete = get_athlete(connection, name)
    return [dict(row) for row in connection.execute(
        "SELECT field, old_value, new_value, changed_utc FROM athlete_change WHERE "
        "athlete_id = ? ORDER BY id", (athlete.id,))]


@dataclass
class FileRef:
    """A file a run read or wrote: direction ('read'|'wrote'), role (trial, config, athlete,
    gesture, setpoints, session…), path, SHA-256 and size in bytes."""

    direction: str
    role: str
    path: str
    sha256: str
    size_bytes: int

    @classmethod
    def of(cls, direction: str, role: str, path: str | Path) -> FileRef:
        """Hash ``path`` now (its content as the run read or wrote it)."""
        sha, size = file_sha256(path)
        return cls(direction, role, str(Path(path).resolve()), sha, size)


def record_run(connection: sqlite3.Connection, command: str, athlete: str | None,
               started_utc: str, settings: dict[str, Any], outcome: str,
               files: list[FileRef], model: dict[str, Any] | None = None,
               gesture: dict[str, Any] | None = None,
               session: dict[str, Any] | None = None) -> int:
    """Record one run of ``command`` with its files and what it produced, in one transaction;
    returns the run's id. ``model``/``gesture``/``session`` are rows of those tables (column →
    value, without ids)."""
    athlete_id = None if athlete is None else get_athlete(connection, athlete).id
    with transaction(connection):
        cursor = connection.execute(
            "INSERT INTO run (athlete_id, command, started_utc, finished_utc, version, "
            "settings_json, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (athlete_id, command, started_utc, utc_now(), __version__,
             json.dumps(settings, default=str, sort_keys=True), outcome))
        run_id = int(cursor.lastrowid)
        connection.executemany(
            "INSERT INTO file (run_id, direction, role, path, sha256, size_bytes) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, f.direction, f.role, f.path, f.sha256, f.size_bytes) for f in files])
        for table, row in (("model", model), ("gesture", gesture), ("session", session)):
            if row is not None:
                _insert(connection, table, {**row, "run_id": run_id, "athlete_id": athlete_id})
    return run_id


_COLUMNS = {
    "model": ("run_id", "athlete_id", "sha256", "trial_sha256", "trial_utc", "verdict",
              "rms_distance_mm", "parameters_json"),
    "gesture": ("run_id", "athlete_id", "sha256", "model_sha256", "feasible", "final_time_s",
                "flexion_end_time_s", "max_flexion_deg", "objective", "objective_value",
                "peak_torque_nm"),
    "session": ("run_id", "athlete_id", "sha256", "path", "start_utc", "gesture", "mode",
                "load_pct", "speed", "reps", "duration_s", "tracking_rms_deg", "tracking_max_deg",
                "peak_commanded_torque_nm", "faults", "end_reason"),
}


def _insert(connection: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    """INSERT a row; table and column names come from :data:`_COLUMNS`, values are parameters."""
    columns = _COLUMNS[table]
    unknown = set(row) - set(columns)
    if unknown:
        raise ValueError(f"{table}: unknown columns {sorted(unknown)}")
    names = [c for c in columns if c in row]
    connection.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                       f"({', '.join('?' * len(names))})", [row[c] for c in names])


def known_hash(connection: sqlite3.Connection, table: str, sha256: str) -> bool:
    """Whether a model, gesture or session with this content hash is already recorded."""
    if table not in _COLUMNS:
        raise ValueError(table)
    return connection.execute(f"SELECT 1 FROM {table} WHERE sha256 = ?",
                              (sha256,)).fetchone() is not None


def models(connection: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """The athlete's identified models, by trial date: trial_utc, verdict, rms_distance_mm,
    parameters {name: {value, standard_error, unit, identifiable}}, sha256, recorded_utc."""
    athlete = get_athlete(connection, name)
    rows = connection.execute(
        "SELECT m.*, r.finished_utc AS recorded_utc FROM model m JOIN run r ON r.id = m.run_id "
        "WHERE m.athlete_id = ? ORDER BY m.trial_utc, m.id", (athlete.id,))
    out = []
    for row in rows:
        item = dict(row)
        item["parameters"] = json.loads(item.pop("parameters_json"))
        out.append(item)
    return out


def gestures(connection: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """The athlete's synthesized gestures, oldest first (with recorded_utc)."""
    athlete = get_athlete(connection, name)
    return [dict(row) for row in connection.execute(
        "SELECT g.*, r.finished_utc AS recorded_utc FROM gesture g JOIN run r ON r.id = g.run_id "
        "WHERE g.athlete_id = ? ORDER BY r.finished_utc, g.id", (athlete.id,))]


def sessions(connection: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """The athlete's bench sessions, oldest first."""
    athlete = get_athlete(connection, name)
    return [dict(row) for row in connection.execute(
        "SELECT * FROM session WHERE athlete_id = ? ORDER BY start_utc, id", (athlete.id,))]


def runs(connection: sqlite3.Connection, name: str | None = None) -> list[dict[str, Any]]:
    """Every recorded run (of one athlete if ``name``), oldest first, with its files."""
    if name is None:
        rows = connection.execute("SELECT * FROM run ORDER BY id").fetchall()
    else:
        athlete = get_athlete(connection, name)
        rows = connection.execute("SELECT * FROM run WHERE athlete_id = ? ORDER BY id",
                                  (athlete.id,)).fetchall()
    out = []
    for row in rows:
        item = dict(row)
        item["settings"] = json.loads(item.pop("settings_json"))
        item["files"] = [dict(f) for f in connection.execute(
            "SELECT direction, role, path, sha256, size_bytes FROM file WHERE run_id = ? "
            "ORDER BY id", (row["id"],))]
        out.append(item)
    return out


def latest_model_file(connection: sqlite3.Connection, name: str) -> Path:
    """The athlete.json of her latest model (by trial date), checked against its recorded hash;
    DataError when she has none or the file is gone or changed."""
    athlete = get_athlete(connection, name)
    row = connection.execute(
        "SELECT sha256, trial_utc FROM model WHERE athlete_id = ? ORDER BY trial_utc DESC, "
        "id DESC LIMIT 1", (athlete.id,)).fetchone()
    if row is None:
        raise DataError(f"athlete {athlete.name!r} has no identified model in the records "
                        "(bemore identify TRIAL --athlete NAME, or give ATHLETE_JSON)")
    paths = [r["path"] for r in connection.execute(
        "SELECT DISTINCT path FROM file WHERE sha256 = ? AND role = 'athlete' ORDER BY id DESC",
        (row["sha256"],))]
    for path in paths:
        if Path(path).is_file() and file_sha256(path)[0] == row["sha256"]:
            return Path(path)
    raise DataError(f"the athlete.json of {athlete.name!r}'s latest model (trial "
                    f"{row['trial_utc'][:10]}) is no longer at {', '.join(paths) or '?'} "
                    "with its recorded content: give ATHLETE_JSON")
