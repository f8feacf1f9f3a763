"""Synthetic trials: the engine's kinematics against the trial's inverse, the bundled sample's
round trip through reader and pipeline, and the generator itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bemore.paths import data_dir
from bemore.trial.coordinates import DRIVEN_NAMES, driven_from_points, free_from_points
from bemore.trial.markerset import load_trial_settings
from bemore.trial.pipeline import prepare_trial
from bemore.trial.readers import read_markers

DEG = np.pi / 180
ANGLES = [i for i, name in enumerate(DRIVEN_NAMES) if not name.endswith("_length")]
LENGTHS = [i for i, name in enumerate(DRIVEN_NAMES) if name.endswith("_length")]
SAMPLE = data_dir() / "sample_trial.c3d"
TRUTH = data_dir() / "sample_trial.truth.json"


@pytest.fixture(scope="module")
def truth() -> dict:
    return json.loads(TRUTH.read_text())


def test_engine_forward_kinematics_inverted_exactly():
    """Engine points of known coordinates → joint centres → the trial's inverse → same values."""
    from docs_kinematics import circle_coordinates

    from bemore.model import load_model

    model = load_model("real_gymnast")
    assert model.driven_coordinates == DRIVEN_NAMES
    t = np.linspace(0.0, 2.0, 101)
    free, driven = circle_coordinates(t)
    P = model.parameter_matrix([{}])
    points = model.point_positions(P, np.concatenate([free, driven], axis=1))[0]
    assert np.abs(driven_from_points(points) - driven).max() < 1e-9
    assert np.abs(free_from_points(points)[:, :3] - free[:, :3]).max() < 1e-9


def test_shoulder_translations_are_seen_in_the_apparent_upper_arm():
    """docs/model.md measures upper_arm_length as |shoulder − elbow|: with the shoulder springs
    deflected (ap, pd), the trial sees sqrt((L + pd)² + ap²) and the upper-arm angle tilts by
    atan(ap / (L + pd)); the free shoulder translations are not observable (0)."""
    from docs_kinematics import circle_coordinates

    from bemore.model import load_model

    model = load_model("real_gymnast")
    t = np.linspace(0.0, 2.0, 11)
    free, driven = circle_coordinates(t)
    free[:, 3], free[:, 4] = 0.004, -0.012  # shoulder_ap, shoulder_pd (m)
    points = model.point_positions(model.parameter_matrix([{}]),
                                   np.concatenate([free, driven], axis=1))[0]
    seen = driven_from_points(points)
    length = driven[:, 3] - 0.012
    assert seen[:, 3] == pytest.approx(np.hypot(length, 0.004), abs=1e-12)
    assert seen[:, 2] - driven[:, 2] == pytest.approx(np.arctan2(0.004, length), abs=1e-12)
    assert np.all(free_from_points(points)[:, 3:] == 0.0)


def test_sample_is_labelled_synthetic_with_other_parameters(truth):
    import ezc3d

    from bemore.model import load_model

    software = ezc3d.c3d(str(SAMPLE))["parameters"]["MANUFACTURER"]["SOFTWARE"]["value"]
    assert software == ["bemore synthetic trial (not a recording)"]
    assert truth["synthetic"] is True
    assert truth["spec"]["noise_mm"] == 1.0 and truth["spec"]["seed"] == 4
    defaults = load_model("real_gymnast").default_parameters()
    differing = [name for name, value in truth["parameters"].items() if value != defaults[name]]
    assert len(differing) == 12


def test_sample_markers_match_truth_gaps(truth):
    markers = read_markers(SAMPLE)
    assert markers.positions.shape == (161, 57, 3)
    assert markers.rate_hz == 100.0 and markers.unit_in_file == "mm"
    missing = np.isnan(markers.positions[:, :, 0])
    assert missing.sum() == sum(gap["frames"] for gap in truth["gaps"]) == 9
    for gap in truth["gaps"]:
        column = missing[:, markers.find(gap["marker"])]
        first, last = round(gap["start_s"] * 100), round(gap["end_s"] * 100)
        assert column[first : last + 1].all() and column.sum() == gap["frames"]


