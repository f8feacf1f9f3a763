"""Registering runs in the records: what ``identify``, ``synthesize`` and ``drive`` read and
wrote (with content hashes, settings, dates, versions), and ``bemore import`` of existing output
folders and session logs. A file already recorded (same content hash) is not recorded twice.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bemore.errors import BemoreError, DataError
from bemore.records import recorder, store
from bemore.records.store import FileRef


def _config_refs(configs: dict[str, Any]) -> list[FileRef]:
    """FileRefs of the configuration files named in a run's settings (those that exist)."""
    refs = []
    for role, value in configs.items():
        if isinstance(value, (str, Path)) and Path(value).is_file():
            refs.append(FileRef.of("read", f"config:{role}", value))
    return refs


def register_identify(connection: sqlite3.Connection, athlete: str, started_utc: str,
                      trial: Path, out: Path, settings: dict[str, Any],
                      configs: dict[str, Any], outcome: str) -> int:
    """Record an identification of ``athlete``: the trial (its modification time is the trial's
    date), the configuration files, and OUT/athlete.json as her model; returns the run id."""
    athlete_json = out / "athlete.json"
    trial_ref = FileRef.of("read", "trial", trial)
    model_ref = FileRef.of("wrote", "athlete", athlete_json)
    row = recorder.model_row(athlete_json, model_ref.sha256, recorder.file_time_utc(trial),
                             trial_ref.sha256)
    files = [trial_ref, *_config_refs(configs), model_ref]
    return store.record_run(connection, "identify", athlete, started_utc,
                            {**settings, "configs": configs}, outcome, files, model=row)


def register_synthesis(connection: sqlite3.Connection, athlete: str, started_utc: str,
                       athlete_json: Path | None, out: Path, settings: dict[str, Any],
                       configs: dict[str, Any], outcome: str) -> int:
    """Record a synthesis for ``athlete``: the athlete.json it read (her model), the
    configuration files, OUT/gesture.json and OUT/setpoints.csv; returns the run id."""
    files = [FileRef.of("read", "athlete", athlete_json)] if athlete_json else []
    files += _config_refs(configs)
    gesture_ref = FileRef.of("wrote", "gesture", out / "gesture.json")
    files.append(gesture_ref)
    if (out / "setpoints.csv").is_file():
        files.append(FileRef.of("wrote", "setpoints", out / "setpoints.csv"))
    row = recorder.gesture_row(out / "gesture.json", gesture_ref.sha256,
                               files[0].sha256 if athlete_json else None)
    return store.record_run(connection, "synthesize", athlete, started_utc,
                            {**settings, "configs": configs}, outcome, files, gesture=row)


def register_session(connection: sqlite3.Connection, log: Path, athlete: str | None,
                     command: str, started_utc: str | None = None,
                     settings: dict[str, Any] | None = None) -> int | None:
    """Index a session log (hash, header, replay summary) for ``athlete``; returns the run id,
    or None when a log with the same content is already indexed."""
    ref = FileRef.of("wrote" if command == "drive" else "read", "session", log)
    if store.known_hash(connection, "session", ref.sha256):
        return None
    row = recorder.session_row(log, ref.sha256)
    files = [ref]
    header = recorder.session_header(log) or {}
    setpoints = header.get("setpoints")
    if isinstance(setpoints, str) and Path(setpoints).is_file():
        files.insert(0, FileRef.of("read", "setpoints", setpoints))
    return store.record_run(connection, command, athlete, started_utc or row["start_utc"],
                            settings or {"log": str(log)}, row["end_reason"], files,
                            session=row)


@dataclass
class ImportReport:
    """What ``bemore import`` did: lines of what it registered, skipped, or could not read."""

    registered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _owner(connection: sqlite3.Connection, athlete: str | None, found: str | None) -> str | None:
    """The athlete to record under: ``athlete`` (--athlete, must exist), else the name the file
    carries when the records know it, else None (recorded without an athlete)."""
    if athlete is not None:
        return store.get_athlete(connection, athlete).name
    if found:
        try:
            return store.get_athlete(connection, found).name
        except DataError:
            return None
    return None


