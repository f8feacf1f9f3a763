"""prepare_trial on synthetic bar trials whose coordinates are known (docs/model.md geometry)."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.trial.coordinates import DRIVEN_NAMES, driven_from_points, free_from_points, wrap
from bemore.trial.markerset import load_trial_settings
from bemore.trial.pipeline import prepare_trial

DEG = np.pi / 180
ANGLES = [i for i, name in enumerate(DRIVEN_NAMES) if not name.endswith("_length")]
LENGTHS = [i for i, name in enumerate(DRIVEN_NAMES) if name.endswith("_length")]


def _settings(initial_bar):
    settings = load_trial_settings()
    plane = settings.plane.model_copy(update={"initial_bar_displacement_m": tuple(initial_bar)})
    return settings.model_copy(update={"plane": plane})


def test_inverse_of_docs_geometry_is_exact():
    """Noise-free points from known coordinates give those coordinates back."""
    from docs_kinematics import circle_coordinates, points_from_coordinates

    t = np.linspace(0.0, 2.0, 201)
    free, driven = circle_coordinates(t)
    points = points_from_coordinates(free, driven)
    assert np.abs(driven_from_points(points) - driven).max() < 1e-12
    seen = free_from_points(points)
    assert np.abs(seen[:, :3] - free[:, :3]).max() < 1e-12
    # The hand rotation grows by a full turn and is not wrapped.
    assert seen[-1, 2] - seen[0, 2] == pytest.approx(2 * np.pi)


def test_wrap_range():
    assert wrap(np.array([np.pi, -np.pi, 3 * np.pi / 2]))[:2] == pytest.approx([np.pi, np.pi])
    assert wrap(np.array([3 * np.pi / 2]))[0] == pytest.approx(-np.pi / 2)


def test_noise_free_trial_through_c3d_and_pipeline(write_trial):
    path, t, free, driven, points = write_trial(noise_m=0.0)
    trial = prepare_trial(path, settings=_settings(free[0, :2]))
    assert trial.t[0] == 0.0 and trial.t[1] == pytest.approx(0.001)
    assert trial.t.size == 2001 and trial.rate_hz_original == 100.0
    frames = np.round(t * 1000).astype(int)
    # Clean data still meet the filter: the ends (quadratic padding) and the fast feet (up to
    # 1.7 mm at the first and last frames), elsewhere 0.6 mm at most.
    error = np.abs(trial.points[frames] - points)
    assert error.max() < 2e-3
    assert error[5:-5].max() < 1e-3
    assert np.abs(trial.driven_q[frames][:, ANGLES] - driven[:, ANGLES]).max() < 0.15 * DEG
    # The start of the filtered trial: the bar exactly (it defines the origin); the rotation
    # about the bar is the forearm's angle (wrist → elbow) minus the prepared wrist angle, so
    # the chain starts on the joint centres: 0.075° from the truth on clean data (the ends of
    # the 6 Hz forearm, 0.036°, and of the 3 Hz wrist angle, 0.040°; the hand's own angle is
    # 0.037° off).
    assert trial.free_q0[:2] == pytest.approx(free[0, :2], abs=1e-12)
    wrist, elbow = trial.points[0, 1], trial.points[0, 2]
    forearm = np.arctan2(elbow[1] - wrist[1], elbow[0] - wrist[0])
    assert trial.free_q0[2] == pytest.approx(forearm - trial.driven_q[0, 0], abs=1e-12)
    assert trial.free_q0[2] == pytest.approx(free[0, 2], abs=0.1 * DEG)
    assert trial.joint_centre_names == ("bar", "wrist", "elbow", "neck", "hip", "knee", "ankle")
    assert trial.joint_centres.shape == (2001, 7, 2)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_noisy_trial_within_noise_and_half_degree(write_trial, seed):
    """1 mm marker noise: joint centres within the noise (RMS), every angle within 0.5° RMS and
    1° at worst, every length within 2 mm at worst.

    The worst single-frame error is the wrist angle's: its segment, bar to wrist, is 75 mm, so
    the 0.5 mm noise of a 4-marker joint centre is 0.4° per frame before filtering.
    """
    path, t, free, driven, points = write_trial(noise_m=1e-3, seed=seed)
    trial = prepare_trial(path, settings=_settings(free[0, :2]))
    frames = np.round(t * 1000).astype(int)
    error = trial.points[frames] - points
    assert np.sqrt(np.mean(error**2)) < 1e-3
    q_error = trial.driven_q[frames] - driven
    assert np.sqrt(np.mean(q_error[:, ANGLES] ** 2, axis=0)).max() < 0.5 * DEG
    assert np.abs(q_error[:, ANGLES]).max() < 1.0 * DEG
    assert np.abs(q_error[:, LENGTHS]).max() < 2e-3


def test_velocities_and_accelerations_match_the_motion(write_trial):
    """Driven rates are the time derivatives (checked against finite differences of the truth)."""
    from docs_kinematics import circle_coordinates

    path, _, free, *_ = write_trial(noise_m=0.0)
    trial = prepare_trial(path, settings=_settings(free[0, :2]))
    t = trial.t
    _, truth = circle_coordinates(t)
    qd_truth = np.gradient(truth, t, axis=0)
    qdd_truth = np.gradient(qd_truth, t, axis=0)
    inner = slice(100, -100)  # away from the ends, where one-sided differences are poor
    hip = DRIVEN_NAMES.index("hip")
    assert np.abs(trial.driven_qd[inner, hip] - qd_truth[inner, hip]).max() < 0.02
    assert np.abs(trial.driven_qdd[inner, hip] - qdd_truth[inner, hip]).max() < 0.5
    # the peak hip rate of the motion is 1.4·π/2 ≈ 2.2 rad/s, its peak acceleration ≈ 6.9 rad/s²
    assert np.abs(trial.driven_qd[:, hip]).max() == pytest.approx(1.4 * np.pi / 2, rel=0.02)


def test_short_gap_filled_and_noted(write_trial):
    def gap(markers):
        positions = markers.positions.copy()
        positions[100:106, markers.find("R_ELBOW")] = np.nan
        return markers.with_positions(positions)

    path, t, free, _driven, points = write_trial(edit=gap)
    trial = prepare_trial(path, settings=_settings(free[0, :2]))
    assert "filled Gymnast:R_ELBOW 1.000–1.050 s (6 frames)" in trial.notes
    frames = np.round(t * 1000).astype(int)
    assert np.abs(trial.points[frames, 2] - points[:, 2]).max() < 1e-3


def test_trimming(write_trial):
    path, _t, _free, *_ = write_trial()
    settings = load_trial_settings()
    settings = settings.model_copy(
        update={"trim": settings.trim.model_copy(update={"start_s": 0.5, "end_s": 1.5})}
    )
    trial = prepare_trial(path, settings=settings)
    assert trial.duration_s == pytest.approx(1.0)
    assert "trimmed to 0.500–1.500 s of the recording" in trial.notes


def test_plane_orientation_chest_forward_and_counter_clockwise(write_trial):
    """Whichever way the bar markers' principal axis points, the chest faces +x at the start
    and the circle turns counter-clockwise (hand rotation grows by 2π)."""
    path, _t, free, *_ = write_trial(prefix="")
    trial = prepare_trial(path, settings=_settings(free[0, :2]))
    assert trial.free_seen[-1, 2] - trial.free_seen[0, 2] == pytest.approx(2 * np.pi, abs=0.01)
    assert trial.free_seen[0, 2] == pytest.approx(np.pi / 2, abs=1e-3)
    # lab frame of the synthetic trials: model x = lab X, y = lab Z, z = −lab Y
    assert trial.plane_axes == pytest.approx(np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]]),
                                             abs=1e-6)


def test_moving_the_origin_to_a_bar_deflection(write_trial):
    """A trial prepared with origin at the bar's start, then moved to a 12 mm sag, equals the
    trial prepared with that sag in [plane] initial_bar_displacement_m."""
    path, *_ = write_trial(noise_m=0.0)
    at_start = prepare_trial(path, settings=_settings((0.0, 0.0)))
    assert at_start.free_q0[:2] == pytest.approx([0.0, 0.0], abs=1e-12)
    moved = at_start.with_initial_bar_displacement((0.002, -0.012))
    direct = prepare_trial(path, settings=_settings((0.002, -0.012)))
    assert moved.free_q0 == pytest.approx(direct.free_q0, abs=1e-12)
    assert np.abs(moved.joint_centres - direct.joint_centres).max() < 1e-12
    assert moved.plane_origin == pytest.approx(direct.plane_origin, abs=1e-12)
    assert np.array_equal(moved.driven_q, at_start.driven_q)
    assert moved.joint_centres[0, 0] - at_start.joint_centres[0, 0] == pytest.approx(
        [0.002, -0.012], abs=1e-12)


def _rotation(axis, angle_rad: float) -> np.ndarray:
    """Rotation matrix about ``axis`` (Rodrigues)."""
    k = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle_rad) * cross + (1 - np.cos(angle_rad)) * cross @ cross


@pytest.mark.parametrize("lab", ["yaw 90°", "yaw 180°", "tilt 3°", "mirrored"])
def test_the_labs_orientation_does_not_change_the_trial(tmp_path, lab):
    """The same recording in a lab whose axes point elsewhere (the bar along X, the circle
    turning the other way in lab X, the floor tilted, a left-handed lab): the same prepared
    trial — the chain finds the plane, its orientation and the sense of the circle from the
    markers, not from the lab's axes."""
    from bemore.trial.c3d import write_c3d
    from bemore.trial.synthetic import SyntheticSpec, synthesize

    markers, _ = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=2))
    R = {"yaw 90°": _rotation([0, 0, 1], np.pi / 2), "yaw 180°": _rotation([0, 0, 1], np.pi),
         "tilt 3°": _rotation([1, 0, 0], np.radians(3.0)),
         "mirrored": np.diag([1.0, -1.0, 1.0])}[lab]
    write_c3d(tmp_path / "as_made.c3d", markers, "as made")
    moved = markers.with_positions(np.einsum("ij,fmj->fmi", R, markers.positions), lab)
    write_c3d(tmp_path / "moved.c3d", moved, lab)
    reference, trial = (prepare_trial(tmp_path / name) for name in ("as_made.c3d", "moved.c3d"))
    # a hundredth of the marker noise (the tilted plane projects the noise a little apart)
    assert np.abs(trial.points - reference.points).max() < 1e-5  # m
    assert np.degrees(np.abs(trial.driven_q - reference.driven_q).max()) < 1e-3
    assert np.abs(trial.free_q0 - reference.free_q0).max() < 1e-5
