"""The records database: migrations from the first schema, concurrent writers, SIGKILL during
writes, backup and restore, bad inputs as one line each."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.errors import DataError
from bemore.records import store
from bemore.records.db import APPLICATION_ID, LATEST_VERSION, MIGRATIONS, connect, schema_version

REPOSITORY = Path(__file__).resolve().parents[2]


def _writer(db: Path, tag: str, count: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.records.writer", str(db), tag,
                             str(count)], cwd=REPOSITORY, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_new_database_has_the_latest_schema_and_its_settings(tmp_path: Path) -> None:
    connection = connect(tmp_path / "deep" / "records.sqlite")  # its folder is created
    assert schema_version(connection) == LATEST_VERSION == len(MIGRATIONS) >= 2
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    assert connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_migrations_from_the_first_schema_keep_the_data(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    first = connect(db, upto=1)
    assert schema_version(first) == 1
    assert first.execute("SELECT name FROM sqlite_master WHERE name = 'session'").fetchone() \
        is None
    store.add_athlete(first, "Ada", "F", 41.1, 1.48, 75.0, measured_on="2026-09-01")
    store.edit_athlete(first, "Ada", body_mass_kg=41.6, measured_on="2026-10-01")
    run = store.record_run(first, "identify", "Ada", store.utc_now(), {"pack": 60}, "good",
                           [store.FileRef("read", "trial", "/t.c3d", "a" * 64, 3)],
                           model={"sha256": "b" * 64, "trial_utc": "2026-09-01T10:00:00+00:00",
                                  "verdict": "good", "parameters_json": "{}"})
    first.close()
    # each step from version 1 up to the last
    for version in range(2, LATEST_VERSION + 1):
        connection = connect(db, upto=version)
        assert schema_version(connection) == version
        connection.close()
    latest = connect(db)
    assert store.body_mass_series(latest, "Ada") == [("2026-09-01", 41.1), ("2026-10-01", 41.6)]
    assert store.get_athlete(latest, "Ada").torque_limit_nm == 75.0
    assert [r["id"] for r in store.runs(latest, "Ada")] == [run]
    # the table version 2 added works, with its foreign key to the runs of version 1
    store.record_run(latest, "import", "Ada", store.utc_now(), {}, "completed", [], session={
        "sha256": "c" * 64, "path": "/s.jsonl", "start_utc": "2026-10-02T10:00:00+00:00",
        "gesture": "g", "mode": "passive", "faults": "", "end_reason": "completed"})
    assert len(store.sessions(latest, "Ada")) == 1
    with pytest.raises(sqlite3.IntegrityError):
        latest.execute("INSERT INTO session (run_id, sha256, path, start_utc, gesture, mode, "
                       "faults, end_reason) VALUES (9999, 'd', 'p', 's', 'g', 'm', '', 'e')")


def test_migration_3_empties_the_zero_figures_of_sessions_that_never_armed(tmp_path) -> None:
    # Version 2 recorded a never-armed session's summary as zeros (0.000 deg read as perfect
    # tracking); version 3 makes them NULL ("—"), a measured session's figures untouched.
    db = tmp_path / "records.sqlite"
    old = connect(db, upto=2)
    store.add_athlete(old, "Ada", "F", 41.1, 1.48, 75.0)
    figures = {"not armed": (0.0, 0.0, 0.0, 0.0), "completed": (3.2, 0.404, 1.17, 21.5)}
    for index, (end, (duration, rms, peak, torque)) in enumerate(figures.items()):
        store.record_run(old, "drive", "Ada", store.utc_now(), {}, end, [], session={
            "sha256": str(index) * 64, "path": f"/s{index}.jsonl",
            "start_utc": f"2026-10-0{index + 1}T10:00:00+00:00", "gesture": "g",
            "mode": "passive", "duration_s": duration, "tracking_rms_deg": rms,
            "tracking_max_deg": peak, "peak_commanded_torque_nm": torque, "faults": "",
            "end_reason": end})
    old.close()
    measured = ("duration_s", "tracking_rms_deg", "tracking_max_deg", "peak_commanded_torque_nm")
    rows = {s["end_reason"]: tuple(s[key] for key in measured)
            for s in store.sessions(connect(db), "Ada")}
    assert rows == {"not armed": (None, None, None, None), "completed": figures["completed"]}


def test_two_processes_writing_200_records_each_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    connect(db).close()
    writers = [_writer(db, tag, 200) for tag in ("Ada", "Bea")]
    outputs = [writer.communicate(timeout=300) for writer in writers]
    for writer, (_, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err[-2000:]
    connection = connect(db)
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for tag, (out, _) in zip(("Ada", "Bea"), outputs, strict=True):
        assert out.split() == [w for i in range(200) for w in (tag, str(i))]
        recorded = store.runs(connection, tag)
        assert sorted(r["settings"]["index"] for r in recorded) == list(range(200))
        assert all(len(r["files"]) == 3 for r in recorded)
        assert len(store.body_mass_series(connection, tag)) == 201  # 200 + the first
    assert connection.execute("SELECT count(*) FROM run").fetchone()[0] == 400
    assert connection.execute("SELECT count(*) FROM file").fetchone()[0] == 1200


def test_sigkill_during_writes_leaves_every_committed_record(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    connect(db).close()
    for attempt in range(3):
        tag = f"Kill{attempt}"
        writer = _writer(db, tag, 0)
        committed: list[int] = []
        enough = threading.Event()

        def read(writer: subprocess.Popen = writer, committed: list[int] = committed,
                 enough: threading.Event = enough, target: int = 60 + 25 * attempt) -> None:
            for line in writer.stdout:
                committed.append(int(line.split()[1]))
                if len(committed) >= target:
                    enough.set()
            enough.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert enough.wait(120), writer.stderr.read()[-2000:]
        os.kill(writer.pid, signal.SIGKILL)  # mid-loop: it is always inside or between writes
        writer.wait(30)
        reader.join(30)
        assert writer.returncode == -signal.SIGKILL
        connection = connect(db)
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        recorded = store.runs(connection, tag)
        indices = sorted(r["settings"]["index"] for r in recorded)
        # every run it reported committed is there; at most the one being written is beyond
        assert set(committed) <= set(indices)
        assert indices == list(range(len(indices)))
        assert len(indices) - len(committed) <= 1
        # nothing half-written: every recorded run has its three files
        assert all(len(r["files"]) == 3 for r in recorded)
        connection.close()


def test_backup_and_restore_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    runner = CliRunner()
    for name in ("Ada", "Bea", "O'Brien; DROP TABLE athlete; --"):
        result = runner.invoke(cli, ["athlete", "add", name, "--body-mass", "40", "--stature",
                                     "1.5", "--sex", "F", "--db", str(db)])
        assert result.exit_code == 0, result.output
    connection = connect(db)
    store.record_run(connection, "identify", "Ada", store.utc_now(), {"k": 1}, "good",
                     [store.FileRef("read", "trial", "/t.c3d", "a" * 64, 3)])
    before = runner.invoke(cli, ["export", str(tmp_path / "before.json"), "--db", str(db)])
    assert before.exit_code == 0, before.output
    backup = tmp_path / "backups" / "records-copy.sqlite"
    result = runner.invoke(cli, ["db", "backup", str(backup), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"backup {backup}: integrity ok, 3 athletes, 1 run"
    # the original changes after the backup, then is lost
    store.add_athlete(connection, "Cleo", "F", 40.0, 1.5)
    connection.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(backup, db)  # restore
    after = runner.invoke(cli, ["export", str(tmp_path / "after.json"), "--db", str(db)])
    assert after.exit_code == 0, after.output
    assert (tmp_path / "after.json").read_text() == (tmp_path / "before.json").read_text()
    assert [a.name for a in store.list_athletes(connect(db))] == [
        "Ada", "Bea", "O'Brien; DROP TABLE athlete; --"]
    # a backup never overwrites a file
    again = runner.invoke(cli, ["db", "backup", str(backup), "--db", str(db)])
    assert again.exit_code == 2
    assert again.stderr.strip() == f"bemore: error: {backup}: exists; a backup never " \
        "overwrites a file"


def _one_line(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bemore: error: "), result.stderr
    return lines[0]


def test_bad_inputs_are_one_line_each(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"coach notes, not a database\n" * 100)
    assert _one_line(["athlete", "list", "--db", str(damaged)]) == (
        f"bemore: error: {damaged}: not a usable records database (file is not a database)")
    assert damaged.read_bytes() == b"coach notes, not a database\n" * 100  # left untouched

    foreign = tmp_path / "other.sqlite"
    other = sqlite3.connect(foreign)
    other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    other.commit()
    other.close()
    assert _one_line(["squad", "--db", str(foreign)]) == (
        f"bemore: error: {foreign}: a SQLite database of another application, not bemore "
        "records (choose another --db)")

    newer = tmp_path / "newer.sqlite"
    connection = connect(newer)
    connection.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    connection.close()
    assert "newer than this bemore knows" in _one_line(["athlete", "list", "--db", str(newer)])
    assert "is a folder" in _one_line(["athlete", "list", "--db", str(tmp_path)])

    db = str(tmp_path / "records.sqlite")
    add = ["athlete", "add", "Ada", "--body-mass", "41", "--stature", "1.5", "--sex", "F",
           "--db", db]
    assert CliRunner().invoke(cli, add).exit_code == 0
    assert _one_line(add) == ("bemore: error: athlete 'Ada' already exists (bemore athlete "
                              "show 'Ada'; edit with bemore athlete edit)")
    unknown = "bemore: error: unknown athlete 'Zoe' (bemore athlete list; add her with bemore " \
        "athlete add)"
    assert _one_line(["athlete", "show", "Zoe", "--db", db]) == unknown
    assert _one_line(["history", "Zoe", "--db", db]) == unknown
    assert _one_line(["identify", "t.c3d", "--athlete", "Zoe", "--db", db, "--out",
                      str(tmp_path / "x")]) == unknown
    assert _one_line(["synthesize", "--athlete", "Zoe", "--db", db, "--out",
                      str(tmp_path / "x")]) == unknown
    assert _one_line(["drive", "s.csv", "--athlete", "Zoe", "--db", db, "--log",
                      str(tmp_path / "s.jsonl")]) == unknown
    assert _one_line(["athlete", "add", "Bea", "--body-mass", "400", "--stature", "1.5",
                      "--sex", "F", "--db", db]) == (
        "bemore: error: body mass 400 kg: must be in (10, 200] kg")
    assert _one_line(["synthesize", "--athlete", "Ada", "--db", db, "--out",
                      str(tmp_path / "x")]) == (
        "bemore: error: athlete 'Ada' has no identified model in the records (bemore identify "
        "TRIAL --athlete NAME, or give ATHLETE_JSON)")
    assert _one_line(["import", str(tmp_path / "missing"), "--db", db]) == (
        f"bemore: error: {tmp_path / 'missing'}: no such file or folder to import")


def test_an_athlete_named_where_there_is_no_database_creates_none(tmp_path: Path) -> None:
    """A mistyped --athlete (or --db) is one line, and leaves no empty database behind."""
    db = tmp_path / "nowhere" / "records.sqlite"
    unknown = (f"bemore: error: unknown athlete 'Zoe': no records database at {db} yet (add her "
               "with bemore athlete add)")
    for command in (["identify", "t.c3d"], ["synthesize"], ["drive", "s.csv", "--plan"]):
        assert _one_line([*command, "--athlete", "Zoe", "--db", str(db)]) == unknown, command
    assert not db.exists() and not db.parent.exists()


def test_names_are_data(tmp_path: Path) -> None:
    connection = connect(tmp_path / "records.sqlite")
    name = "x'); DROP TABLE athlete; --"
    store.add_athlete(connection, name, "F", 41.1, 1.48)
    assert store.get_athlete(connection, name).name == name
    with pytest.raises(DataError, match="unknown athlete"):
        store.get_athlete(connection, "x' OR '1'='1")
    assert [a.name for a in store.list_athletes(connection)] == [name]


def test_backup_folder_as_every_output_folder(tmp_path: Path, unwritable_folder: Path) -> None:
    """db backup makes a missing folder as --out does and refuses one it cannot write in, in
    one line (a read-only folder had been a traceback: sqlite3's 'unable to open database
    file')."""
    db = tmp_path / "records.sqlite"
    store.add_athlete(connect(db), "Ada", "F", 40.0, 1.5)
    target = unwritable_folder / "b.sqlite"
    line = _one_line(["db", "backup", str(target), "--db", str(db)])
    assert line.startswith(f"bemore: error: {unwritable_folder}: ") and not target.exists()
    deep = tmp_path / "new" / "dir" / "b.sqlite"
    result = CliRunner().invoke(cli, ["db", "backup", str(deep), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"backup {deep}: integrity ok, 1 athlete, 0 runs"
    export = CliRunner().invoke(cli, ["export", str(tmp_path / "csv"), "--db", str(db)])
    assert export.exit_code == 0, export.output
    assert "athletes.csv (1 row), body_mass.csv (1 row), runs.csv (0 rows)" in export.stdout


@pytest.mark.parametrize("command", [["history", "Zoe", "--no-plot"], ["squad"], ["db", "info"],
                                     ["export", "x"], ["db", "backup", "b.sqlite"],
                                     ["athlete", "list"], ["athlete", "show", "Zoe"]])
def test_reading_commands_create_no_database(tmp_path: Path, command: list[str]) -> None:
    """A mistyped --db given to a command that only reads the records is one line, and no
    folder or empty database is made (the commands had created both)."""
    db = tmp_path / "typo" / "x.sqlite"
    where = f"no records database at {db} yet"
    expected = (f"bemore: error: unknown athlete 'Zoe': {where} (add her with bemore athlete add)"
                if "Zoe" in command else
                f"bemore: error: {where} (add an athlete with bemore athlete add)")
    with contextlib.chdir(tmp_path):
        assert _one_line([*command, "--db", str(db)]) == expected
    assert list(tmp_path.iterdir()) == []  # no folder, no database, no output


def _one_trial(db: Path) -> None:
    """Ada with one identified model in the records at ``db``."""
    connection = connect(db)
    store.add_athlete(connection, "Ada", "F", 41.1, 1.48)
    parameters = {"trunk.mass": {"value": 13.5, "standard_error": 0.2, "unit": "kg",
                                 "identifiable": True}}
    store.record_run(connection, "identify", "Ada", store.utc_now(), {}, "good", [],
                     model={"sha256": "a" * 64, "trial_sha256": "b" * 64,
                            "trial_utc": "2026-09-01T10:00:00+00:00", "verdict": "good",
                            "rms_distance_mm": 0.4, "parameters_json": json.dumps(parameters)})
    connection.close()


def test_history_plot_is_the_png_it_names_without_a_warning(tmp_path: Path) -> None:
    """--plot FILE writes FILE (a .png name; 'out' had been written as out.png and printed as
    'out'), and one trial's plot draws without matplotlib's date-locator warning."""
    db = tmp_path / "records.sqlite"
    _one_trial(db)
    with contextlib.chdir(tmp_path):
        assert _one_line(["history", "Ada", "--db", str(db), "--plot", "out"]) == (
            "bemore: error: out: history --plot writes a PNG: name it .png")
        assert not list(tmp_path.glob("out*"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = CliRunner().invoke(cli, ["history", "Ada", "--db", str(db), "--plot",
                                              "plots/out.png"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "plot: plots/out.png"
    assert (tmp_path / "plots" / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [str(w.message) for w in caught] == []
