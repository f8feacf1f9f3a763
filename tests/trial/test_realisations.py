"""The trial chain run on copies of a trial's markers is the chain: given the trial's own
gap-filled markers it gives the trial's numbers back (both acromion conventions), and the
copies' noise reaches the joint centres as the low-pass leaves it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bemore.trial import prepare_trial
from bemore.trial.filtering import low_pass
from bemore.trial.markerset import load_markerset
from bemore.trial.realisations import noisy_markers, prepare_realisations
from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_trial.c3d"


def _trunk_side_trial(folder: Path):
    markerset = load_markerset()
    markerset = markerset.model_copy(update={"conventions": markerset.conventions.model_copy(
        update={"acromion_side": "trunk"})})
    spec = SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=4, acromion_side="trunk")
    path, _, _ = write_synthetic_trial(spec, folder / "trunk.c3d")
    trial = prepare_trial(path, markerset)
    assert trial.arm_end is not None
    return trial


@pytest.mark.parametrize("side", ["arm", "trunk"])
def test_the_trials_own_markers_give_the_trial_back(side, tmp_path) -> None:
    trial = prepare_trial(SAMPLE) if side == "arm" else _trunk_side_trial(tmp_path)
    copy = prepare_realisations(trial, trial.unfiltered[None])
    assert copy.count == 1
    assert np.abs(copy.joint_centres[0] - trial.joint_centres).max() < 1e-12  # m
    assert np.abs(copy.driven_q[0] - trial.driven_q).max() < 1e-12
    assert np.abs(copy.driven_qd[0] - trial.driven_qd).max() < 1e-9
    assert np.abs(copy.driven_qdd[0] - trial.driven_qdd).max() < 1e-7
    assert np.abs(copy.free_q0[0] - trial.free_q0).max() < 1e-12
    assert np.abs(copy.free_qd0[0] - trial.free_qd0).max() < 1e-12
    assert np.abs(copy.free_seen0[0] - trial.free_seen[0]).max() < 1e-12
    for name, length in trial.segment_lengths_m.items():
        assert copy.segment_lengths_m[0][name] == pytest.approx(length, abs=1e-12), name


def test_the_copies_noise_is_what_the_low_pass_leaves_of_it() -> None:
    trial = prepare_trial(SAMPLE)
    sigma = 0.001
    copies = prepare_realisations(trial, noisy_markers(trial, 200, sigma, seed=1))
    base = prepare_realisations(trial, trial.unfiltered[None])
    # The elbow centre is the mean of two markers; mid-trial (a marker frame), its noise is
    # white noise of σ/√2 low-passed: its variance is σ²/2 · Σh², h the filter's impulse
    # response (the projection onto the plane's orthonormal axes keeps σ per axis).
    frames = trial.unfiltered.shape[0]
    impulse = np.zeros((frames, 1))
    impulse[frames // 2] = 1.0
    h = low_pass(impulse, trial.rate_hz_original, trial.settings.filter.cutoff_hz,
                 trial.settings.filter.order)[:, 0]
    expected = sigma / np.sqrt(2.0) * np.sqrt(h @ h)
    middle = 10 * (frames // 2)  # 1 kHz frame of marker frame frames // 2
    spread = np.std(copies.joint_centres[:, middle, 2] - base.joint_centres[0, middle, 2],
                    axis=0, ddof=1)
    # 200 draws: a standard deviation within 4 of its 5 % sampling error.
    assert spread == pytest.approx(np.full(2, expected), rel=0.2)


def test_the_recipes_other_form_moves_only_the_arm_end_and_linearly(tmp_path) -> None:
    trial = _trunk_side_trial(tmp_path)
    raw = np.repeat(trial.unfiltered[None], 3, axis=0)
    copies = prepare_realisations(trial, raw, np.array([0.0, 0.5, 1.0]))
    alone = prepare_realisations(trial, trial.unfiltered[None])
    # Weight 0 is the chain's recipe; the joint centres of the cost do not use the arm end.
    assert np.abs(copies.driven_q[0] - alone.driven_q[0]).max() < 1e-12
    assert np.abs(copies.joint_centres - alone.joint_centres[0]).max() < 1e-12
    # The arm end moves the shoulder's driven angle and the upper arm's measured length: by
    # the two forms' difference, millimetres on a 29 cm upper arm (< 5 mm, > 1 µm).
    shift = abs(copies.segment_lengths_m[2]["upper_arm"] - copies.segment_lengths_m[0]["upper_arm"])
    assert 1e-6 < shift < 5e-3
    step = copies.driven_q[2] - copies.driven_q[0]
    assert 0.0 < np.abs(step).max() < 5e-3 / 0.25  # rad: < 5 mm across a ≥ 25 cm lever
    # The arm end is a linear blend of the two forms and the chain after it is linear in the
    # points up to the driven angles (atan2), so weight 0.5 is halfway to first order.
    halfway = copies.driven_q[1] - copies.driven_q[0]
    assert np.abs(halfway - 0.5 * step).max() < 0.05 * np.abs(step).max()
