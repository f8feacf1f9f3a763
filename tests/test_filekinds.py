"""A command handed another command's output says what the file is, in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.identify.report import ATHLETE_FORMAT
from bemore.synthesis.outputs import PROFILE_COLUMNS
from controller import filekinds
from controller.cli import bench_cli
from controller.dump import MAGIC
from controller.log import FORMAT_TAG as SESSION_FORMAT
from controller.setpoints import FORMAT_TAG as SETPOINT_FORMAT
from controller.setpoints import write_setpoints
from tests.controller.gestures import make_gesture

ROOT = Path(__file__).resolve().parents[1]


def _synthesize(path: Path, tmp_path: Path) -> str:
    result = CliRunner().invoke(cli, ["synthesize", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out").exists()
    return result.stderr.strip()


def test_synthesize_names_the_kind_of_file_it_was_given_instead_of_an_athlete(tmp_path):
    # Files of the shapes the other commands write (their keys), not copies of bemore's own
    # writers: a reader must recognise them from what they hold.
    gesture = tmp_path / "gesture.json"
    gesture.write_text(json.dumps({"design": {"c": [0.1]}, "objective": "torque",
                                   "objective_value": 1.0, "constraints": {}, "feasible": True}))
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"source": "t.c3d", "rate_hz_original": 200.0, "rate_hz": 1000.0,
                                 "frames": 10, "free_q0": [0.0]}))
    log = tmp_path / "session.jsonl"
    log.write_text(json.dumps({"type": "header", "format": "bemore-session 1"}) + "\n"
                   + json.dumps({"type": "event", "kind": "armed"}) + "\n")
    truth = ROOT / "data" / "sample_trial.truth.json"
    setpoints = tmp_path / "setpoints.csv"
    write_setpoints(setpoints, make_gesture())
    for path, kind in ((gesture, "a gesture.json (written by bemore synthesize)"),
                       (trial, "a trial.json (written by bemore trial inspect)"),
                       (log, "a session log (written by bemore drive; bemore replay takes it)"),
                       (truth, "a synthetic trial's truth (written by bemore trial synth)"),
                       (setpoints, "a setpoints.csv (written by bemore synthesize; bemore drive "
                                   "takes it)")):
        assert _synthesize(path, tmp_path) == (
            f"bemore: error: {path}: {kind}, not an athlete.json (bemore identify writes one)")
    # Anything else keeps the reader's own message.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"parameters": "none"}))
    assert _synthesize(other, tmp_path).endswith("missing 'parameters' mapping (name → "
                                                 "{value, unit, ...})")


def _outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Files of the shapes bemore's commands write (their keys and tags): name → (path, what
    the refusal calls it)."""
    athlete = tmp_path / "athlete.json"
    athlete.write_text(json.dumps({"format": "bemore-athlete 1", "parameters": {
        "bar.stiffness_x": {"value": 18000.0, "unit": "N/m"}}}, indent=2))
    gesture = tmp_path / "gesture.json"
    gesture.write_text(json.dumps({"design": {"c": [0.1]}, "objective": "torque",
                                   "constraints": {}, "feasible": True}, indent=2))
    setpoints = tmp_path / "setpoints.csv"
    write_setpoints(setpoints, make_gesture())
    log = tmp_path / "session.jsonl"
    log.write_text(json.dumps({"type": "header", "format": "bemore-session 1"}) + "\n"
                   + json.dumps({"type": "event", "kind": "armed"}) + "\n")
    dump = tmp_path / "session.dump"
    dump.write_bytes(b"bemore-dump 1\n" + bytes(range(256)))
    profiles = tmp_path / "profiles.csv"
    profiles.write_text("t_s,shoulder_angle_rad,shoulder_velocity_rad_s,"
                        "shoulder_acceleration_rad_s2,shoulder_jerk_rad_s3,torque_total_nm,"
                        "torque_per_shoulder_nm,rotation_about_bar_rad,bar_x_m,bar_y_m\n"
                        "0,0,0,0,0,-5.5e-15,-2.7e-15,0,3.6e-18,-0.0144\n")
    return {
        "athlete": (athlete, "an athlete.json (written by bemore identify; bemore synthesize "
                             "takes it)"),
        "gesture": (gesture, "a gesture.json (written by bemore synthesize)"),
        "setpoints": (setpoints, "a setpoints.csv (written by bemore synthesize; bemore drive "
                                 "takes it)"),
        "log": (log, "a session log (written by bemore drive; bemore replay takes it)"),
        "dump": (dump, "a byte dump (written by bemore drive --dump; bemore replay takes it)"),
        "truth": (ROOT / "data" / "sample_trial.truth.json",
                  "a synthetic trial's truth (written by bemore trial synth)"),
        "profiles": (profiles, "a profiles.csv (written by bemore synthesize)"),
    }


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == "", result.stdout  # nothing done before the refusal
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize("given", ["athlete", "gesture", "log", "dump", "truth", "profiles"])
def test_drive_names_the_kind_of_file_it_was_given_instead_of_setpoints(tmp_path, given):
    path, kind = _outputs(tmp_path)[given]
    wanted = "not a setpoints.csv (bemore synthesize writes one)"
    log = tmp_path / "new.jsonl"
    for command in (["drive", str(path), "--plan"],
                    ["drive", str(path), "--log", str(log), "--no-view"]):
        assert _one_line(CliRunner().invoke(cli, command)) == (
            f"bemore: error: {path}: {kind}, {wanted}")
    assert not log.exists()
    # the bench side alone (bemore-bench) says the same
    assert _one_line(CliRunner().invoke(bench_cli, ["drive", str(path), "--plan"])) == (
        f"bemore-bench: error: {path}: {kind}, {wanted}")


