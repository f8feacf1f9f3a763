"""Writers of the synthesis outputs, checked by reading the files back independently."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest

from bemore.errors import DataError
from bemore.optimize.result import IterationRecord, LocalRun, OptimisationResult
from bemore.synthesis.gesture import GestureParameters, sample_gesture
from bemore.synthesis.outputs import (
    write_animation,
    write_gesture_json,
    write_plots,
    write_profiles,
    write_setpoints,
)
from bemore.synthesis.results import ConstraintStatus, Profiles, SynthesisResult
from controller.setpoints import read_setpoints
from controller.setpoints import write_setpoints as controller_write_setpoints
from tests.controller.gestures import make_gesture


def _profiles(rate_hz: float = 1000.0) -> Profiles:
    parameters = GestureParameters(2.0, 1.2, np.deg2rad(150.0))
    t = np.arange(round(2.0 * rate_hz) + 1) / rate_hz
    angle, velocity, acceleration, jerk = sample_gesture(parameters, t)
    torque = 60.0 * np.sin(np.pi * t / 2.0) - 20.0  # total torque, N·m: peak |·| 40 at t = 1 s
    rotation = np.linspace(0.0, 2.0 * np.pi, t.size)
    bar = 1e-3 * np.cos(rotation)
    hand = np.zeros((t.size, 2))
    shoulder = 0.6 * np.column_stack([np.sin(rotation), np.cos(rotation)])
    return Profiles(
        t,
        angle,
        velocity,
        acceleration,
        jerk,
        torque,
        rotation,
        bar,
        -bar,
        {"hand": hand, "shoulder": shoulder, "feet": 2 * shoulder},
    )


def _read_setpoints(path):
    metadata, rows = {}, []
    with open(path, encoding="utf-8") as stream:
        lines = stream.read().splitlines()
    while lines[0].startswith("# "):
        key, value = lines.pop(0)[2:].split(": ", 1)
        metadata[key] = value
    header = lines.pop(0).split(",")
    rows = np.array([[float(cell) for cell in line.split(",")] for line in lines])
    return metadata, header, rows


def test_setpoint_file_follows_the_format(tmp_path) -> None:
    profiles = _profiles()
    path = write_setpoints(
        tmp_path / "setpoints.csv",
        profiles,
        1000.0,
        "default",
        "test gesture",
        {"final_time_s": 2.0},
    )
    metadata, header, rows = _read_setpoints(path)
    assert metadata["format"] == "bemore-setpoints 1"
    assert float(metadata["rate_hz"]) == 1000.0
    assert float(metadata["peak_angle_deg"]) == pytest.approx(150.0, abs=1e-3)
    assert float(metadata["peak_torque_nm"]) == pytest.approx(20.0, abs=1e-3)  # 40 N·m total / 2
    assert metadata["athlete"] == "default" and metadata["final_time_s"] == "2.0"
    assert header == ["t_s", "shoulder_angle_rad", "shoulder_velocity_rad_s", "shoulder_torque_nm"]
    assert rows.shape == (2001, 4)
    np.testing.assert_allclose(np.diff(rows[:, 0]), 1e-3, atol=1e-9)
    assert rows[0, 0] == 0.0
    np.testing.assert_allclose(rows[:, 3], 0.5 * profiles.torque_total_nm, rtol=1e-9)
    peak_velocity = np.rad2deg(np.abs(rows[:, 2]).max())
    assert float(metadata["peak_velocity_deg_s"]) == pytest.approx(peak_velocity, rel=1e-6)


def test_setpoints_refuse_a_non_uniform_time_base(tmp_path) -> None:
    profiles = _profiles()
    profiles.t_s = profiles.t_s.copy()
    profiles.t_s[5] += 2e-4
    with pytest.raises(DataError, match="steps of 1/1000 s"):
        write_setpoints(tmp_path / "s.csv", profiles, 1000.0, "default", "x")


def test_setpoints_are_the_bench_side_s_format_byte_for_byte(tmp_path) -> None:
    """One definition of the setpoint file (controller.setpoints): what bemore synthesize writes
    is, byte for byte, what the bench side's writer writes of the same gesture (before, the
    scientific side had its own writer: 9 against 10 digits, another order of the header)."""
    gesture = make_gesture(duration_s=0.5, peak_deg=20.0)
    profiles = SimpleNamespace(t_s=np.asarray(gesture.t_s),
                               angle_rad=np.asarray(gesture.angle_rad),
                               velocity_rad_s=np.asarray(gesture.velocity_rad_s),
                               torque_per_shoulder_nm=np.asarray(gesture.torque_nm),
                               static_torque_per_shoulder_nm=np.asarray(gesture.static_torque_nm))
    extra = {"final_time_s": "0.500000", "objective": "abs_torque_integral 4.2 N·m·s"}
    ours = write_setpoints(tmp_path / "ours.csv", profiles, gesture.rate_hz, "ada", "sin²", extra)
    gesture.metadata = {"athlete": "ada", "gesture": "sin²", **extra}
    bench_side = controller_write_setpoints(tmp_path / "bench.csv", gesture)
    assert ours.read_bytes() == bench_side.read_bytes()
    assert read_setpoints(ours).metadata["objective"] == extra["objective"]


def test_a_tiny_peak_is_declared_so_that_the_reader_accepts_the_file(tmp_path) -> None:
    """A peak below 0.005 (here 0.00144 N·m) is declared with 6 significant digits: with 4
    decimals ("0.0014") the data exceeded its declared peak beyond the reader's 1 % and the
    file written was refused by bemore drive."""
    profiles = _profiles()
    profiles.torque_total_nm = 0.00288 * np.sin(np.pi * profiles.t_s / 2.0)
    path = write_setpoints(tmp_path / "s.csv", profiles, 1000.0, "default", "still")
    assert read_setpoints(path).metadata["peak_torque_nm"] == "0.00144"
    # the usual peaks keep their 4 decimals
    assert read_setpoints(path).metadata["peak_angle_deg"] == "150.0000"


def test_profiles_csv_has_every_column(tmp_path) -> None:
    profiles = _profiles()
    path = write_profiles(tmp_path / "profiles.csv", profiles)
    with open(path, encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 2001
    assert float(rows[1000]["t_s"]) == pytest.approx(1.0)
    assert float(rows[1200]["shoulder_angle_rad"]) == pytest.approx(np.deg2rad(150.0), rel=1e-9)
    assert float(rows[1000]["torque_per_shoulder_nm"]) == pytest.approx(20.0, rel=1e-9)
    assert float(rows[-1]["rotation_about_bar_rad"]) == pytest.approx(2 * np.pi, rel=1e-9)
    assert {"shoulder_jerk_rad_s3", "bar_x_m", "bar_y_m"} <= set(rows[0])


def test_gesture_json_round_trips(tmp_path) -> None:
    result = SynthesisResult(
        design=GestureParameters(2.4, 1.4, np.deg2rad(160.0)),
        objective="abs_torque_integral",
        objective_value=12.5,
        objective_unit="N·m·s",
        final_rotation_deg=361.0,
        constraints=[ConstraintStatus("final_rotation", 363.0, 360.0, 362.0, "deg", False)],
        feasible=False,
        method="slsqp",
        starts=4,
        elapsed_s=0.25,
        message="m",
        inputs={"athlete": "default"},
        peak_torque_per_shoulder_nm=151.2,
        optimisation=OptimisationResult(
            x=np.array([2.4, 1.4, np.deg2rad(160.0)]), fun=12.4, nfev=123, nit=10, status=7,
            algorithm="slsqp", njev=20, nbatch=30, constraints=np.array([0.9, 362.4]),
            constraint_names=("extension_duration_s", "final_rotation_deg"), maxcv=0.4,
            runs=[LocalRun(x0=[2.0, 1.0, 2.0], x=[2.4, 1.4, 2.79], fun=12.4, maxcv=0.4, nit=10,
                           nfev=123, success=False, message="Iteration limit reached")],
            # no feasible point yet: the best so far is not a number
            history=[IterationRecord(1, 8, float("nan"), 12.4, 13.0, 0.01)],
        ),
    )
    text = write_gesture_json(tmp_path / "gesture.json", result).read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    data = json.loads(text)
    assert data["optimisation"]["history"][0]["best"] is None
    assert data["design"]["max_flexion_deg"] == pytest.approx(160.0)
    assert data["constraints"][0]["violation"] == pytest.approx(1.0)
    assert data["elapsed_s"] == 0.25
    optimisation = data["optimisation"]
    assert optimisation["nfev"] == 123 and optimisation["njev"] == 20
    assert optimisation["constraints"] == [0.9, 362.4] and optimisation["maxcv"] == 0.4
    assert not optimisation["success"]
    assert optimisation["message"].startswith("no feasible point found")
    assert optimisation["runs"][0]["message"] == "Iteration limit reached"
    assert optimisation["runs"][0]["stage"] == "search"


def test_plots_and_animation_are_written(tmp_path) -> None:
    profiles = _profiles(rate_hz=200.0)
    written = write_plots(tmp_path / "plots", profiles, 1.2)
    assert len(written) == 7
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gif = write_animation(tmp_path / "gesture.gif", profiles, fps=10)
    from PIL import Image

    with Image.open(gif) as image:
        assert image.format == "GIF"
        assert image.n_frames == 21  # 2 s at 10 frames/s, plus the last frame


def test_coach_view_puts_her_recorded_circle_beside_the_gesture(tmp_path) -> None:
    from bemore.paths import REPOSITORY_DIR
    from bemore.synthesis.cli import _recorded_flexion
    from bemore.synthesis.outputs import write_coach_plot

    athlete = tmp_path / "athlete.json"
    athlete.write_text(json.dumps({"trial": {"source": str(REPOSITORY_DIR / "data" /
                                                            "sample_trial.c3d")}}))
    recorded = _recorded_flexion(athlete)
    t, angle, _ = recorded
    # the sample trial's circle: 1.6 s, the shoulder flexes to ≈ 109° at ≈ 0.8 s
    assert t[-1] - t[0] == pytest.approx(1.6, abs=0.02)
    assert np.rad2deg(angle.max()) == pytest.approx(109.0, abs=2.0)
    path = write_coach_plot(tmp_path / "coach_view.png", _profiles(rate_hz=200.0), 1.2, recorded)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # without a trial (the default athlete, or a file no longer there): the gesture alone
    assert _recorded_flexion(None) is None
    athlete.write_text(json.dumps({"trial": {"source": str(tmp_path / "gone.c3d")}}))
    assert _recorded_flexion(athlete) is None


def test_the_coach_view_reads_the_recorded_flexion_athlete_json_carries(tmp_path) -> None:
    """identify writes the trial's shoulder flexion into athlete.json at the markers' 100 Hz;
    synthesize's coach view reads it there, the same curve the trial gives when prepared
    again (the path of athlete files written before it was recorded)."""
    from bemore.identify.outputs import recorded_shoulder_flexion
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.paths import REPOSITORY_DIR
    from bemore.settings import load_gymnast, load_identification
    from bemore.synthesis.cli import _recorded_flexion
    from bemore.trial import prepare_trial

    source = REPOSITORY_DIR / "data" / "sample_trial.c3d"
    trial = prepare_trial(source)
    problem = IdentificationProblem.from_trial(
        trial, ParameterSpace.from_config(load_identification(), load_gymnast()))
    athlete = tmp_path / "athlete.json"
    athlete.write_text(json.dumps({"trial": {"source": str(source)},
                                   "recorded_shoulder_flexion":
                                       recorded_shoulder_flexion(problem)}))
    t, angle, named = _recorded_flexion(athlete)
    assert named == str(source)
    column = trial.driven_names.index("shoulder_flexion")
    assert t.size == 161 and np.all(np.diff(t) == pytest.approx(0.01))
    np.testing.assert_allclose(angle, np.interp(t, trial.t, trial.driven_q[:, column]),
                               atol=1e-6)
    # The trial file gone, the recorded curve is still there.
    athlete.write_text(json.dumps({"trial": {"source": str(tmp_path / "gone.c3d")},
                                   "recorded_shoulder_flexion":
                                       recorded_shoulder_flexion(problem)}))
    assert _recorded_flexion(athlete) is not None