def import_path(connection: sqlite3.Connection, path: Path, athlete: str | None = None
                ) -> ImportReport:
    """Register every athlete.json, gesture.json and session log (*.jsonl) under ``path`` (a
    folder, searched recursively, or one file). Models first, so that a gesture finds its model.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder to import")
    if athlete is not None:
        store.get_athlete(connection, athlete)  # an unknown athlete is one line, before anything
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    report = ImportReport()
    athletes = [p for p in files if p.name == "athlete.json"]
    gestures = [p for p in files if p.name == "gesture.json"]
    logs = [p for p in files if p.suffix == ".jsonl"]
    if path.is_file() and not (athletes or gestures or logs):
        raise DataError(f"{path}: not an athlete.json, gesture.json or session log (.jsonl)")
    for kind, items, one in (("model", athletes, _import_model),
                             ("gesture", gestures, _import_gesture),
                             ("session", logs, _import_session)):
        for item in items:
            try:
                line = one(connection, item, athlete)
            except BemoreError as error:
                report.refused.append(f"{item}: {error}".replace(f"{item}: {item}: ", f"{item}: "))
                continue
            if line is None:
                report.skipped.append(f"{item}: {kind} already recorded")
            else:
                report.registered.append(line)
    return report


def _import_model(connection: sqlite3.Connection, athlete_json: Path, athlete: str | None
                  ) -> str | None:
    ref = FileRef.of("read", "athlete", athlete_json)
    if store.known_hash(connection, "model", ref.sha256):
        return None
    trial = recorder.athlete_trial(athlete_json)
    trial_ref = FileRef.of("read", "trial", trial) if trial else None
    trial_utc = recorder.file_time_utc(trial or athlete_json)
    row = recorder.model_row(athlete_json, ref.sha256, trial_utc,
                             trial_ref.sha256 if trial_ref else None)
    owner = _owner(connection, athlete, recorder.athlete_profile_name(athlete_json))
    files = [trial_ref, ref] if trial_ref else [ref]
    store.record_run(connection, "import", owner, store.utc_now(), {"imported": str(athlete_json)},
                     row["verdict"], files, model=row)
    return f"model    {athlete_json}  ({owner or 'no athlete'}, trial {trial_utc[:10]}, fit " \
           f"{row['verdict']})"


def _import_gesture(connection: sqlite3.Connection, gesture_json: Path, athlete: str | None
                    ) -> str | None:
    ref = FileRef.of("read", "gesture", gesture_json)
    if store.known_hash(connection, "gesture", ref.sha256):
        return None
    model_json = recorder.gesture_athlete_json(gesture_json)
    model_ref = FileRef.of("read", "athlete", model_json) if model_json else None
    found = None
    if model_ref is not None:
        row = connection.execute(
            "SELECT a.name FROM model m JOIN athlete a ON a.id = m.athlete_id WHERE m.sha256 = ?",
            (model_ref.sha256,)).fetchone()
        found = row["name"] if row else None
    owner = _owner(connection, athlete, found)
    row = recorder.gesture_row(gesture_json, ref.sha256, model_ref.sha256 if model_ref else None)
    files = [model_ref, ref] if model_ref else [ref]
    store.record_run(connection, "import", owner, store.utc_now(),
                     {"imported": str(gesture_json)}, "feasible" if row["feasible"] else
                     "infeasible", files, gesture=row)
    return f"gesture  {gesture_json}  ({owner or 'no athlete'})"


def _import_session(connection: sqlite3.Connection, log: Path, athlete: str | None
                    ) -> str | None:
    if recorder.session_header(log) is None:
        raise DataError(f"{log}: not a bemore session log (no header line)")
    owner = _owner(connection, athlete, recorder.session_profile_name(log))
    run_id = register_session(connection, log, owner, "import")
    if run_id is None:
        return None
    row = connection.execute("SELECT mode, start_utc, end_reason FROM session WHERE run_id = ?",
                             (run_id,)).fetchone()
    return (f"session  {log}  ({owner or 'no athlete'}, {row['start_utc'][:16]}, {row['mode']}, "
            f"{row['end_reason']})")