@pytest.mark.parametrize("given", ["athlete", "gesture", "setpoints", "truth", "profiles"])
def test_replay_names_the_kind_of_file_it_was_given_instead_of_a_session_log(tmp_path, given):
    path, kind = _outputs(tmp_path)[given]
    plots = tmp_path / "plots"
    assert _one_line(CliRunner().invoke(cli, ["replay", str(path), "--plot", str(plots)])) == (
        f"bemore: error: {path}: {kind}, not a session log (bemore drive writes one)")
    assert not plots.exists()


@pytest.mark.parametrize("given", ["athlete", "gesture", "setpoints", "log"])
def test_a_toml_option_names_the_kind_of_file_it_was_given(tmp_path, given):
    # --profile (identify, synthesize, drive) and --bench-config: the kind found, not "malformed
    # TOML: Invalid statement (at line 1, column 1)"
    path, kind = _outputs(tmp_path)[given]
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    profile = ("not an athlete profile (a TOML file like configs/athlete.example.toml)")
    out = tmp_path / "out"
    for command in (["identify", str(ROOT / "data" / "sample_trial.c3d"), "--profile",
                     str(path), "--out", str(out)],
                    ["synthesize", "--profile", str(path), "--out", str(out)],
                    ["drive", str(setpoints), "--plan", "--profile", str(path)]):
        assert _one_line(CliRunner().invoke(cli, command)) == (
            f"bemore: error: {path}: {kind}, {profile}")
        assert not out.exists()
    assert _one_line(CliRunner().invoke(cli, ["drive", str(setpoints), "--plan",
                                              "--bench-config", str(path)])) == (
        f"bemore: error: {path}: {kind}, not a bench configuration (a TOML file like "
        "controller/configs/bench.toml)")


