"""Athletes in the records: add, list, show, edit with history; her record is her profile."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from bemore.cli import cli
from bemore.profile import DEFAULT_PROFILE, AthleteProfile, load_profile
from bemore.records import store
from bemore.records.db import connect


def _run(args: list[str], db: Path) -> str:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_add_edit_show_keep_the_history(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    _run(["athlete", "add", "Ada", "--body-mass", "41.1", "--stature", "1.48", "--sex", "F",
          "--torque-limit", "75", "--on", "2026-09-01"], db)
    _run(["athlete", "add", "Bea", "--body-mass", "52", "--stature", "1.6", "--sex", "F"], db)
    _run(["athlete", "edit", "Ada", "--body-mass", "41.6", "--on", "2026-10-01"], db)
    _run(["athlete", "edit", "Ada", "--body-mass", "40.9", "--on", "2026-08-01",
          "--torque-limit", "80", "--flexion-range", "-5", "165"], db)
    shown = _run(["athlete", "show", "Ada"], db).splitlines()
    # the latest measurement by date is her body mass, whatever the order they were entered in
    assert shown[2] == "body mass   41.6 kg (measured 2026-10-01)"
    assert shown[4] == "torque      80 N·m per shoulder (peak)"
    assert shown[5] == "flexion     -5 … 165 deg"
    assert shown[7] == ("body mass series: 2026-08-01 40.9 kg, 2026-09-01 41.1 kg, "
                        "2026-10-01 41.6 kg")
    edits = [line.split(": ", 1)[1] for line in shown[8:]]
    assert edits == ["torque_limit_nm 75.0 → 80.0", "flexion_min_deg -10.0 → -5.0",
                     "flexion_max_deg 170.0 → 165.0"]
    listed = _run(["athlete", "list"], db).splitlines()
    assert [line.split()[:3] for line in listed[1:]] == [["Ada", "F", "41.6"],
                                                         ["Bea", "F", "52"]]
    # Bea got the default athlete's limits (bemore/profile.py)
    bea = store.get_athlete(connect(db), "Bea")
    assert bea.torque_limit_nm == DEFAULT_PROFILE.shoulder_torque_limit_Nm
    assert bea.flexion_range_deg == DEFAULT_PROFILE.shoulder_flexion_range_deg


def test_the_record_is_her_profile(tmp_path: Path) -> None:
    connection = connect(tmp_path / "records.sqlite")
    record = store.add_athlete(connection, 'Zoë "Z" O\'Neil', "F", 44.2, 1.55, 82.5,
                               (-8.0, 172.0))
    profile = record.to_profile()
    assert profile == AthleteProfile(name='Zoë "Z" O\'Neil', sex="F", body_mass_kg=44.2,
                                     stature_m=1.55, shoulder_torque_limit_Nm=82.5,
                                     shoulder_flexion_range_deg=(-8.0, 172.0))
    # the profile file handed to a command that reads one (bemore drive --athlete) reads back
    # through the validated profile loader as the same profile
    path = tmp_path / "athlete.toml"
    path.write_text(record.profile_toml(), encoding="utf-8")
    assert load_profile(path) == profile


def test_drive_with_athlete_and_profile_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    _run(["athlete", "add", "Ada", "--body-mass", "41.1", "--stature", "1.48", "--sex", "F"], db)
    result = CliRunner().invoke(cli, ["drive", "s.csv", "--athlete", "Ada", "--profile",
                                      "configs/athlete.example.toml", "--log",
                                      str(tmp_path / "s.jsonl"), "--db", str(db)])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("bemore: error: --athlete and --profile both give her "
                                     "profile: use one of them")


def test_a_drive_refused_before_arming_records_nothing(tmp_path: Path) -> None:
    from controller.setpoints import write_setpoints
    from tests.controller.gestures import make_gesture

    db = tmp_path / "records.sqlite"
    # her range ends at 150 deg: the 160 deg test gesture is refused by the pre-flight
    _run(["athlete", "add", "Ada", "--body-mass", "41.1", "--stature", "1.48", "--sex", "F",
          "--flexion-range", "-10", "150"], db)
    setpoints = tmp_path / "setpoints.csv"
    write_setpoints(setpoints, make_gesture(peak_deg=160.0))
    log = tmp_path / "session.jsonl"
    result = CliRunner().invoke(cli, ["drive", str(setpoints), "--athlete", "Ada", "--log",
                                      str(log), "--no-view", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "150.00" in result.stderr and "athlete profile" in result.stderr  # her limit
    assert not log.exists()
    assert store.runs(connect(db)) == []


def test_import_refuses_what_it_cannot_read_one_line_each(tmp_path: Path) -> None:
    db = tmp_path / "records.sqlite"
    folder = tmp_path / "out"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "notes.jsonl").write_text("not json\n")
    (folder / "a" / "athlete.json").write_text('{"format": "something else"}')
    result = CliRunner().invoke(cli, ["import", str(folder), "--db", str(db)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"bemore: error: {folder / 'a' / 'athlete.json'}: not an athlete.json of bemore identify",
        f"bemore: error: {folder / 'a' / 'notes.jsonl'}: not a bemore session log (no header "
        "line)"]
    assert store.runs(connect(db)) == []


def test_a_drive_that_never_armed_is_an_attempt_without_tracking_figures(tmp_path: Path) -> None:
    # A port that opens but never answers HELLO (a pseudo-terminal with no bench behind it):
    # the session ends "not armed". It is recorded, but its figures are not zeros (0.000 deg
    # reads as perfect tracking): "—" in the history, empty in the export.
    import csv
    import json
    import os

    from controller.setpoints import write_setpoints
    from tests.controller.gestures import make_gesture

    db = tmp_path / "records.sqlite"
    _run(["athlete", "add", "Ada", "--body-mass", "41.1", "--stature", "1.48", "--sex", "F"], db)
    setpoints = tmp_path / "setpoints.csv"
    write_setpoints(setpoints, make_gesture())
    main, other = os.openpty()
    try:
        result = CliRunner().invoke(cli, ["drive", str(setpoints), "--athlete", "Ada", "--port",
                                          os.ttyname(other), "--log",
                                          str(tmp_path / "session.jsonl"), "--no-view", "--db",
                                          str(db)])
    finally:
        os.close(main)
        os.close(other)
    assert result.exit_code == 3, result.output
    assert "the session was not recorded" not in result.output
    assert "recorded session of Ada in the records" in result.stdout
    history = _run(["history", "Ada", "--no-plot"], db).splitlines()
    assert history[-2] == "sessions  1"
    assert history[-1].endswith(", reps 1, — s; tracking RMS — deg, max — deg; faults none; "
                                "not armed"), history[-1]
    assert _run(["squad"], db).splitlines()[1].endswith(", not armed")
    _run(["export", str(tmp_path / "export")], db)
    with open(tmp_path / "export" / "sessions.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["end_reason"] == "not armed"
    assert [row[key] for key in ("duration_s", "tracking_rms_deg", "tracking_max_deg",
                                 "peak_commanded_torque_nm")] == ["", "", "", ""]
    _run(["export", str(tmp_path / "records.json")], db)
    (session,) = json.loads((tmp_path / "records.json").read_text())["sessions"]
    assert session["tracking_rms_deg"] is None and session["duration_s"] is None