def test_sample_round_trip_within_noise(truth):
    """Reader → pipeline on the bundled sample (1 mm noise) against the simulated truth."""
    settings = load_trial_settings()
    plane = settings.plane.model_copy(
        update={"initial_bar_displacement_m": tuple(truth["initial_bar_displacement_m"])})
    trial = prepare_trial(SAMPLE, settings=settings.model_copy(update={"plane": plane}))
    t = np.array(truth["t_s"])
    frames = np.round(t * 1000).astype(int)
    points = np.array(truth["points_m"])
    error = trial.points[frames] - points
    # Joint centres average 2-12 markers of 1 mm noise each: RMS well under the added noise.
    assert np.sqrt(np.mean(error**2)) < 1e-3
    seen = np.array(truth["driven_seen"])
    q_error = trial.driven_q[frames] - seen
    assert np.sqrt(np.mean(q_error[:, ANGLES] ** 2, axis=0)).max() < 0.5 * DEG
    assert np.abs(q_error[:, ANGLES]).max() < 1.0 * DEG
    assert np.abs(q_error[:, LENGTHS]).max() < 2e-3
    # Initial state: the bar to 2 mm, the hand rotation (75 mm bar-to-wrist) to 0.5°.
    assert trial.free_q0[:2] == pytest.approx(truth["free_q0"][:2], abs=2e-3)
    assert trial.free_q0[2] == pytest.approx(truth["free_q0"][2], abs=0.5 * DEG)
    # Initial rates (fit over the first 0.25 s): rotation about the bar 1.30 vs 1.36 rad/s;
    # over 20 noise seeds the RMS error is 0.07 rad/s, the bar's 0.02 m/s.
    assert trial.free_qd0[2] == pytest.approx(truth["free_qd0"][2], abs=0.15)
    assert trial.free_qd0[:2] == pytest.approx(truth["free_qd0"][:2], abs=0.05)
    # The engine's DrivenMotion carries the same numbers, ready for bemore.model.simulate.
    from bemore.model import DrivenMotion

    assert isinstance(trial.driven, DrivenMotion)
    assert trial.driven.dt == pytest.approx(0.001)
    assert np.array_equal(trial.driven.qdd, trial.driven_qdd)
    # A full circle about the bar, handstand to handstand.
    assert trial.free_seen[-1, 2] - trial.free_seen[0, 2] == pytest.approx(2 * np.pi, abs=0.02)


def test_generator_noise_gaps_and_seed():
    from bemore.trial.markerset import joint_centres_3d, load_markerset
    from bemore.trial.plane import Plane
    from bemore.trial.synthetic import SyntheticSpec, synthesize

    spec = SyntheticSpec(duration_s=1.5, noise_mm=0.0, gaps=2, gap_frames=(3, 3), seed=11,
                         prefix="")
    markers, truth = synthesize(spec)
    assert markers.positions.shape == (151, 57, 3)
    assert np.isnan(markers.positions[:, :, 0]).sum() == 6
    assert truth.free_q[-1, 2] - truth.free_q[0, 2] == pytest.approx(2 * np.pi, abs=1e-4)
    # Without noise the recipes of configs/markerset.toml give back the simulated points.
    filled = markers.with_positions(np.nan_to_num(markers.positions))
    centres = joint_centres_3d(filled, load_markerset())
    lab = Plane(np.array([0.0, 0.0, 2.5]), np.array([1.0, 0, 0]), np.array([0, 0, 1.0]),
                np.array([0, -1.0, 0]))
    complete = ~np.isnan(markers.positions[:, :, 0]).any(axis=1)
    assert np.abs(lab.project(centres)[complete] - truth.points[complete]).max() < 1e-12
    noisy, _ = synthesize(SyntheticSpec(duration_s=1.5, noise_mm=2.0, gaps=0, seed=5))
    residual = noisy.positions - markers.positions
    ok = ~np.isnan(residual)
    assert np.std(residual[ok]) == pytest.approx(2e-3, rel=0.02)