def test_a_file_of_no_known_kind_keeps_each_reader_s_own_message(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("[not toml\n")
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    assert _one_line(CliRunner().invoke(cli, ["drive", str(other), "--plan"])).endswith(
        "missing metadata format, rate_hz, peak_angle_deg, peak_velocity_deg_s, peak_torque_nm, "
        "athlete, gesture, rows, duration_s, sha256")
    assert _one_line(CliRunner().invoke(cli, ["replay", str(other)])).endswith(
        "line 1: not a JSON record")
    assert "malformed TOML" in _one_line(CliRunner().invoke(
        cli, ["drive", str(setpoints), "--plan", "--profile", str(other)]))


def test_the_writers_tags_are_the_ones_recognised():
    # one definition of each kind's recognition (controller.filekinds), the tags of the writers
    assert filekinds.kind_of({"format": ATHLETE_FORMAT}) is filekinds.ATHLETE
    assert filekinds.kind_of({"type": "header", "format": SESSION_FORMAT}) is filekinds.SESSION_LOG
    assert filekinds.kind_of_text(f"# format: {SETPOINT_FORMAT}\n") is filekinds.SETPOINTS
    assert filekinds.kind_of_text(MAGIC.decode() + "\x00\x01") is filekinds.BYTE_DUMP
    assert PROFILE_COLUMNS is filekinds.PROFILE_COLUMNS  # the writer's header


BOM = b"\xef\xbb\xbf"  # what a spreadsheet or an editor puts before a file it re-saves as UTF-8


def _re_saved(path: Path, folder: Path, mark: bytes = BOM) -> Path:
    """A copy of ``path`` in ``folder`` (same name) with ``mark`` (a UTF-8 byte order mark)
    in front."""
    folder.mkdir(exist_ok=True)
    copy = folder / path.name
    copy.write_bytes(mark + path.read_bytes())
    return copy


@pytest.mark.parametrize("given", ["athlete", "gesture", "setpoints", "log", "profiles"])
def test_a_file_re_saved_with_a_byte_order_mark_is_named_as_without_it(tmp_path, given):
    # before: not recognised after the mark, each reader gave its own misleading line ("missing
    # metadata format, …", "line 1: not a JSON record", "not valid JSON (Unexpected UTF-8 BOM
    # …)", "malformed TOML: Invalid statement")
    original, kind = _outputs(tmp_path)[given]
    path = _re_saved(original, tmp_path / "re-saved")
    assert filekinds.kind_of_file(path) is filekinds.kind_of_file(original)
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    commands = {
        "setpoints": (["drive", str(path), "--plan"],
                      "not a setpoints.csv (bemore synthesize writes one)"),
        "log": (["replay", str(path)], "not a session log (bemore drive writes one)"),
        "athlete": (["synthesize", str(path), "--out", str(tmp_path / "out")],
                    "not an athlete.json (bemore identify writes one)"),
        "profile": (["drive", str(setpoints), "--plan", "--profile", str(path)],
                    "not an athlete profile (a TOML file like configs/athlete.example.toml)"),
    }
    for reads, (command, wanted) in commands.items():
        if reads != given:
            assert _one_line(CliRunner().invoke(cli, command)) == (
                f"bemore: error: {path}: {kind}, {wanted}")
    assert not (tmp_path / "out").exists()


def test_each_reader_reads_its_own_kind_past_a_byte_order_mark(tmp_path):
    # before: "missing metadata format, …" for the setpoints, "line 1: not a JSON record" for
    # the session log, "malformed TOML: Invalid statement (at line 1, column 1)" for a profile
    outputs = _outputs(tmp_path)
    files = {"setpoints": outputs["setpoints"][0], "log": outputs["log"][0],
             "profile": ROOT / "configs" / "athlete.example.toml"}
    for command in (["drive", "{setpoints}", "--plan"], ["replay", "{log}"],
                    ["drive", "{setpoints}", "--plan", "--profile", "{profile}"]):
        runs = {}
        for folder, mark in ((tmp_path / "plain", b""), (tmp_path / "re-saved", BOM)):
            copies = {name: _re_saved(file, folder, mark) for name, file in files.items()}
            result = CliRunner().invoke(cli, [part.format(**copies) for part in command])
            assert result.exit_code == 0, result.output
            runs[folder.name] = result.stdout.replace(str(folder), "FOLDER")
        assert runs["re-saved"] == runs["plain"]


# A folder, another command's output, a C3D trial or a configuration of another kind, given
# where a command reads a file: one line naming what it is (before: "athlete file not found",
# "file not found", "[Errno 21] Is a directory", "no '# units: mm|cm|m' line before the CSV
# header", "unknown motion-capture format '.json'", "not valid JSON ('utf-8' codec …)", "line 1:
# not a JSON record", "limits: unknown key (allowed: body_mass_kg, …) (and 7 more problem(s))").

C3D = ROOT / "data" / "sample_trial.c3d"


def test_a_folder_given_as_a_file_is_named_a_folder_with_the_file_it_holds(tmp_path):
    outputs = _outputs(tmp_path)  # athlete.json, setpoints.csv, session.jsonl… in tmp_path
    out = tmp_path / "out"
    trials = tmp_path / "data"
    trials.mkdir()
    (trials / "sample_trial.c3d").write_bytes(C3D.read_bytes())
    empty = tmp_path / "empty"
    empty.mkdir()
    assert outputs["athlete"][0].parent == tmp_path
    for command, wanted in (
            (["synthesize", str(tmp_path), "--out", str(out)],
             f"an athlete.json (give {tmp_path}/athlete.json)"),
            (["identify", str(trials), "--out", str(out)],
             f"a motion-capture trial (.c3d, .trc or .csv) (give {trials}/sample_trial.c3d)"),
            (["trial", "inspect", str(empty), "--out", str(out)],
             "a motion-capture trial (.c3d, .trc or .csv)"),
            (["drive", str(tmp_path), "--plan"],
             f"a setpoints.csv (give {tmp_path}/setpoints.csv)"),
            (["replay", str(tmp_path), "--plot", str(out)],
             f"a session log (give one of {tmp_path}/new.jsonl, {tmp_path}/session.jsonl)")):
        given = command[2] if command[0] == "trial" else command[1]
        if command[0] == "replay":
            (tmp_path / "new.jsonl").write_text("")
        assert _one_line(CliRunner().invoke(cli, command)) == (
            f"bemore: error: {given}: a folder, not {wanted}"), command
        assert not out.exists()
    assert _one_line(CliRunner().invoke(cli, ["config", "check", str(empty)])) == (
        f"bemore: error: {empty}: a folder, not a configuration file")


def test_identify_names_another_command_s_output_given_as_a_trial(tmp_path):
    inspected = tmp_path / "trial"
    result = CliRunner().invoke(cli, ["trial", "inspect", str(C3D), "--out", str(inspected)])
    assert result.exit_code == 0, result.output
    outputs = _outputs(tmp_path)
    out = tmp_path / "out"
    wanted = "not a motion-capture trial (.c3d, .trc or .csv)"
    for path, kind in (
            outputs["setpoints"], outputs["athlete"], outputs["gesture"], outputs["profiles"],
            (inspected / "joint_centres.csv", "a joint_centres.csv (written by bemore trial "
                                               "inspect)"),
            (inspected / "driven.csv", "a driven.csv (written by bemore trial inspect)"),
            (inspected / "trial.json", "a trial.json (written by bemore trial inspect)")):
        for command in (["identify", str(path), "--out", str(out)],
                        ["trial", "inspect", str(path), "--out", str(out)]):
            assert _one_line(CliRunner().invoke(cli, command)) == (
                f"bemore: error: {path}: {kind}, {wanted}"), command
            assert not out.exists()


def test_a_c3d_trial_given_where_a_json_csv_or_toml_file_is_read_is_named(tmp_path):
    found = "a C3D motion-capture trial (bemore identify takes it)"
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    out = tmp_path / "out"
    for command, wanted in (
            (["synthesize", str(C3D), "--out", str(out)],
             "an athlete.json (bemore identify writes one)"),
            (["drive", str(C3D), "--plan"], "a setpoints.csv (bemore synthesize writes one)"),
            (["replay", str(C3D), "--plot", str(out)],
             "a session log (bemore drive writes one)"),
            (["drive", str(setpoints), "--plan", "--profile", str(C3D)],
             "an athlete profile (a TOML file like configs/athlete.example.toml)"),
            (["config", "check", str(C3D)],
             "a configuration file (a TOML file like configs/*.toml)")):
        assert _one_line(CliRunner().invoke(cli, command)) == (
            f"bemore: error: {C3D}: {found}, not {wanted}"), command
        assert not out.exists()


BENCH = ("a bench configuration (like controller/configs/bench.toml; bemore drive --bench-config "
         "takes it)")
PROFILE = "an athlete profile (like configs/athlete.example.toml; --profile takes it)"


def test_a_configuration_of_another_kind_is_named_by_its_sections(tmp_path):
    bench = ROOT / "controller" / "configs" / "bench.toml"
    profile = ROOT / "configs" / "athlete.example.toml"
    synthesis = ROOT / "configs" / "synthesis.toml"
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    as_profile = "an athlete profile (a TOML file like configs/athlete.example.toml)"
    as_bench = "a bench configuration (a TOML file like controller/configs/bench.toml)"
    for command, found, wanted in (
            (["drive", str(setpoints), "--plan", "--profile", str(bench)], BENCH, as_profile),
            (["drive", str(setpoints), "--plan", "--bench-config", str(profile)], PROFILE,
             as_bench),
            (["config", "check", str(bench), "--kind", "profile"], BENCH, as_profile),
            (["config", "check", str(profile), "--kind", "bench"], PROFILE, as_bench),
            (["identify", str(C3D), "--identification-config", str(synthesis), "--out",
              str(tmp_path / "out")], "a synthesis configuration (like configs/synthesis.toml)",
             "an identification configuration (a TOML file like configs/identification.toml)")):
        given = command[command.index("check") + 1] if "check" in command else command[-1]
        if command[0] == "identify":
            given = str(synthesis)
        assert _one_line(CliRunner().invoke(cli, command)) == (
            f"bemore: error: {given}: {found}, not {wanted}"), command
    # bemore config check of another command's output: its kind, not "unknown kind of
    # configuration file; name it with --kind"
    athlete, kind = _outputs(tmp_path)["athlete"]
    assert _one_line(CliRunner().invoke(cli, ["config", "check", str(athlete)])) == (
        f"bemore: error: {athlete}: {kind}, not a configuration file (a TOML file like "
        "configs/*.toml)")
    # a configuration of its own kind keeps the schema's message for what is wrong in it
    broken = tmp_path / "bench.toml"
    broken.write_text(bench.read_text(encoding="utf-8").replace("[streaming]",
                                                                "[streaming]\nspeed = 1"))
    assert _one_line(CliRunner().invoke(cli, ["drive", str(setpoints), "--plan",
                                              "--bench-config", str(broken)])).endswith(
        "[streaming] speed: unknown key (allowed: " + _allowed_streaming_keys() + ")")


def _allowed_streaming_keys() -> str:
    from controller.settings import Streaming

    return ", ".join(sorted(Streaming.model_fields))


def test_every_bundled_configuration_is_recognised_as_its_own_kind():
    from bemore.configcheck import KINDS
    from bemore.paths import default_config

    for name, spec in KINDS.items():
        if "*" in spec.bundled:
            continue
        kind = filekinds.kind_of_file(default_config(spec.bundled))
        assert kind is not None and Path(kind.like).name == spec.bundled, name
    recognised = {kind.like for kind, _ in filekinds.CONFIGURATIONS}
    assert len(recognised) == len(filekinds.CONFIGURATIONS)


def test_every_toml_reader_names_a_folder_and_what_it_reads(tmp_path):
    # read_toml's folder, and a --KIND-config reader's phrase from its schema (before: "file
    # not found", "not a TOML configuration", "limits: unknown key (allowed: athletes, …)")
    setpoints, _ = _outputs(tmp_path)["setpoints"]
    athlete, kind = _outputs(tmp_path)["athlete"]
    bench = ROOT / "controller" / "configs" / "bench.toml"
    out = tmp_path / "out"
    assert _one_line(CliRunner().invoke(cli, ["drive", str(setpoints), "--plan", "--profile",
                                              str(tmp_path)])) == (
        f"bemore: error: {tmp_path}: a folder, not an athlete profile (a TOML file like "
        "configs/athlete.example.toml)")
    assert _one_line(CliRunner().invoke(cli, ["trial", "inspect", str(C3D), "--out", str(out),
                                              "--trial-config", str(athlete)])) == (
        f"bemore: error: {athlete}: {kind}, not a trial-processing configuration (a TOML file "
        "like configs/trial.toml)")
    assert _one_line(CliRunner().invoke(cli, ["batch", str(bench), "--out", str(out)])) == (
        f"bemore: error: {bench}: {BENCH}, not a batch manifest (a TOML file like "
        "configs/batch.example.toml)")
    assert not out.exists()
