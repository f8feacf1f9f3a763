"""The functional shoulder centre (SCoRE): recovered from synthetic calibration C3D files made
by an independent generator (tests/trial/score_synthetic.py), its conditioning reported, a
movement too small refused in one line, the centre written into the athlete's profile and used
by the trial preparation instead of the acromions."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from score_synthetic import (
    ACROMION_IN_THORAX,
    ARM,
    CENTRE_IN_THORAX,
    THORAX,
    calibration_markers,
    calibration_trial,
    rotation,
)

from bemore.cli import cli
from bemore.errors import DataError
from bemore.paths import data_dir, default_config
from bemore.profile import load_profile
from bemore.trial import prepare_trial
from bemore.trial.markerset import POINT_NAMES
from bemore.trial.readers import read_markers
from bemore.trial.score import (
    centre_in_lab,
    cluster_poses,
    estimated_pose_noise,
    kabsch,
    score_markers,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_a_known_centre_within_5_mm_at_1_mm_noise(tmp_path: Path, seed: int) -> None:
    truth = calibration_trial(tmp_path / "cal.c3d", noise_m=0.001, seed=seed)
    markers = read_markers(tmp_path / "cal.c3d")
    result = score_markers(markers, list(THORAX), list(ARM), "R_ACROMION")
    # The centre, carried by the thorax markers alone (as a bar trial does), against the truth.
    lab = centre_in_lab(markers, result.profile_table("right", "cal.c3d"))
    error_mm = np.sqrt(np.mean(np.sum((lab - truth) ** 2, axis=1))) * 1e3
    assert error_mm < 5.0
    # Both segments' estimates meet (residual ≈ the markers' noise through the poses).
    assert result.residual_mm < 3.0
    assert result.frames == 600 and result.spread_rad > 0.2 and result.condition < 10.0
    # The acromion → centre offset a bar trial adds to the acromion-based shoulder.
    true_offset = CENTRE_IN_THORAX - ACROMION_IN_THORAX  # same length in any thorax frame
    assert abs(np.linalg.norm(result.acromion_offset_m) - np.linalg.norm(true_offset)) < 0.005


# Settings other than the plain least squares' assumptions (white, equal noise, seen through a
# rigid fit): markers smoothed by the lab (noise low-pass filtered at 6 Hz: errors correlated
# over ~10 frames), unequal across markers, a smaller arm cluster; and noise large against a
# smaller movement (the poses' noise on both sides of the least squares: errors in variables),
# unequal across the lab's axes and the markers.
COVERAGE_SETTINGS = {
    "smoothed markers": {"noise_m": 0.0015, "cutoff_hz": 6.0, "arm_scale": 0.7,
                         "marker_noise_spread": 0.3},
    "errors in variables": {"noise_m": 0.0025, "amplitude": 0.4, "axis_noise": (0.8, 1.0, 1.25),
                            "marker_noise_spread": 0.3},
}


@pytest.mark.parametrize("setting", list(COVERAGE_SETTINGS))
def test_the_stated_standard_error_covers_the_centre_error(setting: str) -> None:
    """Over 50 calibrations, the error of c_t per axis against its stated standard error: about
    95 % within 2 SE, none beyond 4, no systematic lean (the plain least squares leaned by 1.5
    SE on "errors in variables"; white-frame SEs covered 41–53 % on "smoothed markers")."""
    z = []
    for seed in range(50):
        markers, centre, clean = calibration_markers(seed=seed, **COVERAGE_SETTINGS[setting])
        result = score_markers(markers, list(THORAX), list(ARM), "R_ACROMION")
        # The truth in the thorax cluster's reference frame (its first noisy frame, centred):
        # where the rigid fit of the noise-free first frame onto it takes the true centre.
        R, t = kabsch(clean[0, :len(THORAX)], result.thorax_shape_m)
        error_mm = (result.centre_thorax_m - (R @ centre[0] + t)) * 1e3
        z.append(error_mm / result.standard_error_mm)
    z = np.array(z)
    assert np.mean(np.abs(z) < 2.0) >= 0.9, np.mean(np.abs(z) < 2.0, axis=0)
    assert np.abs(z).max() < 4.0, np.abs(z).max()
    assert np.all(np.abs(z.mean(axis=0)) < 0.45), z.mean(axis=0)  # ±3 sd of a mean of 50


def test_conditioning_follows_the_movement_and_a_small_one_is_refused(tmp_path: Path) -> None:
    spreads = []
    for amplitude in (1.0, 0.3):
        calibration_trial(tmp_path / "cal.c3d", amplitude=amplitude, seed=4)
        result = score_markers(read_markers(tmp_path / "cal.c3d"), list(THORAX), list(ARM),
                               "R_ACROMION")
        spreads.append((result.spread_rad, result.condition))
    assert spreads[0][0] > 2.5 * spreads[1][0] and spreads[0][1] < spreads[1][1]
    calibration_trial(tmp_path / "small.c3d", amplitude=0.05, seed=4)
    with pytest.raises(DataError) as error:
        score_markers(read_markers(tmp_path / "small.c3d"), list(THORAX), list(ARM),
                      "R_ACROMION")
    assert "moves too little" in str(error.value) and "\n" not in str(error.value)


def test_cli_writes_the_centre_into_the_profile(tmp_path: Path) -> None:
    calibration_trial(tmp_path / "cal.c3d", seed=5)
    profile = tmp_path / "athlete.toml"
    shutil.copy(default_config("athlete.example.toml"), profile)
    runner = CliRunner()
    for _ in range(2):  # a second calibration replaces the first table
        result = runner.invoke(cli, ["trial", "score", str(tmp_path / "cal.c3d"), "--profile",
                                     str(profile)])
        assert result.exit_code == 0, result.output
    assert "conditioning: rotation spread" in result.output
    # What the ± covers, and the bias it cannot show, are said.
    assert "1 standard error per axis" in result.output
    assert "not in it: skin and cluster sliding over the bone" in result.output
    assert profile.read_text().count("[shoulder_centre]") == 1
    loaded = load_profile(profile)
    assert loaded.segment_lengths_m["upper_arm"] == 0.290  # the rest of the profile is kept
    centre = loaded.shoulder_centre
    assert centre["side"] == "right" and centre["thorax_markers"] == list(THORAX)
    small = runner.invoke(cli, ["trial", "score", str(tmp_path / "none.c3d")])
    assert small.exit_code == 2 and small.output.count("\n") == 1
    calibration_trial(tmp_path / "small.c3d", amplitude=0.05, seed=5)
    refused = runner.invoke(cli, ["trial", "score", str(tmp_path / "small.c3d")])
    assert refused.exit_code == 2 and "moves too little" in refused.output
    assert refused.output.count("\n") == 1


def _sample_centre(offset_m: tuple[float, float, float]) -> dict:
    """A [shoulder_centre] table for the bundled sample: the centre ``offset_m`` from the
    acromion in the frame of its C7/STERNUM/trochanter cluster (first frame = lab axes)."""
    markers = read_markers(data_dir() / "sample_trial.c3d")
    labels = list(THORAX)
    first = np.stack([markers.marker(label)[0] for label in labels])
    return {"side": "right", "method": "SCoRE (Ehrig et al. 2006)", "calibration": "test",
            "thorax_markers": labels, "thorax_shape_m": (first - first.mean(axis=0)).tolist(),
            "centre_m": [0.0, 0.0, 0.0], "acromion": "R_ACROMION",
            "acromion_offset_m": list(offset_m), "residual_mm": 1.0, "spread_rad": 0.3,
            "condition": 5.0}


def test_the_trial_uses_the_profile_centre_and_says_how_far_it_is() -> None:
    sample = data_dir() / "sample_trial.c3d"
    plain = prepare_trial(sample)
    assert np.isnan(plain.shoulder_centre_difference_mm)
    same = prepare_trial(sample, shoulder_centre=_sample_centre((0.0, 0.0, 0.0)))
    moved = prepare_trial(sample, shoulder_centre=_sample_centre((0.02, 0.0, 0.0)))
    # No offset: the acromion-based shoulder. 20 mm forward in the trunk's frame (in the
    # plane: the cluster turns about the bar's axis) reads 20 mm apart at every frame.
    assert same.shoulder_centre_difference_mm < 0.01
    assert moved.shoulder_centre_difference_mm == pytest.approx(20.0, abs=0.5)
    k = POINT_NAMES.index("shoulder")
    apart = np.linalg.norm(moved.points[:, k] - plain.points[:, k], axis=1)
    assert np.all(np.abs(apart - 0.02) < 0.001)
    assert any("functional centre" in note for note in moved.notes)


def test_the_pose_noise_model_matches_the_rigid_fits_actual_errors() -> None:
    """The rotation noise (and its correlation with the translation's) that the bias
    correction uses, estimated from the markers' scatter alone, against the actual errors of
    4000 rigid fits of a turning arm cluster whose markers have unequal, anisotropic noise
    (0.5–2 mm, ×0.7/1/1.4 across the lab's axes): the errors computed from the known poses."""
    rng = np.random.default_rng(7)
    shape = np.array(list(ARM.values()))
    shape = shape - shape.mean(axis=0)
    frames = 4000
    turns = [rotation(axis, 0.3 * np.sin(np.arange(frames) * rate + phase))
             for axis, rate, phase in (([1, 0, 0], 0.011, 0.0), ([0, 1, 0], 0.017, 1.0),
                                       ([0, 0, 1], 0.023, 2.0))]
    R = turns[0] @ turns[1] @ turns[2]
    t = rng.normal(0.0, 0.1, (frames, 3))
    level = np.array([0.5, 1.0, 1.5, 2.0])[None, :, None] * 1e-3
    noise = rng.normal(size=(frames, 4, 3)) * level * np.array([0.7, 1.0, 1.4])
    positions = np.einsum("fij,mj->fmi", R, shape) + t[:, None] + noise
    R_fit, t_fit, _, _ = cluster_poses(positions, shape)
    estimated = estimated_pose_noise(positions, R_fit, t_fit)
    # The actual errors: δ from R_fit = R·exp([δ]×), ε̄ = Rᵀ·(t_fit − t), in the cluster frame.
    relative = np.einsum("fji,fjk->fik", R, R_fit)
    delta = 0.5 * np.stack([relative[:, 2, 1] - relative[:, 1, 2],
                            relative[:, 0, 2] - relative[:, 2, 0],
                            relative[:, 1, 0] - relative[:, 0, 1]], axis=1)
    centroid = np.einsum("fji,fj->fi", R, t_fit - t)
    actual = delta.T @ delta / frames

    def off(C: np.ndarray) -> float:  # relative (Frobenius) distance from the actual covariance
        return float(np.linalg.norm(C - actual) / np.linalg.norm(actual))

    assert off(estimated.rotation_covariance) < 0.1
    actual_cross = np.mean(np.cross(centroid, delta), axis=0)
    assert np.linalg.norm(estimated.cross - actual_cross) < 0.25 * np.linalg.norm(actual_cross)
    # Every marker given the same noise in every direction (the first model): far off.
    S = shape.T @ shape
    assert off(float(np.mean(noise**2)) * np.linalg.inv(np.trace(S) * np.eye(3) - S)) > 0.25
