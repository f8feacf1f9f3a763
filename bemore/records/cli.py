"""The records commands: ``bemore athlete``, ``import``, ``history``, ``squad``, ``export`` and
``db`` (registered by ``bemore/cli.py``). Every one takes ``--db PATH`` (default: ``$BEMORE_DB``,
else ``$XDG_DATA_HOME/bemore/records.sqlite``; created by the first ``athlete add`` or ``import``;
the commands that only read refuse one that does not exist)."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import click

from bemore.errors import DataError
from bemore.paths import write_file, write_together

DB_HELP = ("Records database (default: $BEMORE_DB, else $XDG_DATA_HOME/bemore/records.sqlite, "
           "i.e. ~/.local/share/bemore/records.sqlite; created by athlete add or import).")

db_option = click.option("--db", "db_path", type=click.Path(path_type=Path), default=None,
                         metavar="PATH", help=DB_HELP)


def _connect(db_path: Path | None) -> sqlite3.Connection:
    """The records database, created on first use (the commands that add records)."""
    from bemore.records.db import connect

    return connect(db_path)


def _existing(db_path: Path | None, name: str | None = None) -> sqlite3.Connection:
    """The records database for a command that only reads it: one that does not exist is
    refused in one line, none created (:func:`bemore.records.open_existing`)."""
    from bemore.records import open_existing

    return open_existing(db_path, name)


def _athlete_lines(record: Any) -> list[str]:
    return [f"name        {record.name}",
            f"sex         {record.sex}",
            f"body mass   {record.body_mass_kg:g} kg (measured {record.body_mass_on})",
            f"stature     {record.stature_m:g} m",
            f"torque      {record.torque_limit_nm:g} N·m per shoulder (peak)",
            f"flexion     {record.flexion_range_deg[0]:g} … {record.flexion_range_deg[1]:g} deg",
            f"added       {record.created_utc}"]


@click.group("athlete")
def athlete_group() -> None:
    """The squad's athletes: add, list, show, edit (a body mass is a dated series).

    \b
    Reads:  the records database (--db).
    Writes: the records database (add, edit); nothing else.
    Example:
        bemore athlete add Ada --body-mass 41.5 --stature 1.50 --sex F --torque-limit 75
        bemore athlete edit Ada --body-mass 42.0 --on 2026-10-01
    """


@athlete_group.command("add")
@click.argument("name")
@click.option("--body-mass", "body_mass_kg", type=float, required=True, metavar="KG",
              help="Body mass (kg), in (10, 200].")
@click.option("--stature", "stature_m", type=float, required=True, metavar="M",
              help="Stature (m), in (0.8, 2.5].")
@click.option("--sex", type=click.Choice(["F", "M"]), required=True, help="Sex (F or M).")
@click.option("--torque-limit", "torque_limit_nm", type=float, default=None, metavar="N·m",
              help="Peak shoulder torque per shoulder (default: the default athlete's 70 N·m, "
              "controller/profile.py).")
@click.option("--flexion-range", type=(float, float), default=None, metavar="LOW HIGH",
              help="Shoulder-flexion range in deg (default -10 170).")
@click.option("--on", "measured_on", default=None, metavar="DATE",
              help="Date of the body-mass measurement, YYYY-MM-DD (default: today).")
@db_option
def athlete_add(name: str, body_mass_kg: float, stature_m: float, sex: str,
                torque_limit_nm: float | None, flexion_range: tuple[float, float] | None,
                measured_on: str | None, db_path: Path | None) -> None:
    """Add an athlete (her profile: body mass, stature, sex, shoulder limits).

    \b
    Reads:  the records database (--db).
    Writes: one athlete and her first body-mass measurement.
    Example:
        bemore athlete add Ada --body-mass 41.5 --stature 1.50 --sex F --torque-limit 75
    """
    from bemore.records import store

    record = store.add_athlete(_connect(db_path), name, sex, body_mass_kg, stature_m,
                               torque_limit_nm, flexion_range, _date(measured_on))
    click.echo(f"added athlete {record.name!r}")
    for line in _athlete_lines(record):
        click.echo(line)


def _date(text: str | None) -> str | None:
    """A YYYY-MM-DD date, checked (None stays None)."""
    if text is None:
        return None
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise DataError(f"--on {text!r}: expected a date YYYY-MM-DD") from None


@athlete_group.command("list")
@db_option
def athlete_list(db_path: Path | None) -> None:
    """List the athletes: name, sex, latest body mass, stature, torque limit.

    \b
    Reads:  the records database (--db).
    Writes: nothing.
    Example:
        bemore athlete list
    """
    from bemore.records import store

    athletes = store.list_athletes(_existing(db_path))
    if not athletes:
        click.echo("no athletes yet (bemore athlete add NAME --body-mass KG --stature M --sex F)")
        return
    click.echo(f"{'name':<20}{'sex':<5}{'body mass':>16}{'stature':>10}{'torque limit':>15}")
    for a in athletes:
        click.echo(f"{a.name:<20}{a.sex:<5}{a.body_mass_kg:>10g} kg   {a.stature_m:>6g} m"
                   f"{a.torque_limit_nm:>11g} N·m")


@athlete_group.command("show")
@click.argument("name")
@db_option
def athlete_show(name: str, db_path: Path | None) -> None:
    """Show one athlete: her profile, body-mass series and edits.

    \b
    Reads:  the records database (--db).
    Writes: nothing.
    Example:
        bemore athlete show Ada
    """
    from bemore.records import store

    connection = _existing(db_path, name)
    record = store.get_athlete(connection, name)
    for line in _athlete_lines(record):
        click.echo(line)
    click.echo("body mass series: " + ", ".join(
        f"{on} {kg:g} kg" for on, kg in store.body_mass_series(connection, record.name)))
    for change in store.athlete_changes(connection, record.name):
        click.echo(f"edited {change['changed_utc']}: {change['field']} {change['old_value']} → "
                   f"{change['new_value']}")


@athlete_group.command("edit")
@click.argument("name")
@click.option("--body-mass", "body_mass_kg", type=float, default=None, metavar="KG",
              help="A new body-mass measurement (kept beside the earlier ones; default: "
              "unchanged).")
@click.option("--on", "measured_on", default=None, metavar="DATE",
              help="Date of that measurement, YYYY-MM-DD (default: today).")
@click.option("--stature", "stature_m", type=float, default=None, metavar="M",
              help="Stature (m), in (0.8, 2.5] (default: unchanged).")
@click.option("--torque-limit", "torque_limit_nm", type=float, default=None, metavar="N·m",
              help="Peak shoulder torque per shoulder (default: unchanged).")
@click.option("--flexion-range", type=(float, float), default=None, metavar="LOW HIGH",
              help="Shoulder-flexion range in deg (default: unchanged).")
@db_option
def athlete_edit(name: str, body_mass_kg: float | None, measured_on: str | None,
                 stature_m: float | None, torque_limit_nm: float | None,
                 flexion_range: tuple[float, float] | None, db_path: Path | None) -> None:
    """Record a body-mass measurement, or change her stature or limits (history kept).

    \b
    Reads:  the records database (--db).
    Writes: a dated body-mass row and/or the changed fields with their old values.
    Example:
        bemore athlete edit Ada --body-mass 42.0 --on 2026-10-01 --torque-limit 80
    """
    from bemore.records import store

    if all(v is None for v in (body_mass_kg, stature_m, torque_limit_nm, flexion_range)):
        raise DataError("athlete edit: nothing to change (--body-mass, --stature, "
                        "--torque-limit, --flexion-range)")
    record = store.edit_athlete(_existing(db_path, name), name, body_mass_kg=body_mass_kg,
                                measured_on=_date(measured_on), stature_m=stature_m,
                                torque_limit_nm=torque_limit_nm, flexion_range_deg=flexion_range)
    for line in _athlete_lines(record):
        click.echo(line)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--athlete", default=None, metavar="NAME",
              help="Record everything under this athlete (default: the athlete named in each "
              "file when the records know her, else none).")
@db_option
def import_command(paths: tuple[Path, ...], athlete: str | None, db_path: Path | None) -> None:
    """Register existing output folders and session logs in the records.

    \b
    Reads:  each PATH: a folder (searched recursively) or a file: athlete.json (bemore
            identify; the trial it names, hashed, its modification time as the trial's date),
            gesture.json (bemore synthesize), session logs *.jsonl (bemore drive: hash, header,
            the replay summary).
    Writes: the records database (--db); the files stay where they are. A file already
            recorded (same SHA-256) is skipped; a file that cannot be read is one line and the
            exit code 2 after the others are imported.
    Example:
        bemore import out/ --athlete Ada
    """
    from bemore.records.register import import_path

    connection = _connect(db_path)
    refused = []
    for path in paths:
        report = import_path(connection, path, athlete)
        for line in report.registered:
            click.echo(f"registered {line}")
        for line in report.skipped:
            click.echo(f"skipped    {line}")
        refused += report.refused
    for line in refused:
        click.echo(f"bemore: error: {line}", err=True)
    if refused:
        raise SystemExit(2)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "athlete"


@click.command("history")
@click.argument("name")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="PNG to write, a .png name (default: NAME_history.png in the current "
                   "folder).")
@click.option("--no-plot", is_flag=True, help="Print only.")
@click.option("--json", "as_json", is_flag=True, help="Print the season as JSON instead.")
@db_option
def history_command(name: str, plot_path: Path | None, no_plot: bool, as_json: bool,
                    db_path: Path | None) -> None:
    """An athlete's season: parameters with standard errors, gestures, bench sessions.

    \b
    Reads:  the records database (--db).
    Writes: the history on stdout (the key parameters ± standard error per trial, the drift of
            every parameter from the first trial to the last in % and in standard errors, the
            gestures, the sessions) and a PNG (--plot; one panel per parameter with a ±2
            standard-error band, the gestures' peak torque and timing, the sessions' tracking).
    Example:
        bemore history Ada --plot out/ada_history.png
    """
    from bemore.paths import check_output_folder
    from bemore.records.history import history_lines, plot_history, season

    if plot_path is not None and not no_plot:  # before the history: one line, nothing printed
        if plot_path.suffix.lower() != ".png":
            raise DataError(f"{plot_path}: history --plot writes a PNG: name it .png")
        check_output_folder(plot_path.parent, files=[plot_path.name])
    data = season(_existing(db_path, name), name)
    if as_json:
        click.echo(json.dumps(data.to_dict(), indent=2))
    else:
        for line in history_lines(data):
            click.echo(line)
    if not no_plot:
        path = plot_history(data, plot_path or Path(f"{_slug(data.athlete.name)}_history.png"))
        click.echo(f"plot: {path}")


@click.command("squad")
@db_option
def squad_command(db_path: Path | None) -> None:
    """One line per athlete: last trial, model age, gesture current or stale, last session.

    \b
    Reads:  the records database (--db).
    Writes: the table on stdout. A gesture is STALE when it was synthesized from another model
            than her latest (re-run bemore synthesize --athlete NAME).
    Example:
        bemore squad
    """
    from bemore.records.history import squad_lines

    for line in squad_lines(_existing(db_path)):
        click.echo(line)


EXPORT_TABLES = {
    "athletes": "SELECT a.name, a.sex, a.stature_m, a.torque_limit_nm, a.flexion_min_deg, "
                "a.flexion_max_deg, a.created_utc FROM athlete a ORDER BY a.name",
    "body_mass": "SELECT a.name AS athlete, m.measured_on, m.kg FROM body_mass m JOIN athlete a "
                 "ON a.id = m.athlete_id ORDER BY a.name, m.measured_on",
    "runs": "SELECT r.id AS run, a.name AS athlete, r.command, r.started_utc, r.finished_utc, "
            "r.version, r.outcome, r.settings_json FROM run r LEFT JOIN athlete a ON "
            "a.id = r.athlete_id ORDER BY r.id",
    "files": "SELECT f.run_id AS run, f.direction, f.role, f.path, f.sha256, f.size_bytes FROM "
             "file f ORDER BY f.id",
    "gestures": "SELECT a.name AS athlete, g.run_id AS run, g.sha256, g.model_sha256, "
                "g.feasible, g.final_time_s, g.flexion_end_time_s, g.max_flexion_deg, "
                "g.objective, g.objective_value, g.peak_torque_nm FROM gesture g LEFT JOIN "
                "athlete a ON a.id = g.athlete_id ORDER BY g.id",
    "sessions": "SELECT a.name AS athlete, s.run_id AS run, s.start_utc, s.path, s.sha256, "
                "s.gesture, s.mode, s.load_pct, s.speed, s.reps, s.duration_s, "
                "s.tracking_rms_deg, s.tracking_max_deg, s.peak_commanded_torque_nm, s.faults, "
                "s.end_reason FROM session s LEFT JOIN athlete a ON a.id = s.athlete_id "
                "ORDER BY s.start_utc",
}


def _export_rows(connection: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Every table as rows, the models in long form (one row per model and parameter)."""
    tables = {name: [dict(row) for row in connection.execute(sql)]
              for name, sql in EXPORT_TABLES.items()}
    parameters = []
    for row in connection.execute(
            "SELECT a.name AS athlete, m.run_id, m.sha256, m.trial_sha256, m.trial_utc, "
            "m.verdict, m.rms_distance_mm, m.parameters_json FROM model m LEFT JOIN athlete a "
            "ON a.id = m.athlete_id ORDER BY m.trial_utc, m.id"):
        base = {k: row[k] for k in dict(row) if k != "parameters_json"}
        for name, entry in json.loads(row["parameters_json"]).items():
            parameters.append({**base, "parameter": name, **entry})
    tables["model_parameters"] = parameters
    return tables


@click.command("export")
@click.argument("out", type=click.Path(path_type=Path))
@db_option
def export_command(out: Path, db_path: Path | None) -> None:
    """Export the records: a folder of CSV files, or one JSON file (OUT ending in .json).

    \b
    Reads:  the records database (--db).
    Writes: OUT/athletes.csv, body_mass.csv, runs.csv, files.csv, model_parameters.csv (one row
            per model and parameter: value, standard error, unit, identifiable), gestures.csv,
            sessions.csv; or OUT.json with the same tables.
    Example:
        bemore export out/records          # CSV files
        bemore export out/records.json     # one JSON document
    """
    from bemore.paths import output_folder

    tables = _export_rows(_existing(db_path))
    if out.suffix.lower() == ".json":
        output_folder(out.parent, files=[out.name])
        write_file(out, json.dumps(tables, indent=1) + "\n")
        click.echo(f"wrote {out} ({', '.join(f'{k} {len(v)}' for k, v in tables.items())})")
        return
    if out.exists() and not out.is_dir():
        raise DataError(f"{out}: exists and is not a folder (a .json name writes one file)")
    output_folder(out, files=[f"{name}.csv" for name in tables])
    files = {}
    for name, rows in tables.items():
        handle = io.StringIO(newline="")
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        files[out / f"{name}.csv"] = handle.getvalue()
    write_together(files)
    click.echo(f"wrote {out}/: " + ", ".join(f"{k}.csv ({_count(len(v), 'row')})"
                                             for k, v in tables.items()))


def _count(count: int, noun: str) -> str:
    """'1 row', '3 rows': a count and its noun, plural unless it is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


@click.group("db")
def db_group() -> None:
    """The records database file: where it is, its schema version, an online backup.

    \b
    Reads:  the records database (--db).
    Writes: db backup FILE: a consistent copy, taken while other commands may write.
    Example:
        bemore db info
        bemore db backup /media/usb/records-2026-11-26.sqlite
    """


@db_group.command("info")
@db_option
def db_info(db_path: Path | None) -> None:
    """Print the database's path, schema version and row counts.

    \b
    Reads:  the records database (--db).
    Writes: nothing.
    Example:
        bemore db info
    """
    from bemore.records.db import resolve_path, schema_version

    connection = _existing(db_path)
    click.echo(f"database  {resolve_path(db_path)}")
    click.echo(f"schema    version {schema_version(connection)}")
    counts = []
    for table in ("athlete", "body_mass", "run", "file", "model", "gesture", "session"):
        (count,) = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        counts.append(f"{table} {count}")
    click.echo("rows      " + ", ".join(counts))


@db_group.command("backup")
@click.argument("target", type=click.Path(path_type=Path))
@db_option
def db_backup(target: Path, db_path: Path | None) -> None:
    """Copy the records to TARGET with SQLite's online backup (safe while others write).

    \b
    Reads:  the records database (--db).
    Writes: TARGET (never overwritten), then checks it (PRAGMA integrity_check). Restore: copy
            TARGET back to the database path, or use it directly with --db TARGET.
    Example:
        bemore db backup /media/usb/records-2026-11-26.sqlite
    """
    from bemore.records.db import backup, connect

    path = backup(_existing(db_path), target)
    check = connect(path)
    (verdict,) = check.execute("PRAGMA integrity_check").fetchone()
    (athletes,) = check.execute("SELECT count(*) FROM athlete").fetchone()
    (run_count,) = check.execute("SELECT count(*) FROM run").fetchone()
    check.close()
    if verdict != "ok":
        raise DataError(f"{path}: the backup fails its integrity check ({verdict})")
    click.echo(f"backup {path}: integrity ok, {_count(athletes, 'athlete')}, "
               f"{_count(run_count, 'run')}")
